"""What a server says of one request (clients/server_report.py): each engine's fields read into the
record's Speculation and ServerTiming. vLLM's shape is the one observed live (vLLM CPU 0.32);
SGLang's and TensorRT-LLM's are replayed from wire-exact transcripts in tests/transcripts/ (their
``.meta.json`` gives the request the client must send, what the record must hold, and the sources
the bytes follow), through the OpenAI stream and the shared StreamingClient."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp import web
from run_helpers import resolved

from tokenbench.backends import PROFILES
from tokenbench.clients.openai import OpenAIStream, OpenAIWire
from tokenbench.clients.server_report import (
    llamacpp_speculation,
    llamacpp_timing,
    read_report,
    sglang_details,
    sglang_speculation,
    trtllm_perf_speculation,
    trtllm_perf_timing,
    trtllm_speculation,
    vllm_speculation,
    vllm_timing,
)
from tokenbench.clients.stream import StreamingClient, make_session
from tokenbench.config import TargetConfig
from tokenbench.records import Outcome, Request, RequestRecord, RunClock, ServerTiming, Speculation
from tokenbench.run import _decided

TRANSCRIPTS = Path(__file__).resolve().parent.parent / "transcripts"

# The final usage chunk of a vLLM CPU 0.32 stream with --enable-per-request-metrics and
# --per-request-spec-decode-metrics detailed (n-gram, k = 3), as it came.
VLLM_FINAL = (
    b'{"id":"cmpl-86a8","object":"text_completion","created":1796214620,"model":"smollm2","choices":[],'
    b'"usage":{"prompt_tokens":5,"total_tokens":29,"completion_tokens":24},'
    b'"metrics":{"time_to_first_token_ms":402.06,"generation_time_ms":2332.10,"queue_time_ms":0.0746,'
    b'"mean_itl_ms":101.39,"tokens_per_second":8.77,"speculative_decoding":{"mean_acceptance_length":4.0,'
    b'"draft_acceptance_rate":1.0,"acceptance_histogram":[0,0,0,6],"num_spec_steps":6,'
    b'"num_accepted_draft_tokens":18,"num_draft_tokens":18,"num_spec_tokens":3,'
    b'"per_step_accepted":[3,3,3,3,3,3],"per_step_drafted":[3,3,3,3,3,3]}}}'
)


def _stream_of(*events: bytes, chat: bool = False) -> OpenAIStream:
    stream = OpenAIStream(chat)
    for event in events:
        stream.handle(event)
    return stream


def _report(stream: OpenAIStream) -> tuple[Speculation | None, ServerTiming | None]:
    return read_report(stream.server_timings, stream.server_metrics, stream.sglext, stream.decoded_per_iter)


# --- vLLM ---------------------------------------------------------------------------------------


def test_vllm_final_usage_chunk_reads_every_speculation_and_timing_field():
    stream = _stream_of(VLLM_FINAL)
    assert stream.completion_tokens == 24 and stream.server_metrics is not None
    speculation, timing = _report(stream)
    assert speculation == Speculation(
        spec_steps=6,
        spec_draft_tokens=18,
        spec_accepted_tokens=18,
        spec_acceptance_length=4.0,
        spec_acceptance_rate=1.0,
        spec_tokens=3,
        spec_accepted_histogram=(0, 0, 0, 6),
        spec_step_accepted=(3, 3, 3, 3, 3, 3),
        spec_step_drafted=(3, 3, 3, 3, 3, 3),
        spec_from="vllm",
    )
    assert timing == ServerTiming(
        reported_queue_s=pytest.approx(0.0746e-3),
        reported_prefill_s=pytest.approx(0.40206),
        reported_ttft_s=pytest.approx(0.0746e-3 + 0.40206),  # its queue and its prefill: from the engine's queue
        reported_decode_s=pytest.approx(2.3321),
        reported_itl_s=pytest.approx(0.10139),
        reported_timing_from="vllm",
    )
    assert speculation.by_position() == ([6, 6, 6], [6, 6, 6])


def test_vllm_metrics_on_a_content_chunk_are_not_the_final_object():
    # only a choice-less chunk (the final usage one) carries vLLM's object: a choice's is not read
    stream = _stream_of(b'{"choices":[{"text":"a","finish_reason":null}],"metrics":{"queue_time_ms":1.0}}')
    assert stream.server_metrics is None


def test_vllm_speculation_alone_gives_no_timing_and_timing_alone_no_speculation():
    spec = {"num_spec_steps": 2, "num_draft_tokens": 6, "num_accepted_draft_tokens": 4, "num_spec_tokens": 3}
    assert read_report(None, {"speculative_decoding": spec}) == (
        Speculation(spec_steps=2, spec_draft_tokens=6, spec_accepted_tokens=4, spec_tokens=3, spec_from="vllm"),
        None,
    )
    speculation, timing = read_report(None, {"queue_time_ms": 2.0, "time_to_first_token_ms": 30.0})
    assert speculation is None
    assert timing == ServerTiming(
        reported_queue_s=0.002,
        reported_prefill_s=0.03,
        reported_ttft_s=pytest.approx(0.032),
        reported_timing_from="vllm",
    )


def test_vllm_fields_of_the_wrong_type_read_as_not_given():
    spec = vllm_speculation({"num_spec_steps": True, "num_draft_tokens": 6.0, "acceptance_histogram": [1, "2"]})
    assert spec == Speculation(spec_from="vllm")
    assert vllm_timing({"tokens_per_second": 8.0}) is None  # no field it maps: none timed


# --- llama.cpp ----------------------------------------------------------------------------------


TIMINGS = {
    "cache_n": 0,
    "prompt_n": 5,
    "prompt_ms": 41.5,
    "prompt_per_token_ms": 8.3,
    "predicted_n": 24,
    "predicted_ms": 480.0,
    "predicted_per_token_ms": 20.0,
    "predicted_per_second": 50.0,
    "draft_n": 30,
    "draft_n_accepted": 12,
}


def test_llamacpp_timings_on_the_last_chunk_read_drafts_and_its_own_timing():
    event = b'{"choices":[{"text":"","finish_reason":"length"}],"timings":' + json.dumps(TIMINGS).encode() + b"}"
    stream = _stream_of(event)
    assert stream.server_timings == TIMINGS
    speculation, timing = _report(stream)
    assert speculation == Speculation(
        spec_draft_tokens=30, spec_accepted_tokens=12, spec_acceptance_rate=0.4, spec_from="llamacpp"
    )
    assert timing == ServerTiming(
        reported_prefill_s=0.0415,
        reported_ttft_s=0.0415,  # from its slot starting it: a wait for a slot is not timed
        reported_decode_s=0.48,
        reported_itl_s=0.02,
        reported_timing_from="llamacpp",
    )
    assert speculation.by_position() is None  # no steps, no histogram


def test_llamacpp_without_drafts_says_nothing_of_speculation():
    plain = {k: v for k, v in TIMINGS.items() if not k.startswith("draft")}
    assert llamacpp_speculation(plain) is None
    assert llamacpp_speculation({"draft_n": 0, "draft_n_accepted": 0}) == Speculation(
        spec_draft_tokens=0, spec_accepted_tokens=0, spec_from="llamacpp"
    )
    assert llamacpp_timing({"cache_n": 3}) is None


def test_vllm_metrics_win_over_llamacpp_timings():
    speculation, timing = read_report(TIMINGS, {"speculative_decoding": {"num_spec_steps": 1}, "queue_time_ms": 1.0})
    assert speculation is not None and speculation.spec_from == "vllm"
    assert timing is not None and timing.reported_timing_from == "vllm"


# --- by_position --------------------------------------------------------------------------------


def test_by_position_is_exact_from_the_steps_in_order():
    # an n-gram step may propose fewer than k: each step's drafted count says which positions it drafted
    s = Speculation(spec_step_accepted=(2, 0, 1, 3), spec_step_drafted=(3, 1, 2, 3), spec_tokens=3)
    assert s.by_position() == ([3, 2, 1], [4, 3, 2])


def test_by_position_from_the_histogram_with_every_step_drafting_k():
    s = Speculation(spec_steps=8, spec_draft_tokens=24, spec_tokens=3, spec_accepted_histogram=(2, 1, 1, 4))
    assert s.by_position() == ([6, 5, 4], [8, 8, 8])


def test_by_position_from_the_histogram_leaves_drafts_unknown_when_a_step_proposed_fewer():
    fewer = Speculation(spec_steps=8, spec_draft_tokens=20, spec_tokens=3, spec_accepted_histogram=(2, 1, 1, 4))
    assert fewer.by_position() == ([6, 5, 4], None)
    unknown_k = Speculation(spec_draft_tokens=24, spec_accepted_histogram=(2, 1, 1, 4))
    assert unknown_k.by_position() == ([6, 5, 4], None)
    assert Speculation(spec_steps=3).by_position() is None


# --- SGLang -------------------------------------------------------------------------------------


def test_sglang_meta_info_keys_of_each_release_read_the_same():
    base = {"spec_verify_ct": 8, "spec_accept_rate": 0.625, "spec_accept_length": 3.0}
    want = Speculation(
        spec_steps=8,
        spec_draft_tokens=24,
        spec_accepted_tokens=15,
        spec_acceptance_length=3.0,
        spec_acceptance_rate=0.625,
        spec_tokens=3,
        spec_accepted_histogram=(2, 1, 1, 4),
        spec_from="sglang",
    )
    newest = {  # the canonical names with the previous release's aliases beside them
        "spec_num_correct_drafts": 15,
        "spec_num_proposed_drafts": 24,
        "spec_accepted_drafts": 15,
        "spec_proposed_drafts": 24,
        "spec_correct_drafts_histogram": [2, 1, 1, 4],
        "spec_accept_histogram": [2, 1, 1, 4],
    }
    previous = {"spec_accepted_drafts": 15, "spec_proposed_drafts": 24, "spec_accept_histogram": [2, 1, 1, 4]}
    oldest = {"spec_accept_token_num": 15, "spec_draft_token_num": 24}
    assert sglang_speculation(base | newest) == want
    assert sglang_speculation(base | previous) == want
    assert sglang_speculation(base | oldest) == Speculation(**{**_fields(want), "spec_accepted_histogram": None})


def _fields(s: Speculation) -> dict[str, object]:
    return {name: getattr(s, name) for name in Speculation.__dataclass_fields__}


def test_sglang_zeros_it_sends_for_absent_keys_read_as_not_given():
    # spec_tokens_details_from_meta_info sends an absent key as 0 or []
    details = {
        "spec_accept_rate": 0.0,
        "spec_accept_length": 0.0,
        "spec_num_correct_drafts": 0,
        "spec_num_proposed_drafts": 0,
        "spec_verify_ct": 5,
        "spec_correct_drafts_histogram": [],
    }
    assert sglang_speculation(details) == Speculation(spec_steps=5, spec_from="sglang")
    assert sglang_speculation({**details, "spec_verify_ct": 0}) is None  # no verify step: nothing said
    # drafts proposed and none accepted: a real 0, and a real rate of 0
    rejected = {**details, "spec_num_proposed_drafts": 15, "spec_accept_length": 1.2}
    assert sglang_speculation(rejected) == Speculation(
        spec_steps=5,
        spec_draft_tokens=15,
        spec_accepted_tokens=0,
        spec_acceptance_length=1.2,
        spec_acceptance_rate=0.0,
        spec_tokens=3,
        spec_from="sglang",
    )


def test_sglang_sglext_of_n_choices_is_a_list_and_the_first_is_read():
    one = {"spec_verify_ct": 2, "spec_num_proposed_drafts": 6, "spec_num_correct_drafts": 1}
    assert sglang_details({"spec_tokens_details": [one, {"spec_verify_ct": 9}]}) == one
    assert sglang_details({"spec_tokens_details": []}) is None
    assert sglang_details({"cached_tokens_details": {"device": 3}}) is None  # another sglext field only
    assert read_report(None, None, {"cached_tokens_details": {"device": 3}}) == (None, None)


def test_sglang_asks_for_its_speculation_on_its_openai_endpoints():
    decided = _decided(TargetConfig(), PROFILES["sglang"])
    assert decided["report_fields"] == {"return_spec_tokens_details": True}
    assert _decided(TargetConfig(), PROFILES["vllm"])["report_fields"] == {}
    assert _decided(TargetConfig(), None)["report_fields"] == {}
    request = Request(prompt="hi", max_tokens=4)
    for chat in (True, False):
        body = OpenAIWire(chat).payload(request, resolved(report_fields=decided["report_fields"]))
        assert body["return_spec_tokens_details"] is True
    overridden = resolved(report_fields=decided["report_fields"], extra_body={"return_spec_tokens_details": False})
    assert OpenAIWire(True).payload(request, overridden)["return_spec_tokens_details"] is False
    assert "return_spec_tokens_details" not in OpenAIWire(True).payload(request, resolved())


# --- TensorRT-LLM -------------------------------------------------------------------------------


def test_trtllm_decoded_tokens_per_iteration_is_speculation_only_above_one():
    assert trtllm_speculation(2.5) == Speculation(spec_acceptance_length=2.5, spec_from="trtllm")
    assert trtllm_speculation(1.0) is None  # what a model without speculation sends
    assert trtllm_speculation(0.0) is None  # before a decoding iteration
    assert trtllm_speculation(None) is None and trtllm_speculation("2.5") is None and trtllm_speculation(True) is None


def test_trtllm_only_the_finishing_choice_is_read():
    stream = _stream_of(
        b'{"id":"cmpl-1","choices":[{"index":0,"text":"a","finish_reason":null,"avg_decoded_tokens_per_iter":3.0}]}',
        b'{"id":"cmpl-1","choices":[{"index":0,"text":"b","finish_reason":"stop","avg_decoded_tokens_per_iter":2.0}]}',
    )
    assert stream.decoded_per_iter == 2.0
    unfinished = _stream_of(b'{"choices":[{"text":"a","finish_reason":null,"avg_decoded_tokens_per_iter":3.0}]}')
    assert unfinished.decoded_per_iter is None  # a cut stream: no reply's figure


def _perf_entry() -> dict:
    meta = json.loads((TRANSCRIPTS / "trtllm_perf_metrics.meta.json").read_text())
    entries = json.loads((TRANSCRIPTS / meta["transcript"]).read_bytes())
    assert [e["request_id"] for e in entries] == [meta["expect"]["request_id"]]
    return meta | {"entry": entries[0]}


def test_trtllm_perf_metrics_entry_reads_its_speculation_and_the_executors_timing():
    got = _perf_entry()
    perf, expect = got["entry"]["perf_metrics"], got["expect"]
    assert trtllm_perf_speculation(perf) == Speculation(**expect["speculation"])
    timing = trtllm_perf_timing(perf, output_tokens=24)
    assert timing == ServerTiming(
        **{k: pytest.approx(v) if isinstance(v, float) else v for k, v in expect["server_timing"].items()}
    )
    assert trtllm_perf_timing(perf).reported_itl_s is None  # the output tokens not given
    assert trtllm_perf_timing(perf, output_tokens=1).reported_itl_s is None
    no_drafts = {k: v for k, v in perf.items() if k != "speculative_decoding"}  # sent only with drafts
    assert trtllm_perf_speculation(no_drafts) is None
    assert trtllm_perf_timing({"first_iter": 1}) is None


# --- transcripts through the stream and the record ----------------------------------------------


FIRST_GAP_S = 0.010
GAP_S = 0.002


def _load(name: str) -> tuple[dict, bytes]:
    meta = json.loads((TRANSCRIPTS / f"{name}.meta.json").read_text())
    return meta, (TRANSCRIPTS / meta["transcript"]).read_bytes()


async def _replay(name: str, api: str, **target_fields: object) -> tuple[dict, list, RequestRecord]:
    """The transcript served event by event to one request of the streaming client: its meta, what
    the server received, and the record."""
    meta, body = _load(name)
    events = [e + b"\n\n" for e in body.split(b"\n\n") if e]
    assert b"".join(events) == body
    received: list = []

    async def handler(request: web.Request) -> web.StreamResponse:
        received.append((request.method, request.path, await request.json()))
        resp = web.StreamResponse(status=meta["status"], headers=meta["headers"])
        await resp.prepare(request)
        for i, event in enumerate(events):
            await asyncio.sleep(FIRST_GAP_S if i == 0 else GAP_S)
            await resp.write(event)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post(meta["request"]["path"], handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    clock = RunClock.start()
    target = resolved(url=f"http://127.0.0.1:{port}", model=meta["model"], api=api, **target_fields)
    try:
        async with make_session(target, clock.now) as session:
            client = StreamingClient(session, target, OpenAIWire(api == "chat"), clock.now, keep_text=True)
            record = RequestRecord(point=0, id=0, scheduled_s=clock.now())
            await client.send(Request(prompt="What is the capital of France?", max_tokens=24), record)
    finally:
        await runner.cleanup()
    return meta, received, record


@pytest.mark.parametrize(
    ("name", "api", "target_fields"),
    [
        ("sglang_chat_stream", "chat", {"report_fields": {"return_spec_tokens_details": True}}),
        ("trtllm_completions_stream", "completions", {}),
        ("trtllm_chat_stream", "chat", {}),
    ],
)
async def test_engine_transcripts_give_the_record_the_servers_speculation(name, api, target_fields):
    meta, received, record = await _replay(name, api, **target_fields)
    expect, want = meta["expect"], meta["request"]
    assert received == [(want["method"], want["path"], want["body"])]  # every field the client sent
    assert record.outcome is Outcome.OK, record.error
    assert record.end_marker and record.finish_reason == "length"
    assert len(record.chunk_times_s) == expect["chunks"] and record.output_text == expect["text"]
    assert record.server_output_tokens == expect["completion_tokens"]
    assert record.prompt_tokens == expect["prompt_tokens"]
    assert record.speculation == Speculation(**expect["speculation"])  # every field
    assert record.server_timing is None and expect["server_timing"] is None  # neither streams its timing
    by_position = record.speculation.by_position()
    assert (list(map(list, by_position)) if by_position else None) == expect["by_position"]
    line = json.loads(record.to_line())  # the part's fields flat on the records.jsonl line, as read back
    assert {k: line[k] for k in expect["speculation"]} == expect["speculation"]


async def test_the_trtllm_reply_id_names_its_perf_metrics_entry():
    _, _, record = await _replay("trtllm_completions_stream", "completions")
    entry = _perf_entry()["entry"]
    assert record.response_id == f"cmpl-{entry['request_id']}"
