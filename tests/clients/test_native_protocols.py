"""TGI, Triton and Ollama native streaming, and the Messages and Responses APIs (llama.cpp's
captured, vLLM's constructed from its source), proven against wire-exact transcripts.

Each transcript in tests/transcripts/ is the exact response body a server sends; its
``.meta.json`` sidecar gives the status, headers, the request the client must send, what the
client must make of it, and the sources the bytes follow. An in-process aiohttp server replays a
transcript event by event with scripted gaps (FIRST_GAP_S before the first, GAP_S between), and
the shared StreamingClient measures it exactly as it measures the OpenAI path.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp import web
from run_helpers import resolved

from tokenbench.clients import WIRES, wire_for
from tokenbench.clients.ollama import OllamaWire
from tokenbench.clients.stream import LineDecoder, SSEPayloads, StreamingClient, make_session, probe
from tokenbench.clients.tgi import TGIWire
from tokenbench.clients.triton import TritonWire
from tokenbench.config import TargetConfig
from tokenbench.records import Outcome, Request, RequestRecord, RunClock, TokenSource

TRANSCRIPTS = Path(__file__).resolve().parent.parent / "transcripts"
FIRST_GAP_S = 0.030
GAP_S = 0.010
TTFT_TOLERANCE_S = 0.050  # scheduling noise on a loaded CI machine; the lower bound is exact

TGI_PROMPT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"

# name -> (api, Request, TargetConfig fields besides url/model/api)
CASES = {
    "tgi_generate_stream": ("tgi", Request(prompt=TGI_PROMPT, max_tokens=64), {}),
    "tgi_error": ("tgi", Request(prompt=TGI_PROMPT, max_tokens=4096), {}),
    "triton_generate_stream": ("triton", Request(prompt="What is Deep Learning?", max_tokens=12), {}),
    "triton_error": (
        "triton",
        Request(prompt="What is Deep Learning?", max_tokens=12),
        {"extra_body": {"exclude_input_in_output": False}},
    ),
    "ollama_generate": ("ollama", Request(prompt="The capital of France is", max_tokens=12), {}),
    "ollama_error": ("ollama", Request(prompt="The capital of France is", max_tokens=12), {}),
    "ollama_not_found": ("ollama", Request(prompt="The capital of France is", max_tokens=12), {}),
}
CAPITAL = ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is the capital of France?"})
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
FORCED_TOOL = {"tools": [WEATHER], "tool_choice": "get_weather"}
CASES |= {
    "llamacpp_messages_stream": ("messages", Request(messages=CAPITAL, max_tokens=12), {"temperature": 0.0}),
    "llamacpp_responses_stream": ("responses", Request(messages=CAPITAL, max_tokens=12), {"temperature": 0.0}),
    "vllm_messages_tool_stream": ("messages", Request(prompt="Weather in Paris?", max_tokens=64), FORCED_TOOL),
    "vllm_responses_tool_stream": ("responses", Request(prompt="Weather in Paris?", max_tokens=64), FORCED_TOOL),
    "vllm_messages_error": ("messages", Request(messages=CAPITAL[1:], max_tokens=12), {}),
    "llamacpp_responses_error": ("responses", Request(messages=CAPITAL[1:], max_tokens=12), {}),
}
CONVERSATION_CASES = [
    "llamacpp_messages_stream",
    "llamacpp_responses_stream",
    "vllm_messages_tool_stream",
    "vllm_responses_tool_stream",
]
OK_CASES = ["tgi_generate_stream", "triton_generate_stream", "ollama_generate", *CONVERSATION_CASES]


def load(name: str) -> tuple[dict, bytes]:
    meta = json.loads((TRANSCRIPTS / f"{name}.meta.json").read_text())
    return meta, (TRANSCRIPTS / meta["transcript"]).read_bytes()


def split_events(body: bytes, framing: str) -> list[bytes]:
    """The transcript as the server writes it: one write per SSE event / per ndjson line."""
    sep = b"\n\n" if framing == "sse" else b"\n"
    parts, start = [], 0
    while (end := body.find(sep, start)) >= 0:
        parts.append(body[start : end + len(sep)])
        start = end + len(sep)
    if start < len(body):
        parts.append(body[start:])
    assert b"".join(parts) == body
    return parts


class Replay:
    """Answers every POST with one transcript, paced by the script; records what it received."""

    def __init__(self, meta: dict, body: bytes, piece_size: int | None = None) -> None:
        self.meta = meta
        self.body = body
        self.piece_size = piece_size
        self.received: list[tuple[str, str, dict]] = []

    def parts(self) -> list[bytes]:
        if self.piece_size is None:
            return split_events(self.body, self.meta["framing"])
        n = self.piece_size
        return [self.body[i : i + n] for i in range(0, len(self.body), n)]

    async def handler(self, request: web.Request) -> web.StreamResponse:
        self.received.append((request.method, request.path, await request.json()))
        resp = web.StreamResponse(status=self.meta["status"], headers=self.meta["headers"])
        await resp.prepare(request)  # status and headers first, as the engines do
        for i, part in enumerate(self.parts()):
            if self.piece_size is None:
                await asyncio.sleep(FIRST_GAP_S if i == 0 else GAP_S)
            else:
                await asyncio.sleep(FIRST_GAP_S if i == 0 else 0.0005)  # one network read each
            await resp.write(part)
        await resp.write_eof()
        return resp


async def serve(routes: list[web.RouteDef]) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, f"http://127.0.0.1:{port}"


async def run_case(name: str, piece_size: int | None = None) -> tuple[dict, Replay, RequestRecord]:
    meta, body = load(name)
    api, request, target_fields = CASES[name]
    replay = Replay(meta, body, piece_size)
    runner, url = await serve([web.post("/{tail:.*}", replay.handler)])
    clock = RunClock.start()
    target = resolved(url=url, model=meta["model"], api=api, **target_fields)
    try:
        async with make_session(target, clock.now) as session:
            client = StreamingClient(session, target, wire_for(api), clock.now, keep_text=True)
            record = RequestRecord(point=0, id=0, scheduled_s=clock.now())
            await client.send(request, record)
    finally:
        await runner.cleanup()
    return meta, replay, record


def assert_request(meta: dict, replay: Replay) -> None:
    want = meta["request"]
    assert replay.received == [(want["method"], want["path"], want["body"])]


@pytest.mark.serial  # chunk gaps to 2 ms: beside pip installs one came 6.5 ms after the last, not >= 8
@pytest.mark.parametrize("name", OK_CASES)
async def test_transcript_replay_is_measured_like_the_openai_path(name):
    meta, replay, record = await run_case(name)
    expect = meta["expect"]
    assert_request(meta, replay)  # path and every JSON field the client sent
    assert record.outcome is Outcome.OK, record.error
    assert record.status == 200 and record.error is None and record.retries == 0
    assert len(record.chunk_times_s) == expect["chunks"]
    assert record.output_text == expect["text"]
    # The server's own counts are used when the protocol gives them.
    assert record.server_output_tokens == expect["completion_tokens"]
    assert record.output_tokens == expect["completion_tokens"]
    assert record.output_tokens_source is TokenSource.SERVER
    assert record.prompt_tokens == expect["prompt_tokens"]
    # TTFT is the scripted gaps up to the first content event (a typed stream's opening events, each
    # GAP_S apart, come first); later content events are GAP_S apart.
    first = FIRST_GAP_S + GAP_S * expect.get("events_before_content", 0)
    assert first - 0.001 <= record.ttft_s < first + TTFT_TOLERANCE_S, record.ttft_s
    gaps = [b - a for a, b in zip(record.chunk_times_s, record.chunk_times_s[1:])]
    assert min(gaps) >= GAP_S - 0.002, gaps
    assert record.e2e_s >= FIRST_GAP_S + GAP_S * (expect["chunks"] - 1) - 0.002
    assert record.end_s == record.chunk_times_s[-1] <= record.closed_s
    if "server_timings" in expect:
        assert record.server_timings == expect["server_timings"]
    else:
        assert record.server_timings is None


async def test_tgi_eos_event_is_counted_by_the_server_but_is_not_a_chunk():
    meta, _, record = await run_case("tgi_generate_stream")
    events = split_events(load("tgi_generate_stream")[1], "sse")
    assert len(events) == 8 and b'"special":true' in events[-1]
    assert len(record.chunk_times_s) == 7 and record.server_output_tokens == 8
    assert "<|im_end|>" not in record.output_text


@pytest.mark.parametrize(
    ("name", "outcome", "status", "chunks"),
    [
        ("tgi_error", Outcome.STREAM_ERROR, 200, 0),  # validation fails inside the 200 stream
        ("triton_error", Outcome.HTTP_ERROR, 400, 0),  # a first-response error sets the status
        ("ollama_error", Outcome.STREAM_ERROR, 200, 4),  # runner failed after 4 pieces
        ("ollama_not_found", Outcome.HTTP_ERROR, 404, 0),  # before any content: status + JSON body
        ("vllm_messages_error", Outcome.STREAM_ERROR, 200, 1),  # Anthropic's error event after one delta
        ("llamacpp_responses_error", Outcome.HTTP_ERROR, 400, 0),  # the request refused: status + JSON body
    ],
)
async def test_error_transcripts_give_the_right_outcome_and_keep_the_text(name, outcome, status, chunks):
    meta, replay, record = await run_case(name)
    assert_request(meta, replay)
    assert meta["status"] == status
    assert record.outcome is outcome
    assert record.status == status
    assert meta["expect"]["error_contains"] in record.error
    assert len(record.chunk_times_s) == chunks
    if outcome is Outcome.HTTP_ERROR:
        assert record.error.startswith(f"HTTP {status}: ")
        assert load(name)[1].decode() in record.error  # the server's body, verbatim


@pytest.mark.parametrize("name", CONVERSATION_CASES)
async def test_the_conversation_apis_give_reasoning_tool_calls_and_usage_as_chat_does(name):
    """Each API's typed events read as chat's deltas: thinking / reasoning chunks counted apart (the
    first output after them), a tool call's name and argument pieces as output chunks and its
    call kept whole, the usage's cached prompt tokens, and the finish reason in chat's words."""
    meta, _, record = await run_case(name)
    expect = meta["expect"]
    assert record.outcome is Outcome.OK, record.error
    assert record.finish_reason == expect["finish_reason"] and record.end_marker is True
    assert record.cached_prompt_tokens == expect["cached_prompt_tokens"]
    assert record.response_id is not None
    reasoning = expect.get("reasoning_chunks", 0)
    if reasoning:
        assert record.reasoning is not None and record.reasoning.reasoning_chunks == reasoning
        assert record.reasoning.reasoning_tokens == expect.get("reasoning_tokens")
        assert record.reasoning.first_output_s == record.chunk_times_s[expect["first_output_chunk"]]
    if "tool_calls" in expect:
        used = record.tool_use
        assert used is not None and used.tool_calls == len(expect["tool_calls"]) and used.tool_args_parsed is True
        assert used.first_tool_call_s == record.chunk_times_s[expect["first_tool_chunk"]]
        assert used.tool_call_chunks == 3  # the call's start (its name) and its two argument pieces


@pytest.mark.parametrize("name", OK_CASES)
async def test_odd_byte_boundaries_over_the_network_parse_the_same(name):
    # 7-byte writes split events mid-JSON, mid-"data:", mid-"\n\n", mid-UTF-8 escape.
    meta, replay, record = await run_case(name, piece_size=7)
    expect = meta["expect"]
    assert_request(meta, replay)
    assert record.outcome is Outcome.OK, record.error
    assert len(record.chunk_times_s) == expect["chunks"]
    assert record.output_text == expect["text"]
    assert record.server_output_tokens == expect["completion_tokens"]
    assert record.prompt_tokens == expect["prompt_tokens"]


@pytest.mark.parametrize("name", OK_CASES + ["tgi_error", "ollama_error"])
def test_every_two_way_split_of_a_transcript_parses_the_same(name):
    meta, body = load(name)
    api = CASES[name][0]

    def parse(pieces: list[bytes]):
        decoder = LineDecoder() if meta["framing"] == "ndjson" else SSEPayloads()
        stream = wire_for(api).new_stream()
        chunks = 0
        for piece in pieces:
            chunks += sum(stream.handle(p) for p in decoder.feed_data(piece))
            if stream.failed:
                break
        if not stream.failed:
            chunks += sum(stream.handle(p) for p in decoder.close_data())
        return chunks, "".join(stream.text), stream.completion_tokens, stream.prompt_tokens, stream.error

    whole = parse([body])
    for i in range(1, len(body)):
        assert parse([body[:i], body[i:]]) == whole, i
    assert parse([bytes([b]) for b in body]) == whole


def test_wires_are_registered_under_their_api_names():
    assert {"tgi", "triton", "ollama"} <= set(WIRES)
    assert isinstance(wire_for("tgi"), TGIWire)
    assert isinstance(wire_for("triton"), TritonWire)
    assert isinstance(wire_for("ollama"), OllamaWire)
    assert wire_for("ollama").framing == "ndjson"
    assert wire_for("tgi").framing == wire_for("triton").framing == "sse"


def test_model_ids_from_each_probe_answer():
    info = {"model_id": "HuggingFaceTB/SmolLM2-135M-Instruct", "max_input_tokens": 2047}
    assert TGIWire().model_ids(info) == ["HuggingFaceTB/SmolLM2-135M-Instruct"]
    assert TGIWire().model_ids(None) == []
    assert TritonWire().model_ids(None) == []
    tags = {"models": [{"name": "smollm2:135m", "model": "smollm2:135m"}, {"name": "qwen3:0.6b"}]}
    assert OllamaWire().model_ids(tags) == ["smollm2:135m", "qwen3:0.6b"]
    assert OllamaWire().model_ids({"models": []}) == []


@pytest.mark.parametrize(
    ("wire", "path", "answer", "ids"),
    [
        (
            TGIWire(),
            "/info",
            {"model_id": "HuggingFaceTB/SmolLM2-135M-Instruct"},
            ["HuggingFaceTB/SmolLM2-135M-Instruct"],
        ),
        (TritonWire(), "/v2/health/ready", None, []),  # 200 with an empty body
        (OllamaWire(), "/api/tags", {"models": [{"name": "smollm2:135m"}]}, ["smollm2:135m"]),
    ],
)
async def test_probe_paths(wire, path, answer, ids):
    async def handler(_request):
        text = "" if answer is None else json.dumps(answer)
        return web.Response(text=text, content_type="application/json")

    assert wire.probe_path == path
    runner, url = await serve([web.get(path, handler)])
    try:
        tgt = TargetConfig(url=url, model="m")
        async with make_session(tgt) as session:
            assert (await probe(session, tgt, url, wire)).ids == ids  # no OpenAI cards: the listing has none
    finally:
        await runner.cleanup()
