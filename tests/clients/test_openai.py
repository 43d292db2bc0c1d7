"""The OpenAI wire through the shared stream path: one huge event split across odd-sized writes."""

import json

from aiohttp import web
from run_helpers import resolved

from tokenbench.clients.openai import OpenAIWire
from tokenbench.clients.stream import StreamingClient, make_session
from tokenbench.records import Outcome, Reasoning, Request, RequestRecord, RunClock


async def _serve(handler):
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, f"http://127.0.0.1:{port}"


async def _chat(handler, max_tokens: int, keep_text: bool = False) -> RequestRecord:
    """One chat request "hi" through the streaming client to ``handler``'s server: its record."""
    runner, url = await _serve(handler)
    clock = RunClock.start()
    target = resolved(url=url)
    try:
        async with make_session(target, clock.now) as session:
            client = StreamingClient(session, target, OpenAIWire(chat=True), clock.now, keep_text=keep_text)
            record = RequestRecord(point=0, id=0, scheduled_s=clock.now())
            await client.send(Request(prompt="hi", max_tokens=max_tokens), record)
    finally:
        await runner.cleanup()
    return record


async def test_large_event_split_across_writes_parses():
    big = "z" * 2_500_000  # one 2.5 MB event, well above aiohttp's 64/128 KB line limits
    event = b"data: " + json.dumps({"id": "x", "choices": [{"delta": {"content": big}}]}).encode() + b"\r\n\r\n"

    async def handler(request):
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n')
        for i in range(0, len(event), 7919):  # odd-sized pieces, splitting the CRLFs too
            await resp.write(event[i : i + 7919])
        await resp.write(b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\ndata: [DONE]\n\n')
        return resp

    record = await _chat(handler, max_tokens=1, keep_text=True)
    assert record.outcome is Outcome.OK, record.error
    assert len(record.chunk_times_s) == 1 and record.output_text == big
    assert record.output_tokens == 1 and record.prompt_tokens == 3


def _events(*deltas: dict, usage: dict | None = None) -> list[bytes]:
    out = [json.dumps({"id": "r", "choices": [{"index": 0, "delta": d}]}).encode() for d in deltas]
    if usage is not None:
        out.append(json.dumps({"id": "r", "choices": [], "usage": usage}).encode())
    return [*out, b"[DONE]"]


def test_reasoning_deltas_are_chunks_and_the_first_content_is_the_first_output():
    """vLLM's ``reasoning`` (with its old name ``reasoning_content`` beside it), SGLang's
    ``reasoning_content``: chunks counted apart; a role-only or empty delta is no chunk; the
    first ``content`` is chunk 3; usage's reasoning_tokens is kept."""
    stream = OpenAIWire(chat=True).new_stream()
    events = _events(
        {"role": "assistant", "content": ""},
        {"reasoning": "Let", "reasoning_content": "Let"},  # vLLM >= 0.11 sends both
        {"reasoning_content": " me", "content": None},  # SGLang / DeepSeek
        {"content": "", "reasoning_content": " see"},
        {"content": "4"},
        {"reasoning_content": " (late)"},  # reasoning after the answer began: still not output
        {"content": "."},
        usage={"prompt_tokens": 5, "completion_tokens": 6, "completion_tokens_details": {"reasoning_tokens": 4}},
    )
    chunks = [stream.handle(e) for e in events]
    assert chunks == [False, True, True, True, True, True, True, False, False]
    assert stream.reasoning_chunks == 4 and stream.first_output_index(6) == 3
    assert stream.reasoning_tokens == 4 and stream.completion_tokens == 6


def test_no_reasoning_the_first_chunk_is_the_first_output_and_all_reasoning_has_none():
    plain = OpenAIWire(chat=True).new_stream()
    assert [plain.handle(e) for e in _events({"content": "a"}, {"content": "b"})] == [True, True, False]
    assert plain.reasoning_chunks == 0 and plain.first_output_index(2) == 0 and plain.reasoning_tokens is None
    text = OpenAIWire(chat=False).new_stream()
    text.handle(json.dumps({"choices": [{"text": "a"}]}).encode())
    assert text.first_output_index(1) == 0
    thinking = OpenAIWire(chat=True).new_stream()  # cut by max_tokens inside its reasoning
    assert [thinking.handle(e) for e in _events({"reasoning_content": "hm"})] == [True, False]
    assert thinking.first_output_index(1) is None


async def test_a_record_stamps_its_first_output_chunk():
    async def handler(request):
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        usage = {"prompt_tokens": 3, "completion_tokens": 3, "completion_tokens_details": {"reasoning_tokens": 2}}
        for event in _events({"reasoning_content": "a"}, {"reasoning_content": "b"}, {"content": "c"}, usage=usage):
            await resp.write(b"data: " + event + b"\n\n")
        return resp

    record = await _chat(handler, max_tokens=3)
    assert record.outcome is Outcome.OK, record.error
    assert len(record.chunk_times_s) == 3 and record.reasoning == Reasoning(record.chunk_times_s[2], 2, 2)
    assert record.ttfo_s == record.chunk_times_s[2] - record.sent_s


def test_cached_prompt_tokens_from_usage_details_else_llamacpp_timings():
    from tokenbench.clients.openai import OpenAIStream

    vllm = OpenAIStream(chat=False)
    vllm.handle(
        b'{"choices":[],"usage":{"prompt_tokens":64,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":48}}}'
    )
    assert (vllm.prompt_tokens, vllm.cached_prompt_tokens) == (64, 48)
    llama = OpenAIStream(chat=False)
    llama.handle(
        b'{"choices":[{"text":"","finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":2},'
        b'"timings":{"cache_n":30,"prompt_n":10}}'
    )
    assert llama.cached_prompt_tokens == 30
    plain = OpenAIStream(chat=False)
    plain.handle(b'{"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":2}}')
    assert plain.cached_prompt_tokens is None  # the server did not say: unknown, not 0


def test_token_id_prompts_are_sent_as_a_list_on_completions_only():
    from tokenbench.clients.openai import OpenAIWire

    request = Request(prompt="a b c", prompt_token_ids=(5, 6, 7))
    target = resolved()
    assert OpenAIWire(chat=False).payload(request, target)["prompt"] == [5, 6, 7]
    assert OpenAIWire(chat=True).payload(request, target)["messages"] == [{"role": "user", "content": "a b c"}]
    assert OpenAIWire(chat=False).payload(Request(prompt="a b c"), target)["prompt"] == "a b c"


def _usage_event(delta: dict | None, completion: int, finish: str | None = None) -> bytes:
    """A chat event with vLLM's usage on every chunk (continuous_usage_stats)."""
    choices = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if delta is not None else []
    return json.dumps(
        {"id": "r", "choices": choices, "usage": {"prompt_tokens": 4, "completion_tokens": completion}}
    ).encode()


def test_continuous_usage_is_asked_only_when_the_target_says():
    request = Request(prompt="hi")
    on = resolved(continuous_usage=True)
    body = OpenAIWire(chat=True).payload(request, on)
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert OpenAIWire(chat=False).payload(request, resolved())["stream_options"] == {"include_usage": True}
    # vLLM reads continuous_usage_stats only with include_usage: neither is sent without usage
    off = on.model_copy(update={"include_usage": False})
    assert "stream_options" not in OpenAIWire(chat=True).payload(request, off)


def test_each_chunks_tokens_are_the_steps_of_the_cumulative_usage():
    """vLLM's stream with usage on every chunk: the role chunk says 0; a token that decoded to no
    text is counted on the next chunk; the EOS on the finish chunk (no content) belongs to none."""
    stream = OpenAIWire(chat=True).new_stream()
    stream.chunk_usage = []
    events = [
        _usage_event({"role": "assistant", "content": ""}, 0),
        _usage_event({"content": "Hel"}, 2),  # two tokens in one chunk
        _usage_event({"content": "lo"}, 3),
        _usage_event({"content": " wor"}, 6),  # three tokens: one of them no text on its own
        _usage_event({"content": "ld"}, 7),
        _usage_event({}, 8, finish="stop"),  # EOS: counted, never streamed
        _usage_event(None, 8),
        b"[DONE]",
    ]
    assert [stream.handle(e) for e in events] == [False, True, True, True, True, False, False, False]
    counts, first = stream.chunk_tokens()
    assert counts is not None and counts.tolist() == [2, 1, 3, 1] and first == 2
    assert stream.completion_tokens == 8


def test_a_chunk_without_a_count_leaves_the_counts_unknown():
    stream = OpenAIWire(chat=False).new_stream()
    stream.chunk_usage = []
    stream.handle(json.dumps({"choices": [{"text": "a"}], "usage": {"completion_tokens": 3}}).encode())
    stream.handle(json.dumps({"choices": [{"text": "b"}]}).encode())
    assert stream.chunk_tokens() == (None, 3)  # the first chunk's count is still known
    backwards = OpenAIWire(chat=False).new_stream()
    backwards.chunk_usage = []
    for n in (3, 2):
        backwards.handle(json.dumps({"choices": [{"text": "x"}], "usage": {"completion_tokens": n}}).encode())
    assert backwards.chunk_tokens() == (None, None)  # not cumulative: nothing to trust
    untracked = OpenAIWire(chat=False).new_stream()  # not asked: nothing kept
    untracked.handle(json.dumps({"choices": [{"text": "a"}], "usage": {"completion_tokens": 1}}).encode())
    assert untracked.chunk_tokens() == (None, None)
