"""Agent programs' metrics (``--dataset programs``): per session its latency and the critical path
through its graph, split into where the time went; per point the sessions' distributions, the
calls by role and depth, and the schedule's lag. Pure functions of records (their ``program``
part, loadgen/programs.py).

- **A call's end** is its stream's end (``closed_s``: the reply complete as an agent sees it).
- **Session latency**: its last call's end minus the session's scheduled start (a session that
  starts late because the loop or a slot was busy counts the wait, as open-loop queue delay does).
- **Critical path**: from the call that ended last, back through the edge that allowed each call
  last (``program_after``: the parent whose anchor plus delay was latest) to a call no parent held
  back. Along it the parts add up to the session latency exactly: each call's model time (from
  sent to its end, or to the anchor its child waited on), the schedule's lag before it was sent,
  the recorded wait after its parent's anchor (a tool's run, ``program_tool_s``, and the rest:
  think time), and a root's own offset from the session's start (think).
- **A call's model time** splits by what is known of it: with server phases (spans joined,
  spans/phases.py) into dispatch (network + frontend), queue, prefill, delivery and decode; with
  llama.cpp's timings (``prompt_ms``) into queue (TTFT before its prefill: the wait and the wire)
  and prefill, then decode; without either into TTFT and decode.

Population: a point's measured sessions are its completed ones that started in the window; its
calls (by role, depth and lag) are the window population's (metrics.point's).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tokenbench.metrics.stats import distribution
from tokenbench.records import RequestRecord
from tokenbench.results import CallGroup, CriticalPath, ProgramCounts, ProgramStats

PARTS = ("dispatch", "queue", "prefill", "delivery", "ttft", "decode", "tool", "think", "lag")


class Phases(Protocol):
    """A request's server phases (spans.phases.RequestPhases), seconds; None: not timed."""

    def phase(self, name: str) -> float | None: ...


PhaseKey = tuple[int, int | None, int]  # (point, worker, id)


@dataclass
class Step:
    """A call on the critical path: its record, and until when its model time counts (its end,
    or the anchor its child on the path waited on)."""

    record: RequestRecord
    until_s: float


@dataclass
class SessionPath:
    session: str
    program: str
    start_s: float
    end_s: float | None
    calls: int
    ok: bool  # every call of it sent and ok
    path: list[Step] = field(default_factory=list)  # from the session's start to its last call
    parts: dict[str, float] = field(default_factory=dict)
    # its ok calls' prompt tokens (the server's, else the dataset's) and output tokens, and the
    # reuse its prompts imply (prefix tokens of the prompt tokens) and the server's cached share
    prompt_tokens: int = 0
    output_tokens: int = 0
    expected_reuse: float | None = None
    measured_reuse: float | None = None

    @property
    def latency_s(self) -> float | None:
        return None if self.end_s is None else self.end_s - self.start_s


def sessions(records: Iterable[RequestRecord], phases: Mapping[PhaseKey, Phases] | None = None) -> list[SessionPath]:
    """Every session among ``records`` (in order of its start), with its critical path when it completed."""
    by_session: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.program is not None and r.program.program_session is not None:
            by_session[r.program.program_session].append(r)
    out = [_session(sid, rs, phases or {}) for sid, rs in by_session.items()]
    return sorted(out, key=lambda s: (s.start_s, s.session))


def _session(sid: str, records: list[RequestRecord], phases: Mapping[PhaseKey, Phases]) -> SessionPath:
    first = records[0].program
    assert first is not None
    start = first.program_start_s if first.program_start_s is not None else min(r.scheduled_s for r in records)
    # every call of it sent and ok (a session a stop rule cut has fewer records than calls)
    expected = first.program_calls
    ok = all(r.ok for r in records) and (expected is None or len(records) >= expected)
    ended = [r for r in records if r.ok and r.closed_s is not None]
    s = SessionPath(sid, first.program_id or "", start, None, len(records), ok)
    _tokens(s, records)
    if not ok or not ended:
        return s
    last = max(ended, key=lambda r: r.closed_s or 0.0)
    s.end_s = last.closed_s
    by_call = {r.program.program_call: r for r in records if r.program is not None}
    parts = dict.fromkeys(PARTS, 0.0)
    c, until = last, last.closed_s
    assert until is not None
    while True:
        s.path.append(Step(c, until))
        _model(c, until, parts, phases.get((c.point, c.worker, c.id)))
        p = c.program
        assert p is not None and c.sent_s is not None
        ready = p.program_ready_s if p.program_ready_s is not None else c.scheduled_s
        parts["lag"] += c.sent_s - ready
        parent = by_call.get(p.program_after) if p.program_after is not None else None
        if parent is None:
            parts["think"] += ready - start  # a root's offset (or the session's own start)
            break
        at = anchor_s(parent, p.program_anchor or "end")
        wait = ready - at
        tool = min(p.program_tool_s or 0.0, wait)
        parts["tool"] += tool
        parts["think"] += wait - tool
        c, until = parent, at
    s.path.reverse()
    s.parts = parts
    return s


def _tokens(s: SessionPath, records: list[RequestRecord]) -> None:
    """The session's tokens and reuse, over its ok calls."""
    ok = [r for r in records if r.ok]
    prompts = [(r, n) for r in ok if (n := r.prompt_tokens if r.prompt_tokens is not None else r.dataset_prompt_tokens)]
    s.prompt_tokens = sum(n for _, n in prompts)
    s.output_tokens = sum(r.output_tokens or 0 for r in ok)
    prefix = sum(min(n, r.program.program_prefix_tokens or 0) for r, n in prompts if r.program is not None)
    s.expected_reuse = prefix / s.prompt_tokens if s.prompt_tokens else None
    served = [(r.cached_prompt_tokens, r.prompt_tokens or 0) for r in ok if r.cached_prompt_tokens is not None]
    total = sum(n for _, n in served)
    s.measured_reuse = sum(c or 0 for c, _ in served) / total if total else None


def anchor_s(r: RequestRecord, anchor: str) -> float:
    """When a sent call's ``anchor`` was (run clock): its start (sent), its first token (its end
    without one) or its end (the stream's: closed_s): what a child waiting on it counts from."""
    assert r.sent_s is not None and r.closed_s is not None
    if anchor == "start":
        return r.sent_s
    if anchor == "first_token":
        return r.chunk_times_s[0] if r.chunk_times_s else r.closed_s
    return r.closed_s


def _model(r: RequestRecord, until: float, parts: dict[str, float], phases: Phases | None) -> None:
    """The call's model time from sent to ``until``, into its parts (see the module's doc)."""
    assert r.sent_s is not None
    first = r.chunk_times_s[0] if r.chunk_times_s else until
    ttft = min(first, until) - r.sent_s
    parts["decode"] += max(0.0, until - first)
    if until < first:  # a child waited on this call's start: its TTFT unfinished, not split
        parts["ttft"] += ttft
        return
    split = _server_split(phases, ttft) if phases is not None else None
    if split is None:
        split = _timings_split(r, ttft)
    if split is None:
        parts["ttft"] += ttft
        return
    for name, value in split.items():
        parts[name] += value


def _server_split(phases: Phases, ttft: float) -> dict[str, float] | None:
    queue, prefill, delivery = phases.phase("queue"), phases.phase("prefill"), phases.phase("delivery")
    if queue is None or prefill is None:
        return None
    delivery = max(0.0, delivery or 0.0)
    dispatch = ttft - queue - prefill - delivery  # network and frontend: the rest of the client's TTFT
    return {"dispatch": dispatch, "queue": queue, "prefill": prefill, "delivery": delivery}


def _timings_split(r: RequestRecord, ttft: float) -> dict[str, float] | None:
    timings = r.server_timings or {}
    prompt_ms = timings.get("prompt_ms")
    if not isinstance(prompt_ms, int | float):
        return None
    prefill = min(ttft, max(0.0, prompt_ms / 1000.0))
    return {"queue": ttft - prefill, "prefill": prefill}


def program_stats(
    population: Sequence[RequestRecord],
    point: Sequence[RequestRecord],
    window: tuple[float, float],
    counts: ProgramCounts | None,
    phases: Mapping[PhaseKey, Phases] | None = None,
    limit_s: float | None = None,
) -> ProgramStats:
    """A point's programs: its measured sessions from ``point`` (every record of the point: a
    session's calls may fall outside the window), its calls from ``population``; ``limit_s``
    (``--slo session=``): the sessions' goodput, those within it."""
    start, end = window
    measured = [s for s in sessions(point, phases) if s.ok and s.end_s is not None and start <= s.start_s < end]
    latencies = [s.latency_s for s in measured if s.latency_s is not None]
    good = sum(1 for x in latencies if x <= limit_s) if limit_s is not None else None
    total = sum(latencies)
    sums = {k: sum(s.parts.get(k, 0.0) for s in measured) for k in PARTS}
    span = end - start
    calls = [r for r in population if r.program is not None]
    ok = [r for r in calls if r.ok]
    prompt = [(r, r.prompt_tokens if r.prompt_tokens is not None else r.dataset_prompt_tokens) for r in ok]
    prompt_total = sum(n for _, n in prompt if n)
    prefix = sum(min(n, r.program.program_prefix_tokens or 0) for r, n in prompt if n and r.program is not None)
    served = [(r.cached_prompt_tokens, r.prompt_tokens) for r in ok if r.cached_prompt_tokens is not None]
    served_prompt = sum(n or 0 for _, n in served)
    return ProgramStats(
        sessions=counts,
        measured_sessions=len(measured),
        session_s=distribution(latencies),
        sessions_per_s=len(measured) / span if span > 0 else None,
        good_sessions_per_s=good / span if good is not None and span > 0 else None,
        good_sessions_fraction=good / len(measured) if good is not None and measured else None,
        calls_per_session=distribution([float(s.calls) for s in measured]),
        schedule_lag_s=distribution(_lags(c for c in calls if c.sent_s is not None)),
        critical_path=CriticalPath(
            calls=distribution([float(len(s.path)) for s in measured]),
            mean_s={k: v / len(measured) for k, v in sums.items()} if measured else {},
            share={k: (v / total if total > 0 else None) for k, v in sums.items()} if measured else {},
        ),
        by_role=_groups(calls, lambda r: r.program.program_role if r.program else None),
        by_depth=_groups(calls, lambda r: str(r.program.program_depth) if r.program else None),
        expected_reuse=prefix / prompt_total if prompt_total else None,
        measured_reuse=sum(c or 0 for c, _ in served) / served_prompt if served_prompt else None,
    )


def _lags(records: Iterable[RequestRecord]) -> list[float]:
    """Each sent call's lag: sent - when its parents allowed it (its ``scheduled_s``)."""
    return [r.sent_s - r.scheduled_s for r in records if r.sent_s is not None]


def _groups(calls: Sequence[RequestRecord], key: Callable[[RequestRecord], str | None]) -> dict[str, CallGroup]:
    grouped: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in calls:
        k = key(r)
        if k is not None:
            grouped[k].append(r)
    out = {}
    for k in sorted(grouped):
        rs = grouped[k]
        ok = [r for r in rs if r.ok]
        out[k] = CallGroup(
            count=len(rs),
            ok=len(ok),
            ttft_s=distribution([t for t in (r.ttft_s for r in ok) if t is not None]),
            e2e_s=distribution([t for t in (r.e2e_s for r in ok) if t is not None]),
            schedule_lag_s=distribution(_lags(rs)),
        )
    return out
