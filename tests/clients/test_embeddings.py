"""The pooling APIs without a server: each API's body (vLLM's request
models), the answer read whole (one result per input, usage's prompt tokens, errors), the
dataset's prompts batched into requests, --batch-size refused with a generative API, and the
--embedding knob rendered as each engine's own flags."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from run_helpers import resolved

from tokenbench.backends import llamacpp, sglang, vllm
from tokenbench.backends.base import LaunchSpec
from tokenbench.clients import wire_for
from tokenbench.clients.embeddings import PoolingAnswer
from tokenbench.clients.wire import WholeBody
from tokenbench.config import BackendConfig, EngineKnobs, TargetConfig
from tokenbench.datasets.pooling import pooling_requests
from tokenbench.errors import BackendError
from tokenbench.records import Pooling, Request
from tokenbench.run import pooling_launch

TARGET = resolved(url="http://h:1", api="embeddings")
BATCH = Request(prompt="a\n\nb", inputs=("a b c", "d e"), query="q w")


def test_each_api_sends_its_own_shape_to_its_own_path():
    assert wire_for("embeddings").payload(BATCH, TARGET) == {"model": "m", "input": ["a b c", "d e"]}
    assert wire_for("rerank").payload(BATCH, TARGET) == {"model": "m", "query": "q w", "documents": ["a b c", "d e"]}
    assert wire_for("score").payload(BATCH, TARGET) == {"model": "m", "text_1": "q w", "text_2": ["a b c", "d e"]}
    assert [wire_for(api).url(TARGET) for api in ("embeddings", "rerank", "score")] == [
        "http://h:1/v1/embeddings",
        "http://h:1/v1/rerank",
        "http://h:1/v1/score",
    ]
    # a plain request: its prompt is the one input (and the query)
    assert wire_for("rerank").payload(Request(prompt="x y"), TARGET)["documents"] == ["x y"]
    extra = TARGET.model_copy(update={"extra_body": {"dimensions": 8}})
    assert wire_for("embeddings").payload(BATCH, extra)["dimensions"] == 8


def _answer(api: str, body: bytes, request: Request = BATCH) -> PoolingAnswer:
    stream = wire_for(api).new_stream()
    assert isinstance(stream, PoolingAnswer) and not stream.chunked
    stream.for_request(request)
    decoder = WholeBody()
    assert decoder.feed_data(body[:7]) == [] and decoder.feed_data(body[7:]) == []  # nothing before the end
    for payload in decoder.close_data():
        assert stream.handle(payload) is False  # an answer is never a chunk
    return stream


def test_a_whole_answer_with_one_result_per_input_is_done_with_the_usage_prompt_tokens():
    body = b'{"id":"e1","data":[{"index":0,"embedding":[0.1]},{"index":1,"embedding":[0.2]}],'
    body += b'"usage":{"prompt_tokens":5,"total_tokens":5,"completion_tokens":0}}'
    s = _answer("embeddings", body)
    assert (s.done, s.failed, s.prompt_tokens, s.completion_tokens, s.response_id) == (True, False, 5, None, "e1")
    s = _answer("rerank", b'{"results":[{"index":1,"relevance_score":0.9},{"index":0,"relevance_score":0.1}]}')
    assert s.done and s.prompt_tokens is None
    s = _answer("score", b'{"data":[{"index":0,"score":0.5},{"index":1,"score":0.2}],"usage":{"prompt_tokens":9}}')
    assert s.done and s.prompt_tokens == 9
    # TEI's /rerank answers a bare list
    assert _answer("rerank", b'[{"index":0,"score":0.3},{"index":1,"score":0.2}]').done


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b'{"data":[{"index":0,"embedding":[0.1]}]}', "1 results for 2 inputs"),
        (b'{"object":"error","error":{"message":"bad"}}', "error answer"),
        (b"not json", "not JSON"),
        (b'{"results":[]}', "without 'data'"),
    ],
)
def test_an_answer_that_does_not_hold_every_input_fails(body, error):
    s = _answer("embeddings", body)
    assert s.failed and not s.done and error in (s.error or "")


def test_an_empty_body_gives_nothing_to_read():
    assert WholeBody().close_data() == []


def _prompts(n: int, trace: bool = False) -> list[Request]:
    return [
        Request(prompt=f"p{i}", expected_prompt_tokens=i, trace_time_s=float(i) if trace else None, trace_row=i)
        for i in range(n)
    ]


def test_a_dataset_becomes_requests_of_batch_size_inputs_without_sharing_texts():
    batches = pooling_requests(_prompts(7), "embeddings", 3)
    assert [b.inputs for b in batches] == [("p0", "p1", "p2"), ("p3", "p4", "p5")]
    assert [Pooling.of(b) for b in batches] == [Pooling(3)] * 2 and batches[0].expected_prompt_tokens == 0 + 1 + 2
    ranked = pooling_requests(_prompts(7), "rerank", 2)  # the query first, then 2 documents
    assert [(b.query, b.inputs) for b in ranked] == [("p0", ("p1", "p2")), ("p3", ("p4", "p5"))]
    # fewer prompts than one request: cycled
    assert pooling_requests(_prompts(2), "embeddings", 3)[0].inputs == ("p0", "p1", "p0")
    # a trace keeps one request per row, at the row's time
    rows = pooling_requests(_prompts(3, trace=True), "embeddings", 2)
    assert [(b.trace_time_s, b.inputs) for b in rows] == [(0.0, ("p0", "p1")), (1.0, ("p1", "p2")), (2.0, ("p2", "p0"))]


def test_batch_size_is_refused_with_a_generative_api():
    with pytest.raises(ValidationError, match="--batch-size 4 sets the inputs of a pooling request"):
        TargetConfig(api="chat", batch_size=4)
    with pytest.raises(ValidationError, match="--batch-size"):
        TargetConfig(batch_size=4)  # the default API is generative
    assert TargetConfig(api="score", batch_size=4).pooling


def _spec(**knobs) -> LaunchSpec:
    return LaunchSpec(model="m", served_name="s", host="127.0.0.1", port=1, knobs=EngineKnobs(**knobs))


def test_the_embedding_knob_is_each_engines_own_flags_and_refused_where_unmapped():
    args = vllm.local(_spec(embedding=True)).argv
    assert args[args.index("--runner") : args.index("--runner") + 4] == ("--runner", "pooling", "--convert", "embed")
    assert "--runner" not in vllm.local(_spec()).argv
    args = llamacpp.local(_spec(embedding=True, max_num_seqs=2)).argv
    assert args[args.index("--embedding") : args.index("--embedding") + 3] == ("--embedding", "--pooling", "mean")
    assert "--embedding" not in llamacpp.local(_spec(embedding=False)).argv
    with pytest.raises(BackendError, match="--embedding"):
        sglang.PROFILE.local(_spec(embedding=True))


def test_a_pooling_api_launches_an_embedding_server_unless_told_not_to():
    target = TargetConfig(api="embeddings")
    assert pooling_launch(BackendConfig(name="vllm"), target).knobs.embedding is True
    off = BackendConfig(name="vllm", knobs=EngineKnobs(embedding=False))
    assert pooling_launch(off, target).knobs.embedding is False
    assert pooling_launch(BackendConfig(name="vllm"), TargetConfig(api="chat")).knobs.embedding is None


@pytest.mark.parametrize(
    ("vllm_args", "ours"),
    [
        ("--backend openai-embeddings --random-batch-size 8", "--api embeddings --batch-size 8"),
        ("--backend vllm-rerank", "--api rerank"),
        ("--endpoint /v1/embeddings", "--api embeddings"),
        ("--endpoint /v1/score", "--api score"),
    ],
)
def test_vllm_bench_serve_spells_the_pooling_benchmarks_its_own_way(vllm_args, ours):
    from tokenbench.cli.vllm_flags import translate

    assert translate(vllm_args.split()) == ours.split()
