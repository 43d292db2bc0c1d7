"""The mock's structured output and tool calls: what a scripted reply says when the
request asks for structure or offers tools, on the mock's usual schedule (one piece per chunk).

Structure is read from every dialect clients/structured.py sends: OpenAI's ``response_format``
(json_object, json_schema), vLLM's ``structured_outputs`` (json, json_object, choice), llama.cpp's
``json_schema``. The reply is the smallest instance of the schema (``instance``: every property,
each value the first of its enum/const, else a fixed value of its type), ``{}`` for json_object, the
first choice for a choice; split over the reply's chunks (padded with trailing spaces so every
chunk carries text: JSON allows them, a choice check ignores them). With tools (and tool_choice
not "none") the reply is one call of the named tool (else the first), streamed as vLLM streams a
call: the first chunk's delta carries its id, name and the first piece of its arguments (the
instance of the tool's parameters), later ones the next pieces; finish_reason ``tool_calls``.

``invalid_every`` N > 0: every N-th such request gets invalid output, a known answer for
valid_fraction: its JSON (or the call's arguments) cut one character short, a choice not among the
choices.
"""

from __future__ import annotations

import json
from typing import Any

# A JSON Schema or request body as the client sent it: a true edge, any shape.
Json = Any
Event = dict[str, object]


def instance(schema: Json) -> Json:
    """The smallest value the schema accepts, for the schemas tests and presets use."""
    if not isinstance(schema, dict):
        return {}
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return instance(schema[key][0])
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = kind[0] if kind else "object"
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: instance(sub) for name, sub in props.items()}
    if kind == "array":
        return [instance(schema.get("items") or {}) for _ in range(int(schema.get("minItems") or 1))]
    if kind == "string":
        return "x" * int(schema.get("minLength") or 1)
    if kind == "integer":
        return int(schema.get("minimum") or 1)
    if kind == "number":
        return float(schema.get("minimum") or 1.5)
    if kind == "boolean":
        return True
    return None


def asked_text(body: Json) -> str | None:
    """The reply a structured request gets (valid), or None when it asks for none the mock makes."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict):
        if fmt.get("type") == "json_object":
            return "{}"
        if fmt.get("type") == "json_schema":
            schema = (fmt.get("json_schema") or {}).get("schema")
            return json.dumps(instance(schema))
    guided = body.get("structured_outputs")
    if isinstance(guided, dict):
        if guided.get("json") is not None:
            schema = guided["json"]
            return json.dumps(instance(json.loads(schema) if isinstance(schema, str) else schema))
        if guided.get("json_object"):
            return "{}"
        if guided.get("choice"):
            return str(guided["choice"][0])
    if isinstance(body.get("json_schema"), dict):
        return json.dumps(instance(body["json_schema"]))
    return None


def tool_call(body: Json) -> tuple[str, str] | None:
    """The call a request offering tools gets: the tool's name and its arguments (JSON)."""
    tools = body.get("tools")
    choice = body.get("tool_choice", "auto")
    if not isinstance(tools, list) or not tools or choice == "none":
        return None
    chosen = tools[0].get("function") or {}
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        chosen = next((t["function"] for t in tools if (t.get("function") or {}).get("name") == name), chosen)
    return str(chosen.get("name", "tool")), json.dumps(instance(chosen.get("parameters") or {"type": "object"}))


def pieces(text: str, n: int) -> list[str]:
    """``text`` over ``n`` chunks, each at least one character (trailing spaces pad a short one)."""
    text = text.ljust(n)
    size, extra = divmod(len(text), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(text[start:end])
        start = end
    return out


def spoil(text: str) -> str:
    """Invalid output for a known answer: JSON one character short (never parses), else a non-choice."""
    stripped = text.rstrip()
    if stripped.startswith(("{", "[", '"')):
        return stripped[:-1]
    return stripped + "?not-a-choice"


def scripted_deltas(body: Json, n_chunks: int, rid: str, invalid: bool) -> tuple[list[Event], str] | None:
    """The chat deltas (or completion texts, as ``{"text": ...}``) of each of the ``n_chunks``
    chunks, and the finish reason; None when the request asks for neither structure nor tools."""
    call = tool_call(body) if body.get("messages") is not None else None
    if call is not None:
        name, arguments = call
        parts = pieces(spoil(arguments) if invalid else arguments, n_chunks)
        first: Event = {
            "index": 0,
            "id": f"call_{rid}",
            "type": "function",
            "function": {"name": name, "arguments": parts[0]},
        }
        rest: list[Event] = [{"tool_calls": [{"index": 0, "function": {"arguments": p}}]} for p in parts[1:]]
        return [{"tool_calls": [first]}, *rest], "tool_calls"
    text = asked_text(body)
    if text is None:
        return None
    key = "content" if body.get("messages") is not None else "text"
    return [{key: p} for p in pieces(spoil(text) if invalid else text, n_chunks)], "stop"
