"""OpenAI's Responses API: POST /v1/responses, streamed as typed server-sent events.

Served by vLLM (vllm/entrypoints/openai/responses) and llama.cpp's server. The request: ``model``,
``input`` (one user text as a string, else a list of items: ``{"role", "content"}`` messages with
``input_text`` / ``input_image`` parts, an assistant's tool calls as ``function_call`` items and
their results as ``function_call_output`` items), ``instructions`` (the system prompt),
``max_output_tokens``, ``stream``, ``store: false`` (a benchmark's replies are never read back: a
stored reply is memory the server keeps), ``tools`` and ``text.format`` (clients/structured.py),
and vLLM's own ``ignore_eos`` and ``priority``. Each event names its kind in ``type``:

- ``response.created``: the response's id; ``response.in_progress``, ``response.output_item.added``
  (a ``function_call`` item's name: a chunk, as chat's first tool-call delta),
  ``response.content_part.added`` and the ``*.done`` events: nothing new;
- ``response.output_text.delta`` (the answer; a refusal's ``response.refusal.delta`` too),
  ``response.reasoning_text.delta`` and ``response.reasoning_summary_text.delta`` (reasoning: a
  chunk, counted apart), ``response.function_call_arguments.delta`` (a tool call's arguments);
- ``response.completed`` (the end marker, with the usage: ``input_tokens``, ``output_tokens``,
  ``input_tokens_details.cached_tokens``, ``output_tokens_details.reasoning_tokens``, and vLLM's
  per-request ``metrics`` object when its server sends it; llama.cpp adds its ``timings`` beside
  the response, as on chat); its ``status`` ``incomplete`` (vLLM)
  or a ``response.incomplete`` event (OpenAI) ends a reply cut at ``max_output_tokens``: finish
  reason ``length``;
- ``response.failed`` (``response.error``) and ``error`` (``code``, ``message``): the stream fails.

The finish reason is chat's word: ``stop``, ``tool_calls`` when the reply called a tool, ``length``.
"""

from __future__ import annotations

from typing import Any

from orjson import loads as _loads  # payloads are parsed on the hot path

from tokenbench.clients.structured import conversation_fields
from tokenbench.clients.wire import ERROR_BODY_CHARS, Body, Framing, JsonObject, Payload, Stream
from tokenbench.config.target import ResolvedTarget
from tokenbench.datasets.chat_images import chat_messages
from tokenbench.records import Request

PATH = "/v1/responses"
Item = dict[str, Any]  # one input item as the API defines it (a JSON edge)
TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})
REASONING_DELTAS = frozenset({"response.reasoning_text.delta", "response.reasoning_summary_text.delta"})
ENDS = frozenset({"response.completed", "response.incomplete"})


class ResponsesWire:
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
        instructions, items = response_input(messages)
        body: Body = {"model": adapter or target.model, "input": items, "stream": True, "store": False}
        if instructions:
            body["instructions"] = instructions
        if request.max_tokens is not None:
            body["max_output_tokens"] = request.max_tokens
        if target.ignore_eos:  # vLLM's ResponsesRequest field
            body["ignore_eos"] = True
        if target.temperature is not None:
            body["temperature"] = target.temperature
        if group is not None and group.priority is not None:  # vLLM's ResponsesRequest field
            body["priority"] = group.priority
        if target.response_format is not None or target.tools:
            body.update(conversation_fields("responses", target))
        body.update(target.extra_body)
        return body

    def new_stream(self) -> Stream:
        return ResponsesStream()

    def model_ids(self, probe_json: object) -> list[str]:
        data = probe_json.get("data", []) if isinstance(probe_json, dict) else []
        return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]


def response_input(messages: list[dict[str, Any]]) -> tuple[str, str | list[Item]]:
    """Chat messages (the form every request holds) as the Responses API's ``instructions`` and
    ``input``: one user text alone is the string itself; otherwise each turn an item, an
    assistant's tool calls ``function_call`` items, a ``tool`` message a ``function_call_output``."""
    system = [str(m.get("content") or "") for m in messages if m.get("role") == "system"]
    turns = [m for m in messages if m.get("role") != "system"]
    instructions = "\n\n".join(s for s in system if s)
    if len(turns) == 1 and turns[0].get("role") == "user" and isinstance(turns[0].get("content"), str):
        return instructions, turns[0]["content"]
    items: list[Item] = []
    for m in turns:
        role = m.get("role")
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": m.get("tool_call_id") or "",
                    "output": str(m.get("content") or ""),
                }
            )
            continue
        content = m.get("content")
        if content:
            items.append({"role": role, "content": _parts(content, role == "assistant")})
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.get("id") or "",
                    "name": fn.get("name") or "",
                    "arguments": fn.get("arguments") or "",
                }
            )
    return instructions, items


def _parts(content: object, assistant: bool) -> str | list[Item]:
    """A chat message's content as a Responses message's: a string as it is, parts as
    ``input_text`` / ``input_image`` (an assistant's text as ``output_text``)."""
    if not isinstance(content, list):
        return str(content)
    parts: list[Item] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            parts.append({"type": "output_text" if assistant else "input_text", "text": str(part.get("text", ""))})
        elif part.get("type") == "image_url":
            parts.append({"type": "input_image", "image_url": str((part.get("image_url") or {}).get("url", ""))})
    return parts


class ResponsesStream(Stream):
    __slots__ = ("_calls",)

    def __init__(self) -> None:
        super().__init__()
        self._calls: dict[str, int] = {}  # a function_call item's id: its index among the reply's calls

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
        if kind in TEXT_DELTAS:
            piece = obj.get("delta")
            return self.output(piece) if isinstance(piece, str) and piece else False
        if kind in REASONING_DELTAS:
            piece = obj.get("delta")
            return self.reasoning(piece) if isinstance(piece, str) and piece else False
        if kind == "response.function_call_arguments.delta":
            index = self._call_index(obj.get("item_id"), obj.get("output_index"))
            return self.tool_output(self.tool_part(index, None, None, obj.get("delta")))
        if kind == "response.output_item.added":
            item = obj.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call":
                index = self._call_index(item.get("id"), obj.get("output_index"))
                return self.tool_output(
                    self.tool_part(index, item.get("call_id"), item.get("name"), item.get("arguments"))
                )
        elif kind == "response.created":
            response = obj.get("response")
            if isinstance(response, dict):
                self.response_id = response.get("id")
        elif kind in ENDS:
            if isinstance(obj.get("timings"), dict):  # llama.cpp's per-request timings (ms), as on chat
                self.server_timings = obj["timings"]
            self._end(obj.get("response"), kind == "response.incomplete")
        elif kind == "response.failed":
            response = obj.get("response")
            error = response.get("error") if isinstance(response, dict) else None
            self._error("response.failed", error if isinstance(error, dict) else {"message": error})
        elif kind == "error" or "error" in obj:
            error = obj.get("error")
            self._error("error event", error if isinstance(error, dict) else obj)
        return False

    def _call_index(self, item_id: object, output_index: object) -> int:
        """A function call's index among the reply's calls, by its item id (else its output index)."""
        key = str(item_id) if item_id is not None else f"#{output_index}"
        return self._calls.setdefault(key, len(self._calls))

    def _end(self, response: object, incomplete: bool) -> None:
        if not isinstance(response, dict):
            response = {}
        usage = response.get("usage")
        if isinstance(usage, dict):
            if isinstance(usage.get("input_tokens"), int):
                self.prompt_tokens = usage["input_tokens"]
            if isinstance(usage.get("output_tokens"), int):
                self.completion_tokens = usage["output_tokens"]
            details = usage.get("input_tokens_details")
            if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                self.cached_prompt_tokens = details["cached_tokens"]
            elif self.server_timings is not None and isinstance(self.server_timings.get("cache_n"), int):
                self.cached_prompt_tokens = int(self.server_timings["cache_n"])
            details = usage.get("output_tokens_details")
            if isinstance(details, dict) and isinstance(details.get("reasoning_tokens"), int):
                self.reasoning_tokens = details["reasoning_tokens"]
        if isinstance(response.get("metrics"), dict):  # vLLM's per-request metrics, as on chat's usage chunk
            self.server_metrics = response["metrics"]
        status = response.get("status")
        if incomplete or status == "incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            self.finish("length" if reason in (None, "max_output_tokens") else reason)
        elif status == "failed":
            error = response.get("error")
            self._error("response failed", error if isinstance(error, dict) else {"message": error})
        else:
            self.finish("tool_calls" if self.tool_calls else "stop")
        self.done = not self.failed

    def _error(self, where: str, error: JsonObject) -> None:
        kind = error.get("code") or error.get("type")
        message = str(error.get("message"))[:ERROR_BODY_CHARS]
        self.fail(f"{where} ({kind}): {message}" if kind else f"{where}: {message}")
