"""Weka's kv-cache-tester agent traces (callanjfox/kv-cache-tester ``traces/trace_NNNN.json``: one
anonymised Claude Code session a file; AIPerf's and Dynamo's Weka fixtures, one a file or a line).

A session is ``{"id", "block_size", "hash_id_scope", "requests": [...]}``; a request is a call
(``type`` "n" or "s": ``t`` seconds from the session's start, ``in``/``out`` tokens, ``hash_ids``
blocks of ``block_size`` tokens, ``api_time`` seconds on the recorded server, ``input_types``,
``stop``) or a sub-agent (``type`` "subagent": ``t``, ``duration_ms``, ``status``, its own
``requests``, nested). Read as the data say, not as one reader of it assumed:

- **Chain.** Each call in a list waits on the call before it in the same list: on its end, with
  the delay ``t - (t_prev + api_time_prev)`` (the recorded think time: a tool's run when the call's
  ``input_types`` holds ``tool_result``, a person's otherwise); on its start, with ``t - t_prev``,
  when it was sent before that call ended.
- **Sub-agents.** A sub-agent's first call waits on the last call of the enclosing list sent at
  or before the marker's ``t`` (its end, or its start when the sub-agent began while it ran, as
  in AIPerf's start-anchor fixture); none: a root at its own time. Inner times count from the
  marker in the real corpus (the first inner ``t`` is 0.0 in every sub-agent there) and from the
  session in AIPerf's fixtures: taken as relative when the first inner ``t`` is below the marker's.
- **Joins.** The enclosing list's next call waits on the sub-agent's last call only when the
  sub-agent completed before it was sent (``t + duration_ms`` <= the next call's ``t`` + 1 s: top-
  level times are whole seconds). In trace_0277 and trace_0291 the parent goes on while a
  sub-agent still runs; an ``async_launched`` sub-agent is never joined.
- **Prompts.** A call sharing its leading blocks with its chain parent's prompt is that prompt
  (``PromptOf``), the parent's live reply (``Output``), then its new tokens (``in - in_prev -
  out_prev``, at least 0) as blocks of its ids past the shared ones; any other call is its own
  blocks. ``max_tokens`` is ``out``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenbench.datasets.programs.model import Blocks, Call, Edge, Output, Program, PromptOf, Recorded, Segment, role_of
from tokenbench.errors import BadInput

FORMAT = "weka"
JOIN_SLACK_S = 1.0  # top-level ``t`` is whole seconds


def looks_like(obj: object) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("requests"), list) and "block_size" in obj


def read(path: Path) -> list[Program]:
    """One session a file (a JSON object), or one a line (JSONL, as Dynamo's fixture)."""
    text = path.read_text(encoding="utf-8")
    try:
        objs = [json.loads(text)]
    except json.JSONDecodeError:
        objs = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    objs.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise BadInput(f"{path}:{n}: not JSON ({exc.msg})") from None
    return [session(obj, f"{path}" if len(objs) == 1 else f"{path}:{i + 1}") for i, obj in enumerate(objs)]


@dataclass
class _Sent:
    """A call as the reader placed it: its id, absolute ``t``, end (t + api_time), blocks and tokens."""

    id: str
    t: float
    end: float
    hash_ids: tuple[int, ...]
    tokens: int
    out: int


def session(obj: Any, where: str) -> Program:
    if not looks_like(obj):
        raise BadInput(f"{where}: not a Weka trace session (needs an object with requests and block_size)")
    sid = str(obj.get("id") or where)
    block = int(obj["block_size"])
    scope = sid if obj.get("hash_id_scope", "local") == "local" else ""
    calls: list[Call] = []
    _chain(obj["requests"], 0.0, None, 0, block, scope, calls, where)
    return Program(sid, tuple(calls), format=FORMAT)


def _chain(
    requests: list[Any],
    offset: float,
    spawner: _Sent | None,
    depth: int,
    block: int,
    scope: str,
    calls: list[Call],
    where: str,
) -> _Sent | None:
    """Read one list of requests (the session's, or a sub-agent's at ``offset``): its calls into
    ``calls``; the last one (what a join waits on)."""
    prev: _Sent | None = None
    joined: list[_Late] = []  # sub-agents' last calls the next call of this list waits on
    for i, r in enumerate(requests):
        if not isinstance(r, dict):
            raise BadInput(f"{where}: request {i} is not an object")
        kind = r.get("type")
        t = offset + float(r.get("t", 0.0))
        if kind == "subagent":
            inner = r.get("requests") or []
            first_t = float(inner[0].get("t", 0.0)) if inner and isinstance(inner[0], dict) else 0.0
            base = t if first_t < float(r.get("t", 0.0)) else offset  # relative to the marker, or absolute
            opener = prev if prev is not None else spawner
            last = _chain(inner, base, opener, depth + 1, block, scope, calls, where)
            done = t + float(r.get("duration_ms", 0.0)) / 1000.0
            if last is not None and r.get("status", "completed") == "completed":
                joined.append(_Late(last, done))  # decided at the next call: did it wait?
            continue
        if kind not in ("n", "s", None):
            raise BadInput(f"{where}: request {i} has type {kind!r} (n, s or subagent)")
        cid = f"{depth}.{len(calls)}"
        hash_ids = tuple(int(h) for h in r.get("hash_ids") or ())
        tokens, out, api = int(r.get("in", 0)), max(1, int(r.get("out", 1))), float(r.get("api_time", 0.0))
        parents: list[Edge] = []
        prompt: list[Segment]
        after_tool = "tool_result" in (r.get("input_types") or ())
        parent = prev if prev is not None else spawner
        if parent is not None:
            parents.append(_edge(parent, t, after_tool))
        for late in joined:
            if late.done <= t + JOIN_SLACK_S:
                parents.append(_edge(late.last, max(t, late.last.end), False))
        joined = []
        shared = _shared(prev.hash_ids, hash_ids) if prev is not None else 0
        if prev is not None and shared > 0 and tokens >= prev.tokens:
            new = max(0, tokens - prev.tokens - prev.out)
            prompt = [PromptOf(prev.id), Output(prev.id)]
            if new:
                prompt.append(Blocks(hash_ids[shared:] or hash_ids[-1:], new, block, scope))
        else:
            prompt = [Blocks(hash_ids, tokens, block, scope)]
        depth_role = role_of(parents, depth, after_tool)
        calls.append(
            Call(
                id=cid,
                prompt=tuple(prompt),
                max_tokens=out,
                parents=tuple(parents),
                not_before_s=t if not parents else 0.0,
                role=depth_role,
                depth=depth,
                model=r.get("model"),
                recorded=Recorded(input_tokens=tokens, output_tokens=out, api_s=api),
            )
        )
        prev = _Sent(cid, t, t + api, hash_ids, tokens, out)
    return prev


@dataclass
class _Late:
    last: _Sent
    done: float


def _edge(parent: _Sent, t: float, after_tool: bool) -> Edge:
    """Wait on the parent's end when it ended by ``t``, else on its start."""
    if parent.end <= t:
        delay = t - parent.end
        return Edge(parent.id, "end", delay, delay if after_tool else 0.0)
    return Edge(parent.id, "start", max(0.0, t - parent.t))


def _shared(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
