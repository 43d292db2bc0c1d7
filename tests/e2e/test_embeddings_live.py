"""Pooling requests against vLLM's CPU build serving SmolLM2-135M as an
embedding model: one launch (``--api embeddings`` turns on the --embedding knob: vLLM's ``--runner
pooling --convert embed``), then one short closed-loop run per API on it: /v1/embeddings,
/v1/rerank and /v1/score (vLLM serves scoring for any "embed" model: cosine of the two vectors).
Each answer must hold one result per input (else the record fails), its prompt tokens are vLLM's
usage, and the streamed metrics are absent. Set up by ``scripts/setup_vllm_cpu.sh`` (``make test``)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from tokenbench.backends.server import server_under_test
from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.run import pooling_launch, run
from tokenbench.rundir import read_records

pytestmark = pytest.mark.e2e

KV_CACHE_BYTES = 23_592_960  # 1,024 tokens of SmolLM2-135M (tests/e2e/test_vllm_cpu.py)
BATCH, INPUT_TOKENS, REQUESTS = 3, 32, 4
APIS = ("embeddings", "rerank", "score")


def _config(api: str, tokenizer: Path, out: Path) -> RunConfig:
    return RunConfig(
        target=TargetConfig(api=api, batch_size=BATCH),  # type: ignore[arg-type]
        loads=[UsersLoad(users=2)],
        stop=StopConfig(max_requests=REQUESTS),
        dataset=DatasetConfig(input_tokens=INPUT_TOKENS, tokenizer=str(tokenizer)),
        live=False,
        out_dir=out,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory, vllm_cpu):
    """One launch for the three APIs. Its own: the model served as an embedding model (vLLM's
    pooling runner) serves no completions, so no other module can share it."""
    base = tmp_path_factory.mktemp("vllm-embed")
    backend = vllm_cpu.backend(max_num_seqs=8, kv_cache_bytes=KV_CACHE_BYTES)
    backend = pooling_launch(backend, _config("embeddings", vllm_cpu.model, base).target)
    console = Console(file=io.StringIO())
    results = {}
    with server_under_test(backend, None, base / "server.log") as sut:
        for api in APIS:
            config = _config(api, vllm_cpu.model, base / api).model_copy(update={"backend": backend})
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
