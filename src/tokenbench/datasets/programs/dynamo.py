"""Dynamo's Agentic Mooncake rows (DynoSim ``--trace-format agentic_mooncake``): Mooncake request
rows (token counts and hash blocks, no text) with request ids and the dependencies between them.
Two shapes, told apart by the first line:

- **Rows** (what ``request_trace_to_mooncake --agentic`` writes): ``{request_id, session_id,
  input_length, output_length, hash_ids, timestamp (ms), wait_for: [request ids], delay (ms),
  tool_wait_ms, branches, prefix_reset}``. Read as ``AgenticMooncakeRow`` documents it in
  ``lib/data-gen`` and ``docs/dynosim/trace-formats.md`` (ai-dynamo/dynamo): a row waits on the
  completion of every ``wait_for`` request, then ``delay + tool_wait_ms``; a row without
  ``wait_for`` is sent at its ``timestamp``; ``branches`` and ``prefix_reset`` are annotations
  that schedule nothing. ``session_id`` is a trajectory (the converter, ``agent_trace_to_mooncake``
  in the ``dynamo-bench`` crate, gives a sub-agent its own, and its first row waits on its
  parent's request), so one program holds every session its rows' ``wait_for`` reach: named
  after its first root row's session, started at that row's ``timestamp`` (seconds from the
  file's first root row), its roots ``not_before`` their own timestamps from there. Each edge's
  delay is ``delay + tool_wait_ms`` and its tool time ``tool_wait_ms``; a row after tool time
  follows a tool. Block size: Mooncake's 512 tokens a hash id (the converter prints the one it
  used; rows carry none), the ids shared file-wide (one rolling mapper for the whole capture).
- **Versioned** (``{"schema": "dynamo.agentic_mooncake", "version": 2, "block_size", "hash_id_scope":
  "local", "source"}``, then rows): ``{request_id, play_id, session_id, model, input_length,
  output_length, hash_ids, not_before_ms, recorded_api_time_ms?, dependencies: [{request_id,
  trigger: dispatch | completion, delay_ms, relation: sequence | spawn | join | replay_barrier}]}``
  (``dynamo_mocker::loadgen`` types; the Weka import there writes them). One program a ``play_id``
  (a recorded session; ordered by ``source_play_ordinal`` where every row has one); each
  dependency an edge on its request's start (``dispatch``) or end (``completion``) after
  ``delay_ms``, whatever its relation; ``not_before_ms`` the row's earliest send from the play's
  start, as its name says (the Weka import writes each row's recorded send time there). Hash ids
  are local to a play. Plays carry no start on a common clock: each starts at 0.

Both: a call is a row (``id`` its ``request_id``), its prompt ``input_length`` tokens of its
``hash_ids`` (absent: the ids' whole blocks), ``max_tokens`` its ``output_length`` (0, a
prefill-only row, asks for 1); calls in the order their dependencies allow, else the file's. A
session whose first row waits on another session's row is one level deeper than that session: its
calls are a sub-agent's.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenbench.datasets.programs.model import Anchor, Blocks, Call, Edge, Program, Recorded, role_of
from tokenbench.errors import BadInput

FORMAT = "dynamo"
SCHEMA = "dynamo.agentic_mooncake"
VERSION = 2
MOONCAKE_BLOCK_SIZE = 512  # tokens a hash id, where the file does not say
TRIGGERS: dict[str, Anchor] = {"dispatch": "start", "completion": "end"}
RELATIONS = ("sequence", "spawn", "join", "replay_barrier")


def looks_like(obj: object) -> bool:
    """The versioned header, or a row with a request id and Mooncake's token fields."""
    if not isinstance(obj, dict):
        return False
    if obj.get("schema") == SCHEMA:
        return True
    return isinstance(obj.get("request_id"), str) and any(
        k in obj for k in ("hash_ids", "input_length", "input_tokens")
    )


@dataclass
class _Row:
    line: int
    id: str
    session: str
    group: str  # the program it belongs to, once known
    tokens: int
    out: int
    hash_ids: tuple[int, ...]
    deps: list[tuple[str, Anchor, float, float]]  # (request id, anchor, delay s, tool s)
    not_before_s: float
    model: str | None
    api_s: float | None
    after_tool: bool
    ordinal: int | None = None


def read(path: Path) -> list[Program]:
    rows: list[tuple[int, dict[str, Any]]] = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BadInput(f"{path}:{n}: not JSON ({exc.msg})") from None
            if not isinstance(obj, dict):
                raise BadInput(f"{path}:{n}: not an object")
            rows.append((n, obj))
    if not rows:
        raise BadInput(f"{path}: no row in it")
    if rows[0][1].get("schema") == SCHEMA:
        return _versioned(path, rows[0], rows[1:])
    return _plain(path, rows)


def _num(obj: dict[str, Any], keys: tuple[str, ...], where: str, default: float | None = None) -> float:
    for k in keys:
        if obj.get(k) is not None:
            v = obj[k]
            if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
                raise BadInput(f"{where}: {k} {v!r} (needs a number >= 0)")
            return float(v)
    if default is None:
        raise BadInput(f"{where}: no {keys[0]}")
    return default


def _common(obj: dict[str, Any], where: str, block: int) -> tuple[str, int, int, tuple[int, ...]]:
    """(request id, prompt tokens, output tokens, hash ids) of a row."""
    rid = obj.get("request_id")
    if not isinstance(rid, str) or not rid:
        raise BadInput(f"{where}: no request_id")
    ids = obj.get("hash_ids")
    if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
        raise BadInput(f"{where}: hash_ids must be a list of integers")
    tokens = int(_num(obj, ("input_length", "input_tokens"), where, float(len(ids) * block)))
    out = int(_num(obj, ("output_length", "output_tokens"), where))
    return rid, tokens, out, tuple(ids)


def _plain(path: Path, raw: list[tuple[int, dict[str, Any]]]) -> list[Program]:
    rows: list[_Row] = []
    for n, obj in raw:
        where = f"{path}:{n}"
        rid, tokens, out, ids = _common(obj, where, MOONCAKE_BLOCK_SIZE)
        wait_for = obj.get("wait_for") or []
        if not isinstance(wait_for, list) or not all(isinstance(w, str) for w in wait_for):
            raise BadInput(f"{where}: wait_for must be a list of request ids")
        delay_s = _num(obj, ("delay", "delay_ms"), where, 0.0) / 1000.0
        tool_s = _num(obj, ("tool_wait_ms",), where, 0.0) / 1000.0
        at_s = 0.0
        if not wait_for:
            if obj.get("timestamp") is None and obj.get("created_time") is None:
                raise BadInput(f"{where}: a row without wait_for needs its timestamp")
            at_s = _num(obj, ("timestamp", "created_time"), where) / 1000.0
        session = obj.get("session_id")
        rows.append(
            _Row(
                line=n,
                id=rid,
                session=session if isinstance(session, str) and session else rid,
                group="",
                tokens=tokens,
                out=out,
                hash_ids=ids,
                deps=[(w, "end", delay_s + tool_s, tool_s) for w in dict.fromkeys(wait_for)],
                not_before_s=at_s,
                model=None,
                api_s=None,
                after_tool=tool_s > 0,
            )
        )
    by_id = _index(rows, path)
    # one program a set of sessions joined by their dependencies
    top: dict[str, str] = {}

    def find(s: str) -> str:
        while top.setdefault(s, s) != s:
            top[s] = top[top[s]]
            s = top[s]
        return s

    for r in rows:
        find(r.session)
        for dep, *_ in r.deps:
            a, b = find(r.session), find(by_id[dep].session)
            if a != b:
                top[b] = a
    roots = [r for r in rows if not r.deps]
    if not roots:
        raise BadInput(f"{path}: every row waits on another (none is sent at its timestamp)")
    t0 = min(r.not_before_s for r in roots)
    first: dict[str, _Row] = {}
    for r in sorted(roots, key=lambda r: (r.not_before_s, r.line)):
        first.setdefault(find(r.session), r)
    programs = []
    for key, lead in sorted(first.items(), key=lambda kv: (kv[1].not_before_s, kv[1].line)):
        members = [r for r in rows if find(r.session) == key]
        start = lead.not_before_s
        for r in members:
            if not r.deps:
                r.not_before_s -= start
        programs.append(_program(path, lead.session, members, by_id, start - t0, MOONCAKE_BLOCK_SIZE, path.name))
    return programs


def _versioned(path: Path, header: tuple[int, dict[str, Any]], raw: list[tuple[int, dict[str, Any]]]) -> list[Program]:
    n, head = header
    where = f"{path}:{n}"
    if head.get("version") != VERSION:
        raise BadInput(f"{where}: {SCHEMA} version {head.get('version')!r} (reads version {VERSION})")
    block = head.get("block_size")
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise BadInput(f"{where}: block_size {block!r} (needs an integer >= 1)")
    if head.get("hash_id_scope", "local") != "local":
        raise BadInput(f"{where}: hash_id_scope {head.get('hash_id_scope')!r} (local)")
    rows: list[_Row] = []
    for n, obj in raw:
        where = f"{path}:{n}"
        if obj.get("schema") is not None:
            raise BadInput(f"{where}: a second header")
        rid, tokens, out, ids = _common(obj, where, block)
        play, session = obj.get("play_id"), obj.get("session_id")
        if not isinstance(play, str) or not play or not isinstance(session, str) or not session:
            raise BadInput(f"{where}: needs a play_id and a session_id")
        deps = []
        for d in obj.get("dependencies") or []:
            if not isinstance(d, dict) or not isinstance(d.get("request_id"), str):
                raise BadInput(f"{where}: a dependency needs a request_id")
            anchor = TRIGGERS.get(d.get("trigger", ""))
            if anchor is None:
                raise BadInput(f"{where}: trigger {d.get('trigger')!r} (one of {', '.join(TRIGGERS)})")
            if d.get("relation", "sequence") not in RELATIONS:
                raise BadInput(f"{where}: relation {d.get('relation')!r} (one of {', '.join(RELATIONS)})")
            deps.append((d["request_id"], anchor, _num(d, ("delay_ms",), where, 0.0) / 1000.0, 0.0))
        api = obj.get("recorded_api_time_ms")
        ordinal = obj.get("source_play_ordinal")
        model = obj.get("model")
        rows.append(
            _Row(
                line=n,
                id=rid,
                session=session,
                group=play,
                tokens=tokens,
                out=out,
                hash_ids=ids,
                deps=deps,
                not_before_s=_num(obj, ("not_before_ms",), where) / 1000.0,
                model=model if isinstance(model, str) and model else None,
                api_s=_num(obj, ("recorded_api_time_ms",), where) / 1000.0 if api is not None else None,
                after_tool=False,
                ordinal=ordinal if isinstance(ordinal, int) and not isinstance(ordinal, bool) else None,
            )
        )
    if not rows:
        raise BadInput(f"{path}: a header and no row")
    by_id = _index(rows, path)
    plays: dict[str, list[_Row]] = {}
    for r in rows:
        plays.setdefault(r.group, []).append(r)
        for dep, *_ in r.deps:
            if by_id[dep].group != r.group:
                raise BadInput(f"{path}:{r.line}: {r.id!r} waits on {dep!r} of another play")
    order = list(plays)
    if all(r.ordinal is not None for r in rows):
        order.sort(key=lambda p: plays[p][0].ordinal or 0)
    return [_program(path, p, plays[p], by_id, 0.0, block, p) for p in order]


def _index(rows: list[_Row], path: Path) -> dict[str, _Row]:
    by_id: dict[str, _Row] = {}
    for r in rows:
        if r.id in by_id:
            raise BadInput(f"{path}:{r.line}: request_id {r.id!r} already on line {by_id[r.id].line}")
        by_id[r.id] = r
    for r in rows:
        for dep, *_ in r.deps:
            if dep not in by_id:
                raise BadInput(f"{path}:{r.line}: {r.id!r} waits on {dep!r}, not a request in the file")
    return by_id


def _program(
    path: Path, pid: str, rows: list[_Row], by_id: dict[str, _Row], start_s: float, block: int, scope: str
) -> Program:
    """The rows in an order their dependencies allow (the file's where free), as calls."""
    index = {r.id: i for i, r in enumerate(rows)}
    after: dict[str, list[str]] = {r.id: [] for r in rows}
    waiting = {r.id: len({d for d, *_ in r.deps}) for r in rows}
    for r in rows:
        for dep in {d for d, *_ in r.deps}:
            after[dep].append(r.id)
    ready = [index[r.id] for r in rows if waiting[r.id] == 0]
    heapq.heapify(ready)
    depth: dict[str, int] = {}  # session -> sub-agent depth, from its first row's parents
    calls: list[Call] = []
    while ready:
        r = rows[heapq.heappop(ready)]
        if r.session not in depth:
            others = [by_id[d].session for d, *_ in r.deps if by_id[d].session != r.session]
            depth[r.session] = depth[others[0]] + 1 if others else 0
        edges = tuple(Edge(d, anchor, delay, tool) for d, anchor, delay, tool in r.deps)
        calls.append(
            Call(
                id=r.id,
                prompt=(Blocks(r.hash_ids, r.tokens, block, scope),),
                max_tokens=max(1, r.out),
                parents=edges,
                not_before_s=r.not_before_s,
                role=role_of(edges, depth[r.session], r.after_tool),
                depth=depth[r.session],
                model=r.model,
                recorded=Recorded(input_tokens=r.tokens, output_tokens=r.out, api_s=r.api_s),
            )
        )
        for t in after[r.id]:
            waiting[t] -= 1
            if waiting[t] == 0:
                heapq.heappush(ready, index[t])
    if len(calls) < len(rows):
        stuck = [r for r in rows if waiting[r.id] > 0]
        raise BadInput(f"{path}:{stuck[0].line}: {stuck[0].id!r} waits on a cycle of requests")
    return Program(pid, tuple(calls), start_s, FORMAT)
