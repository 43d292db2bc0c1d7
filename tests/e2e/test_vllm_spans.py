"""issue 24 live: vLLM CPU launched with --server-traces sends each request's llm_request span
(its traceparent honoured) to tokenbench's receiver; every request is joined, and the client's
TTFT is never below the server's. One launch, one short point. Set up by
``scripts/setup_vllm_cpu.sh`` (its venv has vLLM's OpenTelemetry packages)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tokenbench.records import RequestRecord
from tokenbench.spans.phases import SpanIndex, joined_phases

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".cache/vllm-venv/bin/python"
MODEL = ROOT / ".cache/models/SmolLM2-135M-Instruct"
KV_CACHE_BYTES = 23_592_960


def test_vllm_spans_join_every_request(tmp_path):
    if not (VENV_PYTHON.exists() and (MODEL / "config.json").exists()):
        message = "vLLM CPU is not set up: run scripts/setup_vllm_cpu.sh (make test does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "tokenbench",
        "run",
        "--backend",
        "vllm",
        "--model",
        str(MODEL),
        "--served-model-name",
        "smollm2",
        "--engine-bin",
        f"{VENV_PYTHON} -m vllm.entrypoints.launchers.api_server.entry",
        "--max-num-seqs",
        "4",
        "--max-model-len",
        "512",
        "--engine-arg=--enforce-eager",
        f"--engine-arg=--kv-cache-memory-bytes={KV_CACHE_BYTES}",
        "--engine-env",
        "HF_HUB_OFFLINE=1",
        "--ready-timeout",
        "300",
        "--api",
        "completions",
        "--users",
        "2",
        "--duration",
        "5",
        "--input-tokens",
        "64",
        "--output-tokens",
        "16",
        "--ignore-eos",
        "--server-traces",
        "--out",
        str(out),
        "--no-live",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "server traces: vLLM sends its spans to http://127.0.0.1:" in done.stderr
    results = json.loads((out / "results.json").read_text())
    server = results["points"][0]["server_phases"]
    print(json.dumps({k: server[k] for k in ("requests", "joined", "joined_share", "late_spans", "unknown_spans")}))
    print(json.dumps(server["clock"]))
    print(json.dumps({name: (d["p50"], d["max"]) for name, d in server["phases"].items()}))
    assert server["requests"] >= 4
    assert server["joined_share"] >= 0.99
    assert server["unknown_spans"] == 0
    assert server["clock"]["offset_s"] == 0.0, server["clock"]  # same host: the join allows 0
    records = [RequestRecord.from_json(json.loads(line)) for line in (out / "records.jsonl").read_text().splitlines()]
    clock = results["clock"]
    spans = SpanIndex.read(out / "server_spans.jsonl", clock["origin_unix_s"])
    phases, _ = joined_phases(records, spans, clock["origin_unix_s"], float("inf"))
    assert phases and all(p.client_minus_server_ttft_s >= 0 for p in phases.values())
    assert all(p.queue_s is not None and p.prefill_s is not None and p.decode_s is not None for p in phases.values())
