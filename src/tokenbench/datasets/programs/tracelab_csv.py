"""TraceLab's replay CSV (uw-syfi/TraceLab ``replay/examples/*.csv``, and what its exporter
``artifacts/trace_facts/csv_export/convert.py`` writes from a round trace): one round a row, read
as TraceLab's replay runner reads it (replay/README.md, replay/src/trace.rs, session.rs, tokens.rs).

Columns, by name in any order: ``session_id`` (or the exporter's ``id``), ``arrival_time`` (the
session's start, ms; optional, 0 without it), ``round_idx``, ``prefix_len`` (tokens of the previous
round's context the prompt starts with), ``input_len`` (new tokens after them), ``output_len`` and
``tool_wait_after_ms`` (the wait after the round before the session's next: the exporter writes its
tools' summed wall latency, nothing of a person's time).

- **Sessions.** Rows grouped by session (in the order first seen), ordered by ``round_idx``. The
  runner starts a session at its first round's ``arrival_time`` after the run's start: ``start_s``
  is that less the file's earliest, in seconds.
- **Chain.** Each round waits on the end of the round before it, with that round's
  ``tool_wait_after_ms`` as its delay, all of it tool time (``tool_s``; a wait of 0 or less is none,
  as the runner sleeps only on a positive one). A round after a wait follows a tool (``after_tool``),
  one without is a ``follow_up``.
- **Prompts.** As the runner builds them (tracelab.RoundPrompts): the first ``prefix_len`` tokens
  of the previous round's context (its prompt, then its whole reply), new tokens for any the context
  lacks, then ``input_len`` new tokens; a first round is ``prefix_len + input_len`` new tokens. Where
  ``prefix_len`` is the previous prompt and reply exactly (the examples ``multi_session_*``), that is
  ``PromptOf`` the previous round, its ``Output``, new blocks; where it stops short of them
  (``session_workload_example``: 3 tokens short, a recorded cache hit) the prompt is that many of the
  earlier blocks, as the runner sends it. Blocks are numbered within the session, scope
  ``<file name>:<session>`` (the examples' sessions are 0, 1, 2 in every file).
- ``max_tokens`` is ``output_len`` (the runner's ``max_tokens``).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from tokenbench.datasets.programs.model import Call, Edge, Program, Recorded, role_of
from tokenbench.datasets.programs.tracelab import RoundPrompts
from tokenbench.errors import BadInput

FORMAT = "tracelab-csv"
COLUMNS = ("round_idx", "prefix_len", "input_len", "output_len", "tool_wait_after_ms")


def looks_like(obj: object) -> bool:
    if not isinstance(obj, str):
        return False
    names = {c.strip() for c in obj.split(",")}
    return names.issuperset(COLUMNS) and bool(names & {"session_id", "id"})


@dataclass(frozen=True, slots=True)
class _Row:
    line: int
    round: int
    arrival_ms: float
    prefix: int
    input: int
    output: int
    wait_ms: float


def read(path: Path) -> list[Program]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = csv.DictReader(f)
        header = [c.strip() for c in rows.fieldnames or ()]
        rows.fieldnames = header
        session_column = "session_id" if "session_id" in header else "id"
        for column in (session_column, *COLUMNS):
            if column not in header:
                raise BadInput(f"{path}: no {column} column (a TraceLab replay CSV has {', '.join(COLUMNS)})")
        sessions: dict[str, list[_Row]] = {}
        for row in rows:
            where = f"{path}:{rows.line_num}"
            sid = (row.get(session_column) or "").strip()
            if not sid:
                raise BadInput(f"{where}: no {session_column}")
            sessions.setdefault(sid, []).append(
                _Row(
                    line=rows.line_num,
                    round=_int(row, "round_idx", where),
                    arrival_ms=_float(row, "arrival_time", where, 0.0),
                    prefix=_int(row, "prefix_len", where),
                    input=_int(row, "input_len", where),
                    output=_int(row, "output_len", where),
                    wait_ms=_float(row, "tool_wait_after_ms", where),
                )
            )
    if not sessions:
        return []
    starts = {sid: min(rounds, key=lambda r: (r.round, r.line)).arrival_ms for sid, rounds in sessions.items()}
    origin = min(starts.values())
    return [
        _session(
            sid, f"{path.name}:{sid}", sorted(rounds, key=lambda r: (r.round, r.line)), (starts[sid] - origin) / 1e3
        )
        for sid, rounds in sessions.items()
    ]


def _session(sid: str, scope: str, rows: list[_Row], start_s: float) -> Program:
    prompts = RoundPrompts(scope)
    calls: list[Call] = []
    for i, r in enumerate(rows):
        cid = str(i)
        parents: list[Edge] = []
        after_tool = False
        if i == 0:
            prompt, _ = prompts.build(cid, None, r.prefix, r.input, r.output, "user")
        else:
            pid = str(i - 1)
            wait = max(0.0, rows[i - 1].wait_ms) / 1e3
            after_tool = wait > 0
            prompt, uses = prompts.build(cid, pid, r.prefix, r.input, r.output, "tool" if after_tool else "user")
            parents.append(Edge(pid, "end", wait, wait))
            parents += [Edge(u) for u in sorted(set(uses) - {pid}, key=int)]
        calls.append(
            Call(
                id=cid,
                prompt=prompt,
                max_tokens=max(1, r.output),
                parents=tuple(parents),
                role=role_of(parents, 0, after_tool),
                recorded=Recorded(input_tokens=r.prefix + r.input, output_tokens=r.output),
            )
        )
    return Program(sid, tuple(calls), start_s, FORMAT)


def _int(row: dict[str, str | None], column: str, where: str) -> int:
    text = (row.get(column) or "").strip()
    if not text:
        raise BadInput(f"{where}: no {column}")
    if not text.isdigit():
        raise BadInput(f"{where}: {column} {text!r} is not a count (a whole number, 0 or more)")
    return int(text)


def _float(row: dict[str, str | None], column: str, where: str, default: float | None = None) -> float:
    text = (row.get(column) or "").strip()
    if not text:
        if default is None:
            raise BadInput(f"{where}: no {column}")
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise BadInput(f"{where}: {column} {text!r} is not a number")
    return value
