"""Anthropic's Messages API: POST /v1/messages, streamed as typed server-sent events.

Served by vLLM (vllm/entrypoints/anthropic: it converts the request to chat and the chat stream
back) and llama.cpp's server (``/v1/messages``, ``/v1/messages/count_tokens``). The request:
``model``, ``max_tokens`` (required by the API: a request without its own limit sends
``DEFAULT_MAX_TOKENS``), ``system`` (the system prompt, apart from the turns), ``messages``
(user and assistant turns; an assistant's tool calls are ``tool_use`` blocks, their results
``tool_result`` blocks in the next user turn; images ``image`` blocks), ``stream``, ``tools`` and
``output_config`` (clients/structured.py). Each event names its kind in ``type`` (the SSE ``event``
line says the same; the client reads the data only):

- ``message_start``: the message's id and the usage so far (``input_tokens``);
- ``content_block_start`` / ``content_block_delta`` / ``content_block_stop``: one block at a time,
  a ``text`` block's ``text_delta``, a ``thinking`` block's ``thinking_delta`` (reasoning: a
  chunk, counted apart, as chat's reasoning), a ``tool_use`` block's start (its id and name: a
  chunk, as chat's first tool-call delta) then ``input_json_delta`` pieces of its input;
- ``message_delta``: the stop reason and the final usage (``output_tokens``; vLLM resends
  ``input_tokens``), ``message_stop``: the end (the end marker), ``ping``: nothing;
- ``error``: ``{"error": {"type", "message"}}``: the stream fails with both.

The usage follows Anthropic's rule: ``input_tokens`` are the prompt's tokens not read from a cache
(vLLM subtracts its ``cached_tokens``), so the prompt is ``input_tokens +
cache_read_input_tokens + cache_creation_input_tokens`` and the cached prompt tokens are
``cache_read_input_tokens``. Stop reasons are recorded in chat's words (``STOP_REASONS``), so a
finish reason means the same on every API.
"""

from __future__ import annotations

import json
from typing import Any

from orjson import loads as _loads  # payloads are parsed on the hot path

from tokenbench.clients.structured import conversation_fields
from tokenbench.clients.wire import ERROR_BODY_CHARS, Body, Framing, JsonObject, Payload, Stream
from tokenbench.config.target import ResolvedTarget
from tokenbench.datasets.chat_images import chat_messages
from tokenbench.records import Request

PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
# The API requires max_tokens; a request without its own limit (a natural-length reply) asks for
# this many, well above what a benchmark prompt's reply runs to.
DEFAULT_MAX_TOKENS = 4096
# Anthropic's stop reasons in chat's words (a finish reason reads the same on every API).
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}
Block = dict[str, Any]  # one content block as the API defines it (a JSON edge)


class MessagesWire:
    framing: Framing = "sse"
    probe_path = "/v1/models"

    def url(self, target: ResolvedTarget) -> str:
        return f"{target.url}{PATH}"

    def payload(self, request: Request, target: ResolvedTarget) -> Body:
        group = request.group
        adapter = group.adapter if group is not None else None
        messages = request.as_messages()
        if request.images:
            messages = chat_messages(messages, request.images)
        system, turns = anthropic_turns(messages)
        body: Body = {
            "model": adapter or target.model,
            "max_tokens": request.max_tokens if request.max_tokens is not None else DEFAULT_MAX_TOKENS,
            "messages": turns,
            "stream": True,
        }
        if system:
            body["system"] = system
        if target.ignore_eos:  # llama.cpp reads it; vLLM's Messages request has no such field
            body["ignore_eos"] = True
        if target.temperature is not None:
            body["temperature"] = target.temperature
        if target.response_format is not None or target.tools:
            body.update(conversation_fields("messages", target))
        body.update(target.extra_body)
        return body

    def new_stream(self) -> Stream:
        return MessagesStream()

    def model_ids(self, probe_json: object) -> list[str]:
        data = probe_json.get("data", []) if isinstance(probe_json, dict) else []
        return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]


def anthropic_turns(messages: list[dict[str, Any]]) -> tuple[str, list[Block]]:
    """Chat messages (the form every request holds) as the Messages API's: the system prompt apart,
    then user and assistant turns, each turn's content a string or its blocks. An assistant's
    ``tool_calls`` are ``tool_use`` blocks; a ``tool`` message is a ``tool_result`` block of a
    user turn; image_url parts are ``image`` blocks; neighbouring turns of one role are joined."""
    system: list[str] = []
    turns: list[Block] = []
    for m in messages:
        role = m.get("role")
        if role == "system":
            system.append(_text_of(m.get("content")))
            continue
        if role == "tool":
            block: Block = {
                "type": "tool_result",
                "tool_use_id": m.get("tool_call_id") or "",
                "content": _text_of(m.get("content")),
            }
            _append(turns, "user", [block])
            continue
        blocks = _blocks(m.get("content"))
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.get("id") or "",
                    "name": fn.get("name") or "",
                    "input": _input(fn.get("arguments")),
                }
            )
        _append(turns, "assistant" if role == "assistant" else "user", blocks)
    return "\n\n".join(s for s in system if s), [_simplified(t) for t in turns]


def _text_of(content: object) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def _blocks(content: object) -> list[Block]:
    if not isinstance(content, list):
        return [{"type": "text", "text": str(content)}] if content else []
    blocks: list[Block] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            blocks.append({"type": "text", "text": str(part.get("text", ""))})
        elif part.get("type") == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            blocks.append({"type": "image", "source": image_source(url)})
    return blocks


def image_source(url: str) -> Block:
    """An image URL as a Messages image block's source: a data URL's media type and base64 data,
    any other URL as it is."""
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return {"type": "base64", "media_type": head, "data": data}
    return {"type": "url", "url": url}


def _input(arguments: object) -> object:
    """A chat tool call's arguments (a JSON string) as a tool_use block's input (an object)."""
    if not isinstance(arguments, str) or not arguments.strip():
        return {}
    try:
        return json.loads(arguments)
    except ValueError:
        return {"arguments": arguments}  # not JSON: sent back as it came


def _append(turns: list[Block], role: str, blocks: list[Block]) -> None:
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": blocks})


def _simplified(turn: Block) -> Block:
    """A turn of one text block as a plain string (the form most clients send)."""
    content = turn["content"]
    if len(content) == 1 and content[0]["type"] == "text":
        return {"role": turn["role"], "content": content[0]["text"]}
    if not content:
        return {"role": turn["role"], "content": ""}
    return turn


class MessagesStream(Stream):
    __slots__ = ("_tool_index",)

    def __init__(self) -> None:
        super().__init__()
        self._tool_index: int | None = None  # the tool_use block being streamed: its index

    def handle(self, data: Payload) -> bool:
        if self.failed or not data:
            return False
        try:
            obj = _loads(data)
        except ValueError:
            obj = None
        if type(obj) is not dict:
            self.json_object(data)  # fails the stream with the reason
            return False
        kind = obj.get("type")
        if kind == "content_block_delta":
            return self._delta(obj.get("delta"))
        if kind == "content_block_start":
            return self._start(obj)
        if kind == "message_start":
            message = obj.get("message")
            if isinstance(message, dict):
                self.response_id = message.get("id")
                self._usage(message.get("usage"))
            self._usage(obj.get("usage"))  # vLLM before 0.11 put it beside the message
        elif kind == "message_delta":
            self._usage(obj.get("usage"))
            delta = obj.get("delta")
            reason = delta.get("stop_reason") if isinstance(delta, dict) else None
            if isinstance(reason, str):
                self.finish(STOP_REASONS.get(reason, reason))
        elif kind == "message_stop":
            self.done = True
        elif kind == "error" or "error" in obj:
            error = obj.get("error")
            if isinstance(error, dict):
                self.fail(f"error event ({error.get('type')}): {str(error.get('message'))[:ERROR_BODY_CHARS]}")
            else:
                self.fail(f"error event: {str(error)[:ERROR_BODY_CHARS]}")
        return False  # content_block_stop, ping, ...

    def _delta(self, delta: object) -> bool:
        if not isinstance(delta, dict):
            return False
        kind = delta.get("type")
        if kind == "text_delta":
            piece = delta.get("text")
            return self.output(piece) if isinstance(piece, str) and piece else False
        if kind == "thinking_delta":
            piece = delta.get("thinking")
            return self.reasoning(piece) if isinstance(piece, str) and piece else False
        if kind == "input_json_delta" and self._tool_index is not None:
            return self.tool_output(self.tool_part(self._tool_index, None, None, delta.get("partial_json")))
        return False  # signature_delta, citations, ...

    def _start(self, event: JsonObject) -> bool:
        block = event.get("content_block")
        if not isinstance(block, dict):
            return False
        kind = block.get("type")
        if kind == "tool_use":
            index = event.get("index")
            self._tool_index = index if type(index) is int else len(self.tool_calls)
            return self.tool_output(self.tool_part(self._tool_index, block.get("id"), block.get("name"), None))
        self._tool_index = None
        if kind == "text" and isinstance(block.get("text"), str) and block["text"]:
            return self.output(block["text"])
        if kind == "thinking" and isinstance(block.get("thinking"), str) and block["thinking"]:
            return self.reasoning(block["thinking"])
        return False

    def _usage(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        read, created = usage.get("cache_read_input_tokens"), usage.get("cache_creation_input_tokens")
        if isinstance(usage.get("input_tokens"), int):
            cached = read if isinstance(read, int) else 0
            self.prompt_tokens = usage["input_tokens"] + cached + (created if isinstance(created, int) else 0)
            if isinstance(read, int):
                self.cached_prompt_tokens = read
        if isinstance(usage.get("output_tokens"), int):
            self.completion_tokens = usage["output_tokens"]
