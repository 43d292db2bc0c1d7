"""Pooling requests against the embedded llama.cpp server (xllamacpp +
SmolLM2-135M GGUF) that tokenbench launches itself: ``--api embeddings`` turns on its --embedding
knob (llama-server's ``--embedding --pooling mean``). One short closed-loop run of /v1/embeddings:
every answer holds one vector per input, its prompt tokens are llama.cpp's usage, and the streamed
metrics are absent. (/v1/rerank on llama.cpp needs a reranker GGUF with --pooling rank: none here.)"""

import json

import pytest
from preset_helpers import tokenbench

pytestmark = pytest.mark.e2e

BATCH, INPUT_TOKENS, REQUESTS = 4, 32, 6


@pytest.fixture(scope="module")
def embedded_run(tmp_path_factory, embedded_gguf):
    out = tmp_path_factory.mktemp("e2e") / "embeddings"
    args = ["--api", "embeddings", "--batch-size", str(BATCH), "--users", "2", "--max-requests", str(REQUESTS)]
    proc = tokenbench("run", *args, "--input-tokens", str(INPUT_TOKENS), "--out", str(out), "--no-live", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_llamacpp_embeds_every_input_with_its_own_prompt_tokens(embedded_run):
    records = [json.loads(line) for line in (embedded_run / "records.jsonl").read_text().splitlines()]
    assert [(r["outcome"], r["inputs"]) for r in records] == [("ok", BATCH)] * REQUESTS, [r["error"] for r in records]
    for r in records:
        assert r["chunk_times_s"] == [] and r["output_tokens"] is None and r["end_s"] == r["closed_s"]
        assert r["prompt_tokens"] is not None and r["prompt_tokens"] >= BATCH * INPUT_TOKENS * 0.8, r
    point = json.loads((embedded_run / "results.json").read_text())["points"][0]
    assert point["pooling"]["prompt_tokens_source"] == {"server": REQUESTS}
    assert point["pooling"]["inputs"] == REQUESTS * BATCH and point["pooling"]["inputs_per_s"] > 0
    assert point["ttft_s"]["count"] == 0 and point["e2e_s"]["count"] == REQUESTS


def test_the_embedded_server_was_started_in_embedding_mode_with_mean_pooling(embedded_run):
    log = (embedded_run / "server.log").read_text()
    # llama.cpp's own words (tools/server, src/llama-context.cpp): embeddings on, pooling type 1 (mean)
    assert "embeddings enabled" in log and "but [1] was specified" in log, log[-2000:]
