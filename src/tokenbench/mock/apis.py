"""The mock's other streaming APIs: Anthropic's Messages (``POST /v1/messages``) and OpenAI's
Responses (``POST /v1/responses``), scripted exactly as its chat endpoint is.

A request is read as chat (``chat_body``): its conversation becomes the chat ``messages`` the mock
already reads (the system prompt or instructions first, as a ``system`` message; content blocks
or input parts as chat parts, a list of text only as its texts joined by newlines, as the mock
reads a chat message with images; Messages ``tool_use`` / Responses ``function_call`` as the
assistant's ``tool_calls``, ``tool_result`` / ``function_call_output`` as ``tool`` messages), its
limit ``max_tokens``, its tools, tool choice and JSON schema the chat ones, and ``stream_options``
asks for usage (both APIs always report it). So prompt tokens, the prefix cache, images,
structured output and tool calls are the chat endpoint's: the same conversation sent as chat,
Messages or Responses gets the same prompt tokens.

A reply is written by a ``Renderer``: the chat-shaped reply (a start, each content chunk's text or
reasoning or scripted delta, the finish and its usage, the faults' events) in its API's events.
The chat and completions shapes are the server's (server.py); the two here:

Messages, each ``event: <type>\\ndata: <json>\\n\\n``: ``message_start`` at once (usage's
``input_tokens``), then per content block ``content_block_start`` (``thinking`` for the reasoning
chunks, ``text``, or ``tool_use``) in the same write as its first ``content_block_delta``
(``thinking_delta``, ``text_delta``, ``input_json_delta``), the previous block's
``content_block_stop`` first; at the end ``content_block_stop``, ``message_delta`` (stop_reason
``end_turn`` / ``max_tokens`` / ``tool_use`` and the usage) and ``message_stop``. As Anthropic
counts them, ``input_tokens`` are the prompt's tokens not read from the cache and, with a prefix
cache, ``cache_read_input_tokens`` those read (their sum is the chat's prompt_tokens, and what
``POST /v1/messages/count_tokens`` answers). Faults: ``error`` events (``overloaded_error``; an
abort's ``api_error``), and the API's error body for the HTTP ones.

Responses, each ``event: <type>\\ndata: <json>\\n\\n`` with an increasing ``sequence_number``:
``response.created`` and ``response.in_progress`` at once, then per output item (a ``reasoning``
item for the reasoning chunks, a ``message``, or a ``function_call``)
``response.output_item.added`` (a message's ``response.content_part.added`` with it) in the same
write as its first delta (``response.reasoning_text.delta``, ``response.output_text.delta``,
``response.function_call_arguments.delta``); an item closes with its ``.done`` events and
``response.output_item.done``; the end is ``response.completed`` with the usage, or
``response.incomplete`` (``max_output_tokens``) when the reply stopped at the request's
``max_output_tokens``. Faults: an ``error`` event, ``response.failed`` for an abort, and the API's
error body for the HTTP ones.

Neither sends ``[DONE]``, per-chunk usage, or vLLM's metrics object.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

# A JSON request body as the client sent it: a true edge, any shape.
Body = dict[str, Any]
# An event or usage object the mock writes as JSON.
Event = dict[str, object]

API_PATHS = {"/v1/messages": "messages", "/v1/responses": "responses"}


@dataclass(frozen=True)
class Prompt:
    """A request's prompt tokens (its images' included) and, with a prefix cache, those it hit."""

    tokens: int
    cached: int | None = None  # None: no prefix cache


def _json(data: object) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


class Renderer(ABC):
    """One reply's events in its API's shape, and the state they need (what is open, the counts).
    Each method answers the bytes of one write (``start``, ``content``, ``scripted``,
    ``malformed``, ``error_event``) or of several (``abort``, ``end``); the server writes them on
    the script's schedule."""

    chat: ClassVar[bool] = True  # reads chat messages: reasoning chunks and images apply
    # the reply id's prefix in this API's words: the id written is the delivery log's key too,
    # so a record's response_id finds its delivery whatever the API
    ID_PREFIX: ClassVar[str] = ""

    def __init__(self, rid: str, model: str, body: Body, prompt: Callable[[], Prompt]) -> None:
        self.rid, self.model = rid, model
        self.prompt = prompt  # counted once (the prefix cache's lookup counts it as seen)
        self.limited = body.get("max_tokens") is not None  # a reply ending "length" stopped at the request's limit

    @staticmethod
    @abstractmethod
    def error_body(status: int, message: str) -> Event:
        """The API's error answer (an HTTP fault, an unknown model)."""

    @abstractmethod
    def start(self) -> bytes:
        """What is written at once (b"": nothing)."""

    @abstractmethod
    def content(self, i: int, text: str, reasoning: bool, so_far: int) -> bytes:
        """Content chunk ``i``: its text, reasoning or not; ``so_far``: the tokens with it."""

    @abstractmethod
    def scripted(self, i: int, delta: Event, so_far: int) -> bytes:
        """Content chunk ``i`` of a structured reply or tool call: its chat delta (structured.py)."""

    @abstractmethod
    def malformed(self) -> bytes:
        """An event that is not JSON."""

    @abstractmethod
    def error_event(self) -> bytes:
        """A scripted error event mid-stream (the stream goes on)."""

    @abstractmethod
    def abort(self, i: int, so_far: int) -> list[bytes]:
        """How the stream ends when the engine aborts it after ``i`` chunks (``so_far`` tokens)."""

    @abstractmethod
    def end(self, reason: str, completion: int, reasoning: int, metrics: Event | None) -> list[bytes]:
        """The end of a whole reply: its chat finish reason, output and reasoning tokens."""


def chat_body(api: str, body: Body) -> Body:
    """A Messages or Responses request as the chat request the mock reads (chat and completions
    bodies as they are)."""
    if api == "messages":
        return _from_messages(body)
    if api == "responses":
        return _from_responses(body)
    return body


def _text_or_parts(parts: list[Event]) -> object:
    """Chat content: parts with an image as they are, text only as its texts joined by newlines
    (how the mock reads a message with images: the same words either way)."""
    if any(p.get("type") != "text" for p in parts):
        return parts
    return "\n".join(str(p.get("text", "")) for p in parts)


def _function(name: object, description: object, parameters: object) -> Event:
    function: Event = {"name": name}
    if description is not None:
        function["description"] = description
    function["parameters"] = parameters if parameters is not None else {"type": "object"}
    return {"type": "function", "function": function}


def _call(call_id: object, name: object, arguments: object) -> Event:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _json_schema(name: object, schema: object) -> Event:
    return {"type": "json_schema", "json_schema": {"name": name or "output", "schema": schema}}


# Messages


def _block_part(block: Any) -> Event | None:
    """A Messages content block as a chat part (None: not sent back as content)."""
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block.get("text", "")}
    if kind == "image":
        source = block.get("source") or {}
        if source.get("type") == "base64":
            url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
        else:
            url = str(source.get("url", ""))
        return {"type": "image_url", "image_url": {"url": url}}
    if kind in ("thinking", "redacted_thinking", "tool_use", "tool_result"):
        return None
    return dict(block)


def _block_content(content: Any) -> object:
    if not isinstance(content, list):
        return content if content is not None else ""
    return _text_or_parts([p for p in map(_block_part, content) if p is not None])


def _messages_turn(m: Any) -> list[Event]:
    """A Messages turn as chat messages: tool results as ``tool`` messages (first: they answer the
    previous turn's calls), an assistant's ``tool_use`` blocks as its ``tool_calls``."""
    if not isinstance(m, dict):
        return []
    role, content = m.get("role", "user"), m.get("content")
    if not isinstance(content, list):
        return [{"role": role, "content": content}]
    blocks = [b for b in content if isinstance(b, dict)]
    out: list[Event] = [
        {"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": _block_content(b.get("content"))}
        for b in blocks
        if b.get("type") == "tool_result"
    ]
    parts = [p for p in map(_block_part, blocks) if p is not None]
    calls = [
        _call(b.get("id"), b.get("name"), json.dumps(b.get("input") or {}))
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    if calls:
        text = "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
        out.append({"role": role, "content": text or None, "tool_calls": calls})
    elif parts or not out:
        out.append({"role": role, "content": _text_or_parts(parts)})
    return out


def _messages_tool_choice(choice: Any) -> object:
    if not isinstance(choice, dict):
        return choice
    kind = choice.get("type")
    if kind == "tool":
        return {"type": "function", "function": {"name": choice.get("name")}}
    return {"any": "required"}.get(str(kind), kind)


def _from_messages(body: Body) -> Body:
    consumed = {"system", "messages", "tools", "tool_choice", "output_format", "stream_options", "prompt"}
    out: Body = {k: v for k, v in body.items() if k not in consumed}
    messages: list[Event] = []
    system = body.get("system")
    if isinstance(system, list):
        system = "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    if system:
        messages.append({"role": "system", "content": system})
    for m in body.get("messages") or []:
        messages += _messages_turn(m)
    out["messages"] = messages
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("name")]
    if tools:
        out["tools"] = [_function(t["name"], t.get("description"), t.get("input_schema")) for t in tools]
        if body.get("tool_choice") is not None:
            out["tool_choice"] = _messages_tool_choice(body["tool_choice"])
    fmt = body.get("output_format") or (body.get("output_config") or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        out["response_format"] = _json_schema(fmt.get("name"), fmt.get("schema"))
    out["stream_options"] = {"include_usage": True}
    return out


# Responses


def _input_part(part: Any) -> Event | None:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text"):
        return {"type": "text", "text": part.get("text", "")}
    if kind == "input_image":
        url = part.get("image_url") or part.get("file_id") or ""
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "refusal":
        return {"type": "text", "text": part.get("refusal", "")}
    return None


def _input_content(content: Any) -> object:
    if not isinstance(content, list):
        return content if content is not None else ""
    return _text_or_parts([p for p in map(_input_part, content) if p is not None])


def _input_messages(items: Any) -> list[Event]:
    """Responses input items as chat messages: function calls on the assistant message before
    them (one turn), their outputs as ``tool`` messages."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    out: list[Event] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "function_call":
            call = _call(item.get("call_id"), item.get("name"), item.get("arguments", ""))
            last = out[-1] if out else None
            if last is not None and last.get("role") == "assistant":
                calls = last.get("tool_calls")
                last["tool_calls"] = [*calls, call] if isinstance(calls, list) else [call]
                if not last.get("content"):
                    last["content"] = None
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            out.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": _input_content(item.get("output"))}
            )
        elif kind in (None, "message") and "role" in item:
            out.append({"role": item["role"], "content": _input_content(item.get("content"))})
    return out


def _responses_tool_choice(choice: Any) -> object:
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    return choice


def _from_responses(body: Body) -> Body:
    consumed = {
        "input",
        "instructions",
        "max_output_tokens",
        "tools",
        "tool_choice",
        "text",
        "stream_options",
        "prompt",
    }
    out: Body = {k: v for k, v in body.items() if k not in consumed}
    messages: list[Event] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    out["messages"] = messages + _input_messages(body.get("input"))
    if body.get("max_output_tokens") is not None:
        out["max_tokens"] = body["max_output_tokens"]
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == "function"]
    if tools:
        out["tools"] = [_function(t.get("name"), t.get("description"), t.get("parameters")) for t in tools]
        if body.get("tool_choice") is not None:
            out["tool_choice"] = _responses_tool_choice(body["tool_choice"])
    fmt = (body.get("text") or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        out["response_format"] = _json_schema(fmt.get("name"), fmt.get("schema"))
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        out["response_format"] = {"type": "json_object"}
    out["stream_options"] = {"include_usage": True}
    return out


def _sse(kind: str, data: Event) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + _json({"type": kind, **data}) + b"\n\n"


def _tool_calls(delta: Event) -> list[dict[str, Any]]:
    calls = delta.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


class MessagesEvents(Renderer):
    """Anthropic's Messages events (the module's doc)."""

    STOP: ClassVar[dict[str, str]] = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
    ERRORS: ClassVar[dict[int, str]] = {
        400: "invalid_request_error",
        404: "not_found_error",
        429: "rate_limit_error",
        500: "api_error",
    }

    def __init__(self, rid: str, model: str, body: Body, prompt: Callable[[], Prompt]) -> None:
        super().__init__(rid, model, body, prompt)
        self._open: str | None = None  # the open content block's type
        self._index = -1  # its index

    @staticmethod
    def error_body(status: int, message: str) -> Event:
        kind = MessagesEvents.ERRORS.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def _usage(self, output: int) -> Event:
        prompt = self.prompt()
        usage: Event = {"input_tokens": prompt.tokens - (prompt.cached or 0), "output_tokens": output}
        if prompt.cached is not None:  # as Anthropic counts them: input_tokens are the ones not cached
            usage["cache_read_input_tokens"] = prompt.cached
        return usage

    def start(self) -> bytes:
        message: Event = {
            "id": self.rid,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self._usage(0),
        }
        return _sse("message_start", {"message": message})

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        self._open = None
        return _sse("content_block_stop", {"index": self._index})

    def _block(self, block: Event, new: bool = False) -> bytes:
        """The block's start (the open one's stop first) unless one of its type is open."""
        if self._open == block["type"] and not new:
            return b""
        out = self._close()
        self._index += 1
        self._open = str(block["type"])
        return out + _sse("content_block_start", {"index": self._index, "content_block": block})

    def _delta(self, delta: Event) -> bytes:
        return _sse("content_block_delta", {"index": self._index, "delta": delta})

    def content(self, i: int, text: str, reasoning: bool, so_far: int) -> bytes:
        if reasoning:
            return self._block({"type": "thinking", "thinking": ""}) + self._delta(
                {"type": "thinking_delta", "thinking": text}
            )
        return self._text(text)

    def _text(self, text: str) -> bytes:
        return self._block({"type": "text", "text": ""}) + self._delta({"type": "text_delta", "text": text})

    def scripted(self, i: int, delta: Event, so_far: int) -> bytes:
        calls = _tool_calls(delta)
        if not calls:
            return self._text(str(delta.get("content") or delta.get("text") or ""))
        out = b""
        for call in calls:
            function = call.get("function") or {}
            if call.get("id") is not None or function.get("name") is not None:  # a call's first delta
                block: Event = {"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": {}}
                out += self._block(block, new=True)
            if function.get("arguments"):
                out += self._delta({"type": "input_json_delta", "partial_json": function["arguments"]})
        return out

    def malformed(self) -> bytes:
        return b"event: content_block_delta\ndata: {this is not json\n\n"

    def error_event(self) -> bytes:
        return _sse("error", {"error": {"type": "overloaded_error", "message": "scripted error event"}})

    def abort(self, i: int, so_far: int) -> list[bytes]:
        return [_sse("error", {"error": {"type": "api_error", "message": "the engine aborted the request"}})]

    def end(self, reason: str, completion: int, reasoning: int, metrics: Event | None) -> list[bytes]:
        stop = self.STOP.get(reason, "end_turn") if reason != "length" or self.limited else "end_turn"
        message_delta = {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": self._usage(completion)}
        return [self._close() + _sse("message_delta", message_delta) + _sse("message_stop", {})]


@dataclass
class _Item:
    """A Responses output item as it is written: its kind, id, index and text (or arguments) so far."""

    kind: str  # "message", "reasoning" or "function_call"
    id: str
    index: int
    text: str = ""
    call_id: object = None
    name: object = None
    done: bool = False

    def whole(self, status: str = "in_progress") -> Event:
        if self.kind == "message":
            content = [{"type": "output_text", "text": self.text, "annotations": []}] if status != "in_progress" else []
            return {"id": self.id, "type": "message", "role": "assistant", "status": status, "content": content}
        if self.kind == "reasoning":
            content = [{"type": "reasoning_text", "text": self.text}] if status != "in_progress" else []
            return {"id": self.id, "type": "reasoning", "summary": [], "content": content}
        return {
            "id": self.id,
            "type": "function_call",
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.text if status != "in_progress" else "",
            "status": status,
        }


class ResponsesEvents(Renderer):
    """OpenAI's Responses events (the module's doc)."""

    ERRORS: ClassVar[dict[int, tuple[str, str | None]]] = {
        400: ("invalid_request_error", None),
        404: ("invalid_request_error", "model_not_found"),
        429: ("rate_limit_error", "rate_limit_exceeded"),
        500: ("server_error", "server_error"),
    }
    PREFIX: ClassVar[dict[str, str]] = {"message": "msg", "reasoning": "rs", "function_call": "fc"}
    ID_PREFIX: ClassVar[str] = "resp_"

    def __init__(self, rid: str, model: str, body: Body, prompt: Callable[[], Prompt]) -> None:
        super().__init__(rid, model, body, prompt)
        self.id = rid
        self.created_at = int(time.time())
        self._seq = 0
        self._items: list[_Item] = []  # the output items so far, the last one open unless done

    @staticmethod
    def error_body(status: int, message: str) -> Event:
        kind, code = ResponsesEvents.ERRORS.get(status, ("server_error", "server_error"))
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def _event(self, kind: str, data: Event) -> bytes:
        out = b"event: " + kind.encode() + b"\ndata: "
        out += _json({"type": kind, "sequence_number": self._seq, **data}) + b"\n\n"
        self._seq += 1
        return out

    def _response(self, status: str, usage: Event | None = None, **extra: object) -> Event:
        output = [item.whole("completed" if item.done else "incomplete") for item in self._items]
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": self.model,
            "output": output,
            **extra,
            "usage": usage,
        }

    def start(self) -> bytes:
        created = self._event("response.created", {"response": self._response("in_progress")})
        return created + self._event("response.in_progress", {"response": self._response("in_progress")})

    def _open(self) -> _Item | None:
        return self._items[-1] if self._items and not self._items[-1].done else None

    def _close(self) -> bytes:
        item = self._open()
        if item is None:
            return b""
        item.done = True
        at: Event = {"item_id": item.id, "output_index": item.index}
        out = b""
        if item.kind == "message":
            part = {"type": "output_text", "text": item.text, "annotations": []}
            out += self._event("response.output_text.done", {**at, "content_index": 0, "text": item.text})
            out += self._event("response.content_part.done", {**at, "content_index": 0, "part": part})
        elif item.kind == "reasoning":
            out += self._event("response.reasoning_text.done", {**at, "content_index": 0, "text": item.text})
        else:
            out += self._event("response.function_call_arguments.done", {**at, "arguments": item.text})
        return out + self._event(
            "response.output_item.done", {"output_index": item.index, "item": item.whole("completed")}
        )

    def _item(self, kind: str, new: bool = False, call_id: object = None, name: object = None) -> tuple[_Item, bytes]:
        """The open item of this kind, else a new one (the open one closed first) and its added events."""
        item = self._open()
        if item is not None and item.kind == kind and not new:
            return item, b""
        out = self._close()
        index = len(self._items)
        item = _Item(
            kind,
            f"{self.PREFIX[kind]}_{self.rid.removeprefix(self.ID_PREFIX)}_{index}",
            index,
            call_id=call_id,
            name=name,
        )
        self._items.append(item)
        out += self._event("response.output_item.added", {"output_index": index, "item": item.whole()})
        if kind == "message":
            part = {"type": "output_text", "text": "", "annotations": []}
            at = {"item_id": item.id, "output_index": index, "content_index": 0}
            out += self._event("response.content_part.added", {**at, "part": part})
        return item, out

    def _text(self, kind: str, text: str) -> bytes:
        item, out = self._item(kind)
        item.text += text
        delta = "response.reasoning_text.delta" if kind == "reasoning" else "response.output_text.delta"
        return out + self._event(
            delta, {"item_id": item.id, "output_index": item.index, "content_index": 0, "delta": text}
        )

    def content(self, i: int, text: str, reasoning: bool, so_far: int) -> bytes:
        return self._text("reasoning" if reasoning else "message", text)

    def scripted(self, i: int, delta: Event, so_far: int) -> bytes:
        calls = _tool_calls(delta)
        if not calls:
            return self._text("message", str(delta.get("content") or delta.get("text") or ""))
        out = b""
        for call in calls:
            function = call.get("function") or {}
            first = call.get("id") is not None or function.get("name") is not None
            item, added = self._item("function_call", first, call.get("id"), function.get("name"))
            out += added
            if function.get("arguments"):
                item.text += function["arguments"]
                at = {"item_id": item.id, "output_index": item.index}
                out += self._event("response.function_call_arguments.delta", {**at, "delta": function["arguments"]})
        return out

    def malformed(self) -> bytes:
        return b"event: response.output_text.delta\ndata: {this is not json\n\n"

    def error_event(self) -> bytes:
        return self._event("error", {"code": "server_error", "message": "scripted error event", "param": None})

    def abort(self, i: int, so_far: int) -> list[bytes]:
        error = {"code": "server_error", "message": "the engine aborted the request"}
        return [self._event("response.failed", {"response": self._response("failed", error=error)})]

    def end(self, reason: str, completion: int, reasoning: int, metrics: Event | None) -> list[bytes]:
        out = self._close()
        prompt = self.prompt()
        usage: Event = {
            "input_tokens": prompt.tokens,
            "input_tokens_details": {"cached_tokens": prompt.cached or 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt.tokens + completion,
        }
        if reason == "length" and self.limited:  # stopped at max_output_tokens
            details = {"reason": "max_output_tokens"}
            response = self._response("incomplete", usage, incomplete_details=details)
            return [out + self._event("response.incomplete", {"response": response})]
        return [out + self._event("response.completed", {"response": self._response("completed", usage)})]
