"""OpenTelemetry GenAI traces, read as inference-perf's ``otel_trace_replay`` reads them
(kubernetes-sigs/inference-perf ``inference_perf/datagen/replay/otel_trace_to_replay_graph.py`` and
``otel_trace_utils.py``; test traces ``examples/otel/test_traces/``; docs/otel_trace_replay.md).

Two layouts: inference-perf's file, one session (``{"trace_id", "spans": [...]}``, each span
``{span_id, name, start_time, end_time, attributes}``; the session is ``trace_id``, else the file's
stem), and OTel SDK spans one after another (``span.to_json()`` as Exgentic's ``otel_spans.jsonl``
writes them: ``context.span_id``, indented or one a line), grouped into sessions by
``exgentic.session.id``, else ``gen_ai.conversation.id``, else the trace id, each starting
``start_s`` after the file's first chat span. Detection sees only the one-a-line form (an indented
file starts with a bare ``{``: name ``--program-format otel``). Read as inference-perf does:

- **Calls.** Chat spans (``gen_ai.operation.name`` "chat", or a name starting "chat ") with
  ``gen_ai.input.messages`` (a JSON string or list of messages), error spans included (its
  ``include_errors`` default), spans identical in times and attributes once, in start order.
  ``parent_span_id`` is not used.
- **Parents.** Each call's *causal* parents: walking back from the latest earlier call, one whose
  reply text is an input assistant message's text, or is inside it, or whose reply's tool calls all
  appear (by id) among the input's (an empty reply matches nothing; upstream's is inside every
  message), skipping the causal ancestors of those found; and the *temporal* one: the
  latest-started earlier call that ended by this one's start. (Its third way, a reply split over
  several messages without ids, is not read.) The delay is inference-perf's ``wait_ms``: the
  start less the latest parent's end, at least 0 and capped at 15 s (``max_wait_ms``' default: a
  longer wait, a person's or a tool's, is not replayed), the same on every parent's edge, so the
  call is ready the delay after its last parent ends, as there. Its ``tool_s`` is the time
  ``execute_tool`` spans (OTel GenAI semconv) ran within that gap, at most the delay (the test
  traces have none). A call without parents starts at its recorded offset (inference-perf: at once).
- **Prompts.** A call's messages, as inference-perf's ``decompose_input`` splits them: the longest
  run of leading messages equal (role and text) to an ancestor's is that ancestor's (``shared``);
  after it, an assistant message equal to an ancestor's reply, or holding all its tool calls' ids,
  is that reply (``output``: ``Output``); the rest are static ``Message`` segments (``unique``; a
  tool call or result as its text). The longest ancestor's prompt the call's starts with is written
  ``PromptOf``; an ancestor that is not a parent, reused so, gets an edge of no delay (it ended
  before a parent began: it never holds the call).
- ``max_tokens``: ``gen_ai.usage.output_tokens`` (or ``completion_tokens``), else the recorded
  reply's length at 4 characters a token (both as inference-perf's ``expected_output_tokens``),
  else ``gen_ai.request.max_tokens``, else 1000 (inference-perf's ``default_max_tokens``).
  ``gen_ai.request.max_tokens`` is the recording's cap, not its length: 500 for a 37-token reply
  in ``simple_chain``. inference-perf's raise for a recorded tool call (``max(4 x, 4096)`` where
  tool definitions were captured) is not applied.
- The reply (``Recorded.output_text``): ``gen_ai.output.text`` (or ``gen_ai.completion``,
  ``gen_ai.output``), else ``gen_ai.output.messages``' first assistant message, its text and its
  tool calls as inference-perf writes them (``<|tool_call|>name<|tool_args|>args<|end|>``).
  ``gen_ai.tool.definitions`` are the call's ``tools``; the model is ``gen_ai.request.model``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tokenbench.datasets.programs.model import (
    Call,
    Edge,
    Message,
    Output,
    Program,
    PromptOf,
    Recorded,
    Segment,
    role_of,
)
from tokenbench.errors import BadInput

FORMAT = "otel"
MAX_WAIT_MS = 15_000  # inference-perf's max_wait_ms default
DEFAULT_MAX_TOKENS = 1000  # inference-perf's default_max_tokens
CHARS_PER_TOKEN = 4  # inference-perf's estimate_tokens
SESSION_KEYS = ("exgentic.session.id", "gen_ai.conversation.id", "session.id")
OUTPUT_TEXT_KEYS = ("gen_ai.output.text", "gen_ai.completion", "gen_ai.output")


def looks_like(obj: object) -> bool:
    if not isinstance(obj, dict):
        return False
    spans = obj.get("spans")
    if isinstance(spans, list):
        return all(isinstance(s, dict) and "attributes" in s for s in spans[:1])
    context = obj.get("context")
    return isinstance(context, dict) and "span_id" in context and "start_time" in obj  # an SDK span


def read(path: Path) -> list[Program]:
    text = path.read_text(encoding="utf-8")
    try:
        whole: Any = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and isinstance(whole.get("spans"), list):
        sid = str(whole.get("trace_id") or whole.get("session_id") or path.stem)
        spans = [_span(s, f"{path}: span {i}") for i, s in enumerate(whole["spans"])]
        return [_session(sid, spans, None, f"{path}")]
    values = [(f"{path}", v) for v in whole] if isinstance(whole, list) else _values(path, text)
    groups: dict[str, list[_Span]] = {}
    for where, value in values:
        span = _span(value, where)
        key = next((str(span.attrs[k]) for k in SESSION_KEYS if span.attrs.get(k)), span.trace or path.stem)
        groups.setdefault(key, []).append(span)
    chats = [s.start for spans in groups.values() for s in spans if s.chat is not None]
    if not chats:
        raise BadInput(f"{path}: no chat span with gen_ai.input.messages")
    origin = min(chats)
    return [
        _session(sid, spans, origin, f"{path}")
        for sid, spans in groups.items()
        if any(s.chat is not None for s in spans)
    ]


def _values(path: Path, text: str) -> list[tuple[str, Any]]:
    """The JSON values one after another in ``text`` (one a line, or indented), each with its line."""
    decoder = json.JSONDecoder()
    out: list[tuple[str, Any]] = []
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return out
        line = text.count("\n", 0, at) + 1
        try:
            value, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{path}:{text.count(chr(10), 0, exc.pos) + 1}: not JSON ({exc.msg})") from None
        out.append((f"{path}:{line}", value))


# --- spans ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Msg:
    role: str
    text: str
    tool_ids: frozenset[str]  # the ids of the tool calls it holds
    tool_result: bool


@dataclass(frozen=True, slots=True)
class _Chat:
    messages: tuple[_Msg, ...]
    reply: str | None
    reply_tool_ids: frozenset[str]  # the reply's tool calls' ids (empty when one has none)
    keys: tuple[tuple[str, str], ...]  # each message's role and text: what makes two equal
    tool_ids: frozenset[str]  # the ids of every tool call in the input


@dataclass(frozen=True, slots=True)
class _Span:
    id: str
    trace: str
    start: float  # epoch seconds
    end: float
    attrs: dict[str, Any]
    signature: str  # times and attributes: inference-perf keeps one span of each
    chat: _Chat | None
    tool: bool  # an execute_tool span


def _span(obj: Any, where: str) -> _Span:
    if not isinstance(obj, dict):
        raise BadInput(f"{where}: a span is a JSON object")
    context: dict[str, Any] = obj["context"] if isinstance(obj.get("context"), dict) else {}
    sid = str(obj.get("span_id") or context.get("span_id") or "")
    if not sid:
        raise BadInput(f"{where}: a span without a span_id")
    where = f"{where} ({sid})"
    attrs = obj.get("attributes") or {}
    if not isinstance(attrs, dict):
        raise BadInput(f"{where}: attributes is not an object")
    start = _time(obj.get("start_time"), "start_time", where)
    end = _time(obj.get("end_time"), "end_time", where) if obj.get("end_time") else start
    name = str(obj.get("name") or "")
    op = attrs.get("gen_ai.operation.name")
    chat = None
    if (op == "chat" or name.startswith("chat ")) and attrs.get("gen_ai.input.messages"):
        chat = _chat(attrs, where)
    signature = f"{obj.get('start_time')}|{obj.get('end_time')}|{json.dumps(attrs, sort_keys=True)}"
    trace = str(obj.get("trace_id") or context.get("trace_id") or "")
    tool = op == "execute_tool" or name.startswith("execute_tool")
    return _Span(sid, trace, start, end, attrs, signature, chat, tool)


def _chat(attrs: dict[str, Any], where: str) -> _Chat:
    raw = _json(attrs["gen_ai.input.messages"], "gen_ai.input.messages", where)
    if not isinstance(raw, list):
        raise BadInput(f"{where}: gen_ai.input.messages is not a list of messages")
    messages = []
    for m in raw:
        if not isinstance(m, dict) or "role" not in m:
            raise BadInput(f"{where}: gen_ai.input.messages holds {str(m)[:60]!r}, not a message with a role")
        messages.append(_message(m))
    reply, ids = _reply(attrs, where)
    keys = tuple((m.role, m.text) for m in messages)
    return _Chat(tuple(messages), reply, ids, keys, frozenset().union(*(m.tool_ids for m in messages)))


def _message(m: dict[str, Any]) -> _Msg:
    """A message's role and text as inference-perf compares them (otel_trace_utils.reconstruct_llm_input)."""
    role = "system" if m["role"] == "developer" else str(m["role"])
    content = m.get("content")
    parts: list[Any] = []
    if isinstance(m.get("parts"), list):
        parts = m["parts"]
    elif isinstance(content, list):
        parts = content
    calls = [_call_of(tc) for tc in m.get("tool_calls") or () if isinstance(tc, dict)]
    if isinstance(content, str):
        text = "\n".join([content] * bool(content) + [_tool_call_text(c) for c in calls]) if calls else content
    elif parts:
        text = _parts_text(parts)
    else:
        text = "\n".join(_tool_call_text(c) for c in calls)
    calls += [p for p in parts if isinstance(p, dict) and p.get("type") in ("tool_call", "tool_use")]
    result = role == "tool" or any(
        isinstance(p, dict) and p.get("type") in ("tool_call_response", "tool_result") for p in parts
    )
    ids = frozenset(str(c["id"]) for c in calls if c.get("id"))
    return _Msg("tool" if result else role, text, ids, result)


def _reply(attrs: dict[str, Any], where: str) -> tuple[str | None, frozenset[str]]:
    """The recorded reply's text (otel_trace_utils.reconstruct_llm_output) and its tool calls' ids."""
    for key in OUTPUT_TEXT_KEYS:
        if isinstance(attrs.get(key), str):
            return attrs[key], frozenset()
    raw = attrs.get("gen_ai.output.messages")
    if raw is None:
        return None, frozenset()
    out = _json(raw, "gen_ai.output.messages", where)
    out = [out] if isinstance(out, dict) else out if isinstance(out, list) else []
    message = next((m for m in out if isinstance(m, dict) and m.get("role", "assistant") == "assistant"), None)
    if message is None:
        return None, frozenset()
    texts: list[str] = []
    content = message.get("content")
    if isinstance(content, str) and content:
        texts.append(content)
    items = message.get("parts") if isinstance(message.get("parts"), list) else content
    for p in items if isinstance(items, list) else ():
        if isinstance(p, dict) and p.get("type") == "text" and (p.get("text") or p.get("content")):
            texts.append(str(p.get("text") or p.get("content")))
    calls = [_call_of(tc) for tc in message.get("tool_calls") or () if isinstance(tc, dict)]
    calls += [p for p in message.get("parts") or () if isinstance(p, dict) and p.get("type") == "tool_call"]
    text = "\n".join(["\n".join(texts)] * bool(texts) + [_tool_call_text(c) for c in calls])
    ids = frozenset(str(c["id"]) for c in calls if c.get("id")) if all(c.get("id") for c in calls) else frozenset()
    return text, ids


def _call_of(tc: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool call (``{id, function: {name, arguments}}``) as a part (``{id, name, arguments}``)."""
    fn = tc.get("function")
    if isinstance(fn, dict):
        return {"type": "tool_call", "id": tc.get("id"), "name": fn.get("name"), "arguments": fn.get("arguments")}
    return {"type": "tool_call", **tc}


def _tool_call_text(call: dict[str, Any]) -> str:
    args = call.get("arguments") or call.get("input", "{}")
    if isinstance(args, dict):
        args = json.dumps(args, separators=(", ", ": "))
    return f"<|tool_call|>{call.get('name', 'unknown_tool')}<|tool_args|>{args}<|end|>"


def _parts_text(parts: list[Any]) -> str:
    texts: list[str] = []
    for p in parts:
        if isinstance(p, str):
            texts.append(p)
        elif not isinstance(p, dict):
            continue
        elif p.get("type") in ("tool_call", "tool_use"):
            texts.append(_tool_call_text(p))
        elif p.get("type") in ("tool_call_response", "tool_result"):
            result = p.get("content") or p.get("result") or p.get("response") or ""
            error = " [ERROR]" if p.get("is_error") else ""
            texts.append(
                f"<tool_result: {p.get('tool_use_id') or p.get('id', 'unknown')}{error}>\n{result}\n</tool_result>"
            )
        elif "text" in p or "content" in p:
            texts.append(str(p.get("text") if "text" in p else p.get("content")))
    return "\n".join(texts)


def _json(value: Any, key: str, where: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{where}: {key} is not JSON ({exc.msg})") from None


def _time(value: Any, key: str, where: str) -> float:
    if not isinstance(value, str):
        raise BadInput(f"{where}: {key} is {value!r}, not an ISO-8601 time")
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise BadInput(f"{where}: {key} {value!r} is not an ISO-8601 time") from None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


# --- one session ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Llm:
    span: _Span
    chat: _Chat
    start_ms: int  # from the session's first chat span, as inference-perf rounds them
    end_ms: int


def _session(sid: str, spans: list[_Span], origin: float | None, where: str) -> Program:
    seen: set[str] = set()
    kept: list[_Span] = []
    for s in sorted(spans, key=lambda s: s.id):  # inference-perf's filter_duplicate_spans
        if s.signature not in seen:
            seen.add(s.signature)
            kept.append(s)
    chats = [s for s in kept if s.chat is not None]
    if not chats:
        raise BadInput(f"{where}: session {sid!r} has no chat span with gen_ai.input.messages")
    t0 = min(s.start for s in chats)
    chats.sort(key=lambda s: (s.start, s.id))
    calls = [
        _Llm(s, s.chat, round((s.start - t0) * 1000), round((s.end - t0) * 1000)) for s in chats if s.chat is not None
    ]
    tools = sorted((round((s.start - t0) * 1000), round((s.end - t0) * 1000)) for s in kept if s.tool)
    ids = [c.span.id for c in calls]
    if len(set(ids)) != len(ids):
        raise BadInput(f"{where}: session {sid!r} has two chat spans with one span_id")
    preds = _predecessors(calls)
    ancestors: list[set[int]] = []
    for i in range(len(calls)):
        ancestors.append(set(preds[i]).union(*(ancestors[j] for j in preds[i])))
    sources: list[tuple[tuple[str, str, str], ...]] = []
    out: list[Call] = []
    for i, c in enumerate(calls):
        src = _sources(c, [calls[j] for j in range(i)], ancestors[i], sources)
        sources.append(src)
        prompt, uses = _segments(src, ancestors[i], sources, ids)
        parents: list[Edge] = []
        if preds[i]:
            last_end = max(calls[j].end_ms for j in preds[i])
            wait = min(MAX_WAIT_MS, max(0, c.start_ms - last_end))
            tool = min(wait, _covered(tools, last_end, c.start_ms))
            parents += [Edge(ids[j], "end", wait / 1000, tool / 1000) for j in sorted(preds[i])]
        parents += [Edge(ids[j]) for j in sorted(uses - set(preds[i]))]
        after_tool = c.chat.messages[-1].tool_result
        attrs = c.span.attrs
        out.append(
            Call(
                id=ids[i],
                prompt=prompt,
                max_tokens=_max_tokens(attrs, c.chat.reply),
                parents=tuple(parents),
                not_before_s=0.0 if parents else c.start_ms / 1000,
                role=role_of(parents, 0, after_tool),
                model=str(attrs.get("gen_ai.request.model") or attrs.get("gen_ai.response.model") or "") or None,
                tools=_tool_definitions(attrs),
                recorded=Recorded(
                    input_tokens=_usage(attrs, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
                    output_tokens=_usage(attrs, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
                    api_s=(c.end_ms - c.start_ms) / 1000,
                    output_text=c.chat.reply,
                ),
            )
        )
    return Program(sid, tuple(out), 0.0 if origin is None else t0 - origin, FORMAT)


def _predecessors(calls: list[_Llm]) -> list[dict[int, bool]]:
    """Each call's direct parents (index -> causal), as otel_trace_to_replay_graph.build_graph finds them."""
    preds: list[dict[int, bool]] = [{} for _ in calls]

    def causal_ancestors(k: int) -> set[int]:
        found: set[int] = set()
        stack = [j for j, causal in preds[k].items() if causal]
        while stack:
            j = stack.pop()
            if j not in found:
                found.add(j)
                stack += [a for a, causal in preds[j].items() if causal]
        return found

    for i in range(1, len(calls)):
        skip: set[int] = set()
        for j in range(i - 1, -1, -1):
            if j not in skip and _feeds(calls[j].chat, calls[i].chat):
                preds[i][j] = True
                skip |= causal_ancestors(j)
        temporal = next((j for j in range(i - 1, -1, -1) if calls[i].start_ms >= calls[j].end_ms), None)
        if temporal is not None and temporal not in preds[i]:
            preds[i][temporal] = False
    return preds


def _feeds(a: _Chat, b: _Chat) -> bool:
    """``b``'s input holds ``a``'s reply: an assistant message with its text (or holding it), or all
    its tool calls' ids (get_causal_dep's full match and tool-call-id match)."""
    if a.reply:
        if any(m.role == "assistant" and a.reply in m.text for m in b.messages):
            return True
    if a.reply_tool_ids:
        return a.reply_tool_ids <= b.tool_ids
    return False


def _is_reply(a: _Chat, m: _Msg) -> bool:
    """``m`` is ``a``'s reply: the same text, or all its tool calls (decompose_input's output match)."""
    if m.role == "assistant" and a.reply and m.text == a.reply:
        return True
    return bool(a.reply_tool_ids) and a.reply_tool_ids <= m.tool_ids


def _sources(
    c: _Llm, earlier: list[_Llm], ancestors: set[int], sources: list[tuple[tuple[str, str, str], ...]]
) -> tuple[tuple[str, str, str], ...]:
    """Each input message's source: ("message", role, text), or ("output", index, "") an ancestor's reply."""
    keys = c.chat.keys
    shared, whole, best = 0, False, -1
    latest = sorted(ancestors, reverse=True)
    # the longest shared run of leading messages: the longest ancestors first, then the latest; of
    # equal runs, one that is all of its ancestor's messages
    for j in sorted(latest, key=lambda j: len(earlier[j].chat.keys), reverse=True):
        other = earlier[j].chat.keys
        if len(other) < shared or (len(other) == shared and whole):
            break
        n = (
            len(other)
            if keys[: len(other)] == other
            else next((i for i, (a, b) in enumerate(zip(keys, other)) if a != b), min(len(keys), len(other)))
        )
        if (n, n == len(other)) > (shared, whole):
            shared, whole, best = n, n == len(other), j
    src = list(sources[best][:shared]) if best >= 0 else []
    for m in c.chat.messages[shared:]:
        k = next((k for k in latest if _is_reply(earlier[k].chat, m)), None)
        src.append(("output", str(k), "") if k is not None else ("message", m.role, m.text))
    return tuple(src)


def _segments(
    src: tuple[tuple[str, str, str], ...],
    ancestors: set[int],
    sources: list[tuple[tuple[str, str, str], ...]],
    ids: list[str],
) -> tuple[tuple[Segment, ...], set[int]]:
    """The sources as segments: the longest ancestor's prompt they start with, then each message."""
    head = max(
        (j for j in ancestors if src[: len(sources[j])] == sources[j]),
        key=lambda j: (len(sources[j]), j),
        default=None,
    )
    segments: list[Segment] = []
    uses: set[int] = set()
    rest = src
    if head is not None:
        segments.append(PromptOf(ids[head]))
        uses.add(head)
        rest = src[len(sources[head]) :]
    for kind, a, b in rest:
        if kind == "output":
            segments.append(Output(ids[int(a)]))
            uses.add(int(a))
        else:
            segments.append(Message(a, b))
    return tuple(segments), uses


def _covered(intervals: list[tuple[int, int]], lo: int, hi: int) -> int:
    """How much of [lo, hi] the intervals cover (tools side by side counted once)."""
    total, at = 0, lo
    for start, end in intervals:
        start, end = max(start, at), min(end, hi)
        if end > start:
            total += end - start
            at = end
    return total


def _max_tokens(attrs: dict[str, Any], reply: str | None) -> int:
    used = _usage(attrs, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
    if used:
        return used
    if reply:
        return max(1, len(reply) // CHARS_PER_TOKEN)
    cap = _usage(attrs, "gen_ai.request.max_tokens")
    return cap or DEFAULT_MAX_TOKENS


def _usage(attrs: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            try:
                return int(value)
            except ValueError:
                continue
    return None


def _tool_definitions(attrs: dict[str, Any]) -> tuple[dict[str, object], ...]:
    raw = attrs.get("gen_ai.tool.definitions")
    try:
        tools = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return ()  # as inference-perf: unreadable definitions are ignored
    return tuple(t for t in tools if isinstance(t, dict)) if isinstance(tools, list) else ()
