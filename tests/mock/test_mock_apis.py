"""mock/apis.py: the mock's Anthropic Messages and OpenAI Responses streams, against the script.
Each event's order and shape for a plain, a reasoning, a tool-call and a structured reply; the
usage (the same prompt tokens as the conversation sent as chat; the scripted output); the length
end; the chunk times on the schedule, each block's or item's start in the write of its first
delta; each fault's shape; count_tokens; and multi-turn tool conversations read as chat."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from tokenbench.mock.apis import chat_body

FAST = dict(ttft_ms=0, itl_ms=0)
SYSTEM = "be brief"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}
ARGS = json.dumps({"city": "x", "days": 1})  # the schema's smallest instance, as the mock scripts it
CHAT_MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "say hi to me"}]


def messages_body(**extra) -> dict:
    return {"model": "mock-model", "max_tokens": 4, "system": SYSTEM, "stream": True, **extra} | (
        {} if "messages" in extra else {"messages": [{"role": "user", "content": "say hi to me"}]}
    )


def responses_body(**extra) -> dict:
    return {"model": "mock-model", "max_output_tokens": 4, "instructions": SYSTEM, "stream": True, **extra} | (
        {} if "input" in extra else {"input": "say hi to me"}
    )


async def _apost(url: str, path: str, body: dict) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session:
        async with session.post(url + path, json=body) as resp:
            return resp.status, await resp.text()


def _post(url: str, path: str, body: dict) -> tuple[int, str]:
    return asyncio.run(_apost(url, path, body))


def _get(url: str, path: str) -> dict:
    async def get() -> dict:
        async with aiohttp.ClientSession() as session:
            async with session.get(url + path) as resp:
                return await resp.json()

    return asyncio.run(get())


def _sse(text: str) -> list:
    """Each ``event:``/``data:`` pair: its JSON (its ``type`` checked against the event's name),
    or ``(name, raw)`` when the data is not JSON."""
    out = []
    for block in text.split("\n\n"):
        if not block:
            continue
        name, data = block.split("\n")
        assert name.startswith("event: ") and data.startswith("data: "), block
        name, data = name.removeprefix("event: "), data.removeprefix("data: ")
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            out.append((name, data))
            continue
        assert event["type"] == name
        out.append(event)
    return out


def _types(events: list) -> list[str]:
    return [e["type"] if isinstance(e, dict) else f"!{e[0]}" for e in events]


def _stream(url: str, path: str, body: dict) -> list:
    status, text = _post(url, path, body)
    assert status == 200, text
    return _sse(text)


def _chat_usage(url: str, messages: list, **extra) -> dict:
    body = {"model": "mock-model", "messages": messages, "max_tokens": 4, "stream": True, **extra}
    _, text = _post(url, "/v1/chat/completions", body)
    (final,) = [json.loads(b[6:]) for b in text.split("\n\n") if b.startswith("data: {") and '"usage"' in b]
    return final["usage"]


def _seq_ok(events: list) -> None:
    """Responses: every event numbered, 0, 1, 2, ... in order."""
    assert [e["sequence_number"] for e in events if isinstance(e, dict)] == list(range(len(events)))


# Messages


def test_messages_plain_reply_events_in_order_with_the_usage(mock_server):
    url = mock_server(**FAST)
    events = _stream(url, "/v1/messages", messages_body())
    prompt = _chat_usage(url, CHAT_MESSAGES)["prompt_tokens"]
    assert _types(events) == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[0] == {
        "type": "message_start",
        "message": {
            "id": "mock-1",
            "type": "message",
            "role": "assistant",
            "model": "mock-model",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": 0},
        },
    }
    assert events[1] == {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    assert (
        events[2:6] == [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " hi"}}] * 4
    )
    assert events[6] == {"type": "content_block_stop", "index": 0}
    assert events[7] == {
        "type": "message_delta",
        "delta": {"stop_reason": "max_tokens", "stop_sequence": None},  # the reply filled max_tokens
        "usage": {"input_tokens": prompt, "output_tokens": 4},
    }
    assert events[8] == {"type": "message_stop"}


def test_messages_reasoning_is_a_thinking_block_then_the_text_block(mock_server):
    url = mock_server(**FAST, reasoning_chunks=2, tokens_per_chunk=2, word="yo")
    events = _stream(url, "/v1/messages", messages_body(max_tokens=8, thinking={"type": "enabled", "budget_tokens": 9}))
    blocks = [(e["type"], e.get("index"), e.get("content_block") or e.get("delta")) for e in events[1:-2]]
    assert blocks == [
        ("content_block_start", 0, {"type": "thinking", "thinking": ""}),
        ("content_block_delta", 0, {"type": "thinking_delta", "thinking": " yo yo"}),
        ("content_block_delta", 0, {"type": "thinking_delta", "thinking": " yo yo"}),
        ("content_block_stop", 0, None),
        ("content_block_start", 1, {"type": "text", "text": ""}),
        ("content_block_delta", 1, {"type": "text_delta", "text": " yo yo"}),
        ("content_block_delta", 1, {"type": "text_delta", "text": " yo yo"}),
        ("content_block_stop", 1, None),
    ]
    assert events[-2]["usage"]["output_tokens"] == 8


def test_messages_tool_call_is_a_tool_use_block_with_stop_reason_tool_use(mock_server):
    url = mock_server(**FAST)
    tools = [{"name": "weather", "description": "d", "input_schema": SCHEMA}]
    events = _stream(url, "/v1/messages", messages_body(tools=tools, max_tokens=3))
    assert events[1] == {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "call_mock-1", "name": "weather", "input": {}},
    }
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert len(deltas) == 3 and all(d["type"] == "input_json_delta" for d in deltas)
    assert json.loads("".join(d["partial_json"] for d in deltas)) == json.loads(ARGS)
    assert _types(events)[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert events[-2]["delta"]["stop_reason"] == "tool_use" and events[-2]["usage"]["output_tokens"] == 3


def test_messages_tool_choice_names_the_tool(mock_server):
    url = mock_server(**FAST)
    tools = [{"name": "first", "input_schema": {"type": "object"}}, {"name": "weather", "input_schema": SCHEMA}]
    events = _stream(url, "/v1/messages", messages_body(tools=tools, tool_choice={"type": "tool", "name": "weather"}))
    assert events[1]["content_block"]["name"] == "weather"


def test_messages_structured_output_is_the_schemas_instance_as_text(mock_server):
    url = mock_server(**FAST)
    body = messages_body(output_format={"type": "json_schema", "schema": SCHEMA}, max_tokens=5)
    events = _stream(url, "/v1/messages", body)
    texts = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert len(texts) == 5 and json.loads("".join(texts)) == json.loads(ARGS)
    assert events[-2]["delta"]["stop_reason"] == "end_turn"


def test_messages_without_a_limit_end_their_turn(mock_server):
    url = mock_server(**FAST, output_tokens=3)
    body = messages_body()
    del body["max_tokens"]
    events = _stream(url, "/v1/messages", body)
    assert events[-2]["delta"]["stop_reason"] == "end_turn" and events[-2]["usage"]["output_tokens"] == 3


def test_messages_count_tokens_is_the_usages_input_tokens(mock_server):
    url = mock_server(**FAST, image_tokens=7)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    turns = [{"role": "user", "content": [{"type": "text", "text": "what is this"}, image]}]
    body = messages_body(messages=turns)
    status, counted = _post(url, "/v1/messages/count_tokens", body)
    events = _stream(url, "/v1/messages", body)
    chat = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": [
        {"type": "text", "text": "what is this"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]}]  # fmt: skip
    assert status == 200
    assert json.loads(counted) == {"input_tokens": events[0]["message"]["usage"]["input_tokens"]}
    assert json.loads(counted)["input_tokens"] == _chat_usage(url, chat)["prompt_tokens"]
    assert _get(url, "/mock/deliveries")["mock-2"]["images"] == 1


def test_messages_prefix_cache_reads_count_apart_from_the_input_tokens(mock_server):
    """As Anthropic counts them: input_tokens + cache_read_input_tokens are the prompt's tokens."""
    url = mock_server(**FAST, cache_block_tokens=2)
    body = messages_body()
    cold, warm = (_stream(url, "/v1/messages", body) for _ in range(2))
    total = json.loads(_post(url, "/v1/messages/count_tokens", body)[1])["input_tokens"]
    assert cold[0]["message"]["usage"] == {"input_tokens": total, "output_tokens": 0, "cache_read_input_tokens": 0}
    usage = warm[-2]["usage"]
    assert usage["cache_read_input_tokens"] > 0
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] == total
    assert warm[0]["message"]["usage"]["input_tokens"] == usage["input_tokens"]  # looked up once


# Responses


def test_responses_plain_reply_events_in_order_with_the_usage(mock_server):
    url = mock_server(**FAST)
    events = _stream(url, "/v1/responses", responses_body(max_output_tokens=2))
    prompt = _chat_usage(url, CHAT_MESSAGES)["prompt_tokens"]
    _seq_ok(events)
    assert _types(events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.incomplete",  # the reply stopped at max_output_tokens
    ]
    created = events[0]["response"]
    assert {k: created[k] for k in ("id", "object", "status", "model", "output", "usage")} == {
        "id": "resp_mock-1",
        "object": "response",
        "status": "in_progress",
        "model": "mock-model",
        "output": [],
        "usage": None,
    }
    item = {"id": "msg_mock-1_0", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    assert events[2] == {"type": "response.output_item.added", "sequence_number": 2, "output_index": 0, "item": item}
    at = {"item_id": "msg_mock-1_0", "output_index": 0, "content_index": 0}
    assert events[3] == {
        "type": "response.content_part.added",
        "sequence_number": 3,
        **at,
        "part": {"type": "output_text", "text": "", "annotations": []},
    }
    assert events[4] == {"type": "response.output_text.delta", "sequence_number": 4, **at, "delta": " hi"}
    assert events[6] == {"type": "response.output_text.done", "sequence_number": 6, **at, "text": " hi hi"}
    part = {"type": "output_text", "text": " hi hi", "annotations": []}
    assert events[7] == {"type": "response.content_part.done", "sequence_number": 7, **at, "part": part}
    whole = {**item, "status": "completed", "content": [part]}
    assert events[8] == {"type": "response.output_item.done", "sequence_number": 8, "output_index": 0, "item": whole}
    end = events[9]["response"]
    assert end["status"] == "incomplete" and end["incomplete_details"] == {"reason": "max_output_tokens"}
    assert end["output"] == [whole]
    assert end["usage"] == {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 2,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + 2,
    }


def test_responses_without_max_output_tokens_complete(mock_server):
    url = mock_server(**FAST, output_tokens=3)
    body = responses_body()
    del body["max_output_tokens"]
    events = _stream(url, "/v1/responses", body)
    assert events[-1]["type"] == "response.completed" and events[-1]["response"]["status"] == "completed"
    assert "incomplete_details" not in events[-1]["response"]
    assert events[-1]["response"]["usage"]["output_tokens"] == 3


def test_responses_reasoning_is_a_reasoning_item_then_the_message(mock_server):
    url = mock_server(**FAST, reasoning_chunks=1)
    events = _stream(
        url, "/v1/responses", responses_body(max_output_tokens=3, input=[{"role": "user", "content": "q"}])
    )
    _seq_ok(events)
    assert _types(events)[2:] == [
        "response.output_item.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.incomplete",
    ]
    assert events[2]["item"] == {"id": "rs_mock-1_0", "type": "reasoning", "summary": [], "content": []}
    assert events[3]["delta"] == " hi" and events[3]["item_id"] == "rs_mock-1_0"
    assert events[6]["output_index"] == 1 and events[6]["item"]["id"] == "msg_mock-1_1"
    reasoning, message = events[-1]["response"]["output"]
    assert reasoning["content"] == [{"type": "reasoning_text", "text": " hi"}]
    assert message["content"][0]["text"] == " hi hi"
    usage = events[-1]["response"]["usage"]
    assert usage["output_tokens"] == 3 and usage["output_tokens_details"] == {"reasoning_tokens": 1}


def test_responses_tool_call_is_a_function_call_item_and_completes(mock_server):
    url = mock_server(**FAST)
    tools = [{"type": "function", "name": "weather", "description": "d", "parameters": SCHEMA}]
    events = _stream(url, "/v1/responses", responses_body(tools=tools, max_output_tokens=3))
    _seq_ok(events)
    assert _types(events)[2:] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    item = {"id": "fc_mock-1_0", "type": "function_call", "call_id": "call_mock-1", "name": "weather"}
    assert events[2]["item"] == {**item, "arguments": "", "status": "in_progress"}
    assert "".join(e["delta"] for e in events[3:6]) == ARGS
    assert events[6]["arguments"] == ARGS
    whole = {**item, "arguments": ARGS, "status": "completed"}
    assert events[7]["item"] == whole and events[-1]["response"]["output"] == [whole]
    assert events[-1]["response"]["usage"]["output_tokens"] == 3


def test_responses_structured_output_is_the_schemas_instance(mock_server):
    url = mock_server(**FAST)
    fmt = {"format": {"type": "json_schema", "name": "weather", "schema": SCHEMA}}
    events = _stream(url, "/v1/responses", responses_body(text=fmt, max_output_tokens=5))
    texts = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert len(texts) == 5 and json.loads("".join(texts)) == json.loads(ARGS)
    assert events[-1]["type"] == "response.completed"  # a whole instance: stopped, not cut


def test_responses_prefix_cache_reports_cached_tokens_within_the_input(mock_server):
    url = mock_server(**FAST, cache_block_tokens=2)
    chat = _chat_usage(url, CHAT_MESSAGES)  # the same conversation as chat warms the cache
    usage = _stream(url, "/v1/responses", responses_body())[-1]["response"]["usage"]
    assert usage["input_tokens"] == chat["prompt_tokens"]
    assert usage["input_tokens_details"]["cached_tokens"] > 0


# Both


def test_the_same_conversation_counts_the_same_prompt_tokens_as_chat(mock_server):
    """A multi-turn conversation with a tool call and its result: chat's shape, Messages'
    tool_use and tool_result blocks, Responses' function_call and function_call_output items."""
    url = mock_server(**FAST, record_requests=True)
    arguments = json.dumps({"city": "Paris"})
    chat = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "user", "content": "and tomorrow?"},
    ]
    turns = [
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Paris"}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"},
                {"type": "text", "text": "and tomorrow?"},
            ],
        },
    ]
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "weather in Paris?"}]},
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": arguments},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "message", "role": "user", "content": "and tomorrow?"},
    ]
    assert chat_body("messages", messages_body(messages=turns))["messages"] == chat
    assert chat_body("responses", responses_body(input=items))["messages"] == chat
    prompt = _chat_usage(url, chat)["prompt_tokens"]
    messages = _stream(url, "/v1/messages", messages_body(messages=turns))
    responses = _stream(url, "/v1/responses", responses_body(input=items))
    assert messages[0]["message"]["usage"]["input_tokens"] == prompt
    assert messages[-2]["usage"]["input_tokens"] == prompt
    assert responses[-1]["response"]["usage"]["input_tokens"] == prompt
    counted = json.loads(_post(url, "/v1/messages/count_tokens", messages_body(messages=turns))[1])
    assert counted == {"input_tokens": prompt}
    deliveries = _get(url, "/mock/deliveries")
    assert (
        deliveries["mock-2"]["messages"] == chat == deliveries["resp_mock-3"]["messages"]
    )  # logged as chat reads them


def test_responses_input_images_count_as_chats(mock_server):
    url = mock_server(**FAST, image_tokens=5, image_ms=1)
    image = "data:image/png;base64,AAAA"
    content = [{"type": "input_text", "text": "what is this"}, {"type": "input_image", "image_url": image}]
    events = _stream(url, "/v1/responses", responses_body(input=[{"role": "user", "content": content}]))
    parts = [{"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": {"url": image}}]
    chat = _chat_usage(url, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": parts}])
    assert events[-1]["response"]["usage"]["input_tokens"] == chat["prompt_tokens"]
    assert _get(url, "/mock/deliveries")["resp_mock-1"]["images"] == 1


@pytest.mark.parametrize(("path", "body"), [("/v1/messages", messages_body), ("/v1/responses", responses_body)])
def test_chunks_on_the_scripted_schedule_each_start_in_its_first_deltas_write(mock_server, path, body):
    """Chunk i at admitted + ttft + i * itl, in /mock/deliveries; a block's (item's) start, and
    the previous one's stop, ride in the write of its first delta: one HTTP chunk each."""
    url = mock_server(ttft_ms=30, itl_ms=25, reasoning_chunks=2)

    async def writes() -> list[bytes]:
        out, current = [], b""
        async with aiohttp.ClientSession() as session:
            async with session.post(url + path, json=body()) as resp:
                async for data, end_of_chunk in resp.content.iter_chunks():
                    current += data
                    if end_of_chunk and current:  # (the stream's end may come as an empty chunk of its own)
                        out.append(current)
                        current = b""
        return out

    got = asyncio.run(writes())
    (delivery,) = _get(url, "/mock/deliveries").values()
    times, admitted = delivery["chunk_times_s"], delivery["admitted_s"]
    assert len(times) == 4
    for i, t in enumerate(times):  # never before its scripted time (and not a whole extra step late)
        assert admitted + 0.030 + i * 0.025 <= t < admitted + 0.030 + i * 0.025 + 0.25
    assert len(got) == 1 + 4 + 1  # the start, one write a chunk, the end
    deltas = [_types(_sse(w.decode())) for w in got[1:5]]
    if path == "/v1/messages":
        assert deltas == [
            ["content_block_start", "content_block_delta"],
            ["content_block_delta"],
            ["content_block_stop", "content_block_start", "content_block_delta"],
            ["content_block_delta"],
        ]
    else:
        assert deltas == [
            ["response.output_item.added", "response.reasoning_text.delta"],
            ["response.reasoning_text.delta"],
            [
                "response.reasoning_text.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
            ],
            ["response.output_text.delta"],
        ]


def test_speculation_and_tokens_per_chunk_follow_the_plan_without_chunk_usage(mock_server):
    url = mock_server(**FAST, spec_tokens=3, spec_accept="3,1")
    events = _stream(url, "/v1/messages", messages_body(max_tokens=9))
    texts = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert [len(t.split()) for t in texts] == [1, 4, 2, 2]
    assert all("usage" not in e for e in events if e["type"] == "content_block_delta")
    assert events[-2]["usage"]["output_tokens"] == 9


# Faults

MESSAGES_ERRORS = {500: "api_error", 429: "rate_limit_error", 400: "invalid_request_error"}
RESPONSES_ERRORS = {
    500: ("server_error", "server_error"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    400: ("invalid_request_error", None),
}


@pytest.mark.parametrize("status", [500, 429, 400])
def test_http_faults_answer_each_apis_error_body(mock_server, status):
    url = mock_server(**FAST, fault=f"http_{status}")
    got, text = _post(url, "/v1/messages", messages_body())
    message = f"scripted http_{status}"
    assert got == status
    assert json.loads(text) == {"type": "error", "error": {"type": MESSAGES_ERRORS[status], "message": message}}
    got, text = _post(url, "/v1/responses", responses_body())
    kind, code = RESPONSES_ERRORS[status]
    assert got == status
    assert json.loads(text) == {"error": {"message": message, "type": kind, "param": None, "code": code}}


def test_unknown_model_answers_each_apis_404(mock_server):
    url = mock_server(**FAST, adapters="a=1")
    got, text = _post(url, "/v1/messages", messages_body(model="nope"))
    assert got == 404 and json.loads(text)["error"]["type"] == "not_found_error"
    got, text = _post(url, "/v1/responses", responses_body(model="nope"))
    assert got == 404 and json.loads(text)["error"]["code"] == "model_not_found"


def test_malformed_and_error_event_mid_stream_then_the_rest(mock_server):
    url = mock_server(**FAST, fault="malformed", fault_after_chunks=2)
    events = _stream(url, "/v1/messages", messages_body())
    assert events[4] == ("content_block_delta", "{this is not json")  # start, block start, 2 deltas, the bad one
    assert _types(events)[-1] == "message_stop"
    events = _stream(url, "/v1/responses", responses_body())
    assert events[6] == ("response.output_text.delta", "{this is not json")
    assert events[-1]["type"] == "response.incomplete"

    url = mock_server(**FAST, fault="error_event", fault_after_chunks=2)
    events = _stream(url, "/v1/messages", messages_body())
    assert events[4] == {"type": "error", "error": {"type": "overloaded_error", "message": "scripted error event"}}
    assert _types(events)[-1] == "message_stop" and len(events) == 10
    events = _stream(url, "/v1/responses", responses_body())
    assert events[6] == {
        "type": "error",
        "sequence_number": 6,
        "code": "server_error",
        "message": "scripted error event",
        "param": None,
    }
    _seq_ok(events)
    assert events[-1]["type"] == "response.incomplete"


def test_abort_ends_with_the_apis_error(mock_server):
    url = mock_server(**FAST, fault="abort", fault_after_chunks=2)
    events = _stream(url, "/v1/messages", messages_body())
    assert _types(events) == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "error",
    ]
    assert events[-1] == {"type": "error", "error": {"type": "api_error", "message": "the engine aborted the request"}}
    events = _stream(url, "/v1/responses", responses_body())
    _seq_ok(events)
    assert _types(events)[-1] == "response.failed" and len(events) == 7
    failed = events[-1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": "server_error", "message": "the engine aborted the request"}
    assert failed["output"][0]["status"] == "incomplete" and failed["output"][0]["content"][0]["text"] == " hi hi"


def test_no_content_is_the_start_and_the_end_with_no_output(mock_server):
    url = mock_server(**FAST, fault="no_content")
    events = _stream(url, "/v1/messages", messages_body())
    assert _types(events) == ["message_start", "message_delta", "message_stop"]
    assert events[1]["usage"]["output_tokens"] == 0
    events = _stream(url, "/v1/responses", responses_body())
    assert _types(events) == ["response.created", "response.in_progress", "response.incomplete"]
    assert events[-1]["response"]["output"] == [] and events[-1]["response"]["usage"]["output_tokens"] == 0


def test_no_end_closes_after_the_content_without_the_end(mock_server):
    url = mock_server(**FAST, fault="no_end")
    events = _stream(url, "/v1/messages", messages_body(max_tokens=2))
    assert _types(events) == ["message_start", "content_block_start", "content_block_delta", "content_block_delta"]
    events = _stream(url, "/v1/responses", responses_body(max_output_tokens=2))
    assert _types(events)[-2:] == ["response.output_text.delta", "response.output_text.delta"] and len(events) == 6


def _read_until_error(url: str, path: str, body: dict, timeout_s: float) -> tuple[bytes, BaseException | None]:
    async def read() -> tuple[bytes, BaseException | None]:
        received = b""
        async with aiohttp.ClientSession() as session:
            async with session.post(url + path, json=body) as resp:
                try:
                    async with asyncio.timeout(timeout_s):
                        async for chunk in resp.content.iter_any():
                            received += chunk
                except (aiohttp.ClientPayloadError, TimeoutError) as exc:
                    return received, exc
        return received, None

    return asyncio.run(read())


@pytest.mark.parametrize(("path", "body"), [("/v1/messages", messages_body), ("/v1/responses", responses_body)])
def test_disconnect_and_stall_after_n_chunks(mock_server, path, body):
    delta = "content_block_delta" if path == "/v1/messages" else "response.output_text.delta"
    url = mock_server(**FAST, fault="disconnect", fault_after_chunks=2)
    received, error = _read_until_error(url, path, body(), timeout_s=5)
    assert isinstance(error, aiohttp.ClientPayloadError)
    assert _types(_sse(received.decode())).count(delta) == 2
    url = mock_server(**FAST, fault="stall", fault_after_chunks=1)
    received, error = _read_until_error(url, path, body(), timeout_s=0.3)
    assert isinstance(error, TimeoutError)
    assert _types(_sse(received.decode())).count(delta) == 1
