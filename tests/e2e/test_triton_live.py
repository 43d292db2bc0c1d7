"""Triton live on CPU (NVIDIA PyTriton's tritonserver 2.51, made by scripts/setup_triton.sh, which
`make test` runs): tokenbench launches the embedded llama.cpp server, then Triton serving the
decoupled relay model in front of it, and drives /v2/models/ensemble/generate_stream; and, as a
known answer, Triton in front of the scripted mock, attached with --url."""

import json
import subprocess
import sys

import pytest
from run_helpers import mock_process

from tokenbench.backends import triton
from tokenbench.backends.base import LaunchSpec
from tokenbench.common.procs import free_port, stop, wait_http
from tokenbench.config import EngineKnobs

pytestmark = pytest.mark.e2e

OUTPUT_TOKENS = 16


def _run(out, *args):
    proc = subprocess.run(
        [sys.executable, "-m", "tokenbench", "run", *args, "--out", str(out), "--no-live"],
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    results = json.loads((out / "results.json").read_text())
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return records, results, [s for s in samples if s.get("kind") == "scrape" and s.get("ok")]


def test_triton_in_front_of_llamacpp_streams_every_token(triton_venv, embedded_gguf, tmp_path):
    records, results, scrapes = _run(
        tmp_path / "run",
        *("--backend", "triton", "--upstream", "llamacpp", "--users", "2", "--max-requests", "6"),
        *("--input-tokens", "32", "--output-tokens", str(OUTPUT_TOKENS), "--ignore-eos"),
    )
    assert len(records) == 6 and all(r["outcome"] == "ok" for r in records)
    # one Triton response per upstream chunk: llama.cpp streams a token per chunk
    assert all(len(r["chunk_times_s"]) == OUTPUT_TOKENS for r in records)
    # ignore_eos went through as min_tokens = max_tokens; the counts are the engine's own usage
    assert all((r["output_tokens"], r["output_tokens_source"]) == (OUTPUT_TOKENS, "server") for r in records)
    target = results["target"]
    assert (target["backend"], target["engine"], target["api"], target["model"]) == (
        "triton",
        "Triton Inference Server",
        "triton",
        "ensemble",
    )
    assert target["engine_version"] == "2.51.0"
    up = target["upstream"]
    assert up["backend"] == "xllamacpp" and up["engine_version"] and up["url"].startswith("http://127.0.0.1:")
    assert f"--upstream-url={up['url']}" in target["command"]
    assert (tmp_path / "run" / "server-upstream.log").exists()
    # the metrics port was scraped: Triton's nv_inference_* series, waiting normalized from them
    assert scrapes and all("waiting" in s["values"] for s in scrapes)
    success = [v for s in scrapes for k, v in s["raw"].items() if k.startswith("nv_inference_request_success")]
    assert max(success) == 6


@pytest.fixture
def triton_over_mock(triton_venv):
    """Triton (the relay model, run as the profile renders it) in front of the scripted mock."""
    with mock_process(ttft_ms=20, itl_ms=5) as upstream:
        port = free_port()
        spec = LaunchSpec(
            model="m",
            served_name="ensemble",
            host="127.0.0.1",
            port=port,
            knobs=EngineKnobs(),
            upstream_url=upstream,
            upstream_model="mock",
        )
        proc = subprocess.Popen(triton.layer_argv(spec), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_http(url + triton.PROFILE.ready_url_path(spec), 120.0, proc)
            yield url, triton.metrics_url(spec)
        finally:
            stop(proc, grace_s=10)


def test_attached_triton_relays_the_mock_chunk_for_chunk(triton_over_mock, tmp_path):
    url, metrics_url = triton_over_mock
    records, results, scrapes = _run(
        tmp_path / "attach",
        *("--url", url, "--backend", "triton", "--model", "ensemble", "--metrics-url", metrics_url),
        *("--users", "3", "--max-requests", "9", "--output-tokens", "12"),
    )
    # the mock sends exactly max_tokens content chunks of one token each, with continuous usage
    assert all(r["outcome"] == "ok" for r in records) and len(records) == 9
    assert all(len(r["chunk_times_s"]) == 12 and r["output_tokens"] == 12 for r in records)
    assert results["target"]["backend"] == "triton" and results["target"]["api"] == "triton"
    assert scrapes and all(s["values"].get("waiting") == 0.0 for s in scrapes)
