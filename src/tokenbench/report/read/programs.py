"""An agent-programs run (``--dataset programs``) -> what the report shows of its sessions: each
point's ``programs`` as results.json has it, and from records.jsonl each point's slowest
completed sessions and the slowest one call by call. The sessions and their critical paths are
metrics.programs.sessions over the point's records, with each call's server phases where spans
joined (spans.phases, as derive.py joins them): the results' own definitions, never restated."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tokenbench.metrics.programs import PhaseKey, Phases, SessionPath, anchor_s, sessions
from tokenbench.records import RequestRecord
from tokenbench.report.read.data import CallSpan, ProgramRow, SessionRow, SessionTimeline
from tokenbench.results import PointResult, RunResults
from tokenbench.results.layout import RECORDS, SPANS
from tokenbench.rundir import RecordSlice, point_ranges
from tokenbench.spans.phases import GRACE_S, SpanIndex, joined_phases

SLOWEST_SESSIONS = 10  # the report's table of a point's slowest sessions
TIMELINE_CALLS = 200  # a session's timeline draws its first this many calls (by when they were sent)


def point_labels(results: RunResults) -> dict[int, str]:
    """Each point's label, with its index where a run has two points at one load (its trials)."""
    labels = [p.label for p in results.points]
    return {p.index: p.label if labels.count(p.label) == 1 else f"{p.label} · point {p.index}" for p in results.points}


def program_rows(results: RunResults, config: str) -> list[ProgramRow]:
    """The run's programs points (none for another dataset)."""
    labels = point_labels(results)
    return [ProgramRow(config, labels[p.index], p.programs) for p in results.points if p.programs is not None]


def session_rows(
    path: Path, results: RunResults, config: str, n: int = SLOWEST_SESSIONS
) -> tuple[list[SessionRow], list[SessionTimeline]]:
    """Each programs point's ``n`` slowest completed sessions (slowest first), and the slowest
    one's timeline; none without records.jsonl. A point's records are read one point at a time."""
    records_file = path / RECORDS
    points = [p for p in results.points if p.programs is not None]
    if not points or not records_file.is_file():
        return [], []
    spans = None
    if results.clock is not None and (path / SPANS).is_file():
        spans = SpanIndex.read(path / SPANS, float(results.clock.origin_unix_s))
    ranges = point_ranges(records_file)
    labels = point_labels(results)
    rows: list[SessionRow] = []
    timelines: list[SessionTimeline] = []
    for p in points:
        records = list(RecordSlice(records_file, ranges.get(p.index, [])))
        phases: Mapping[PhaseKey, Phases] | None = None
        if spans is not None and results.clock is not None:
            phases, _ = joined_phases(records, spans, float(results.clock.origin_unix_s), float(p.span.end_s) + GRACE_S)
        slowest = slowest_sessions(sessions(records, phases))[:n]
        rows += [_session_row(config, labels[p.index], s, p) for s in slowest]
        if slowest:
            timelines.append(timeline(config, labels[p.index], slowest[0], records))
    return rows, timelines


def slowest_sessions(found: Sequence[SessionPath]) -> list[SessionPath]:
    """The completed sessions (every call sent and ok), slowest first."""
    done = [s for s in found if s.ok and s.latency_s is not None]
    return sorted(done, key=lambda s: (-(s.latency_s or 0.0), s.start_s, s.session))


def _measured(s: SessionPath, p: PointResult) -> bool:
    return float(p.window.start_s) <= s.start_s < float(p.window.end_s)


def _session_row(config: str, label: str, s: SessionPath, p: PointResult) -> SessionRow:
    assert s.latency_s is not None
    return SessionRow(
        config,
        label,
        s.session,
        s.program,
        s.latency_s,
        s.calls,
        len(s.path),
        dict(s.parts),
        _measured(s, p),
        s.prompt_tokens,
        s.output_tokens,
        s.expected_reuse,
        s.measured_reuse,
    )


def timeline(config: str, label: str, s: SessionPath, records: Sequence[RequestRecord]) -> SessionTimeline:
    """The session's calls in the order they were sent: each one's wait (from the anchor of the
    parent that allowed it last, as metrics.programs counts it; a root's from the session's start),
    its lag (ready -> sent) and its model time (sent -> its stream's end); its place on the
    critical path."""
    mine = [r for r in records if r.program is not None and r.program.program_session == s.session]
    by_call = {r.program.program_call: r for r in mine if r.program is not None}
    on_path = {step.record.program.program_call for step in s.path if step.record.program is not None}
    calls = []
    for r in sorted(mine, key=lambda r: (r.sent_s or 0.0, r.id)):
        p = r.program
        assert p is not None and r.sent_s is not None and r.closed_s is not None  # a completed session's
        ready = p.program_ready_s if p.program_ready_s is not None else r.scheduled_s
        parent = by_call.get(p.program_after) if p.program_after is not None else None
        waited_from = anchor_s(parent, p.program_anchor or "end") if parent is not None else s.start_s
        calls.append(
            CallSpan(
                call=p.program_call or "?",
                role=p.program_role,
                depth=p.program_depth,
                after=p.program_after,
                anchor=p.program_anchor,
                waited_from_s=waited_from,
                ready_s=ready,
                sent_s=r.sent_s,
                closed_s=r.closed_s,
                on_path=p.program_call in on_path,
            )
        )
    assert s.latency_s is not None
    kept = calls[:TIMELINE_CALLS]
    return SessionTimeline(
        config, label, s.session, s.program, s.start_s, s.latency_s, tuple(kept), len(calls) - len(kept)
    )
