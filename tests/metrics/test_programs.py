"""Agent programs' metrics from hand-made records whose every time is known: the critical path
goes back through the edge that allowed each call last, its parts add up to the session latency,
a call's model time splits by what the server said of it (llama.cpp's prompt_ms, joined spans),
and a child that waited on its parent's start counts none of the parent's model time."""

from dataclasses import dataclass, replace

import pytest

from tokenbench.metrics.programs import program_stats, sessions
from tokenbench.records import Outcome, ProgramCall, RequestRecord


def _call(i, session, call, ready, sent, first, closed, after=None, anchor=None, delay=None, tool=None, **kw):
    return RequestRecord(
        point=0,
        id=i,
        scheduled_s=ready,
        sent_s=sent,
        chunk_times_s=[first, closed],
        end_s=closed,
        closed_s=closed,
        outcome=Outcome.OK,
        program=ProgramCall(
            program_session=session,
            program_id="p",
            program_call=call,
            program_depth=0,
            program_role="root" if after is None else "follow_up",
            program_start_s=kw.pop("start", 10.0),
            program_ready_s=ready,
            program_after=after,
            program_anchor=anchor,
            program_delay_s=delay,
            program_tool_s=tool,
            program_parents=(after,) if after else (),
        ),
        **kw,
    )


# A (root) -> B (A's end + 0.5 s, 0.3 of it a tool) -> D (B's end + 0.1 s, and C's end);
# C waits on A's start + 0.05 s and ends before B: off the path.
RECORDS = [
    _call(0, "s", "A", 10.0, 10.001, 10.101, 10.201, server_timings={"prompt_ms": 60.0}),
    _call(1, "s", "C", 10.051, 10.052, 10.152, 10.252, "A", "start", 0.05, 0.0),
    _call(2, "s", "B", 10.701, 10.703, 10.803, 11.003, "A", "end", 0.5, 0.3),
    _call(3, "s", "D", 11.103, 11.104, 11.204, 11.304, "B", "end", 0.1, 0.0),
]


@dataclass
class _Phases:
    values: dict

    def phase(self, name):
        return self.values.get(name)


def test_the_critical_path_and_where_its_time_went():
    [s] = sessions(RECORDS)
    assert s.latency_s == pytest.approx(1.304) and s.ok and s.calls == 4
    assert [step.record.program.program_call for step in s.path] == ["A", "B", "D"]
    expected = {
        "dispatch": 0.0,
        "queue": 0.04,  # A: its TTFT before llama.cpp's 60 ms prefill
        "prefill": 0.06,
        "delivery": 0.0,
        "ttft": 0.2,  # B and D: no server timing
        "decode": 0.1 + 0.2 + 0.1,
        "tool": 0.3,
        "think": 0.2 + 0.1,
        "lag": 0.001 + 0.002 + 0.001,
    }
    assert s.parts == pytest.approx(expected)
    assert sum(s.parts.values()) == pytest.approx(s.latency_s)


def test_joined_spans_split_a_calls_time_to_first_token():
    phases = {(0, None, 3): _Phases({"queue": 0.02, "prefill": 0.05, "delivery": 0.01})}
    [s] = sessions(RECORDS, phases)
    # D's 100 ms: 20 queue, 50 prefill, 10 delivery, the 20 left dispatch (network, frontend)
    assert s.parts["dispatch"] == pytest.approx(0.02) and s.parts["delivery"] == pytest.approx(0.01)
    assert s.parts["queue"] == pytest.approx(0.04 + 0.02) and s.parts["ttft"] == pytest.approx(0.1)


def test_a_child_that_waited_on_its_parents_start_takes_none_of_its_model_time():
    records = [
        _call(0, "t", "E", 0.0, 0.0, 0.5, 1.0, start=0.0),
        _call(1, "t", "F", 0.1, 0.1, 0.2, 2.0, "E", "start", 0.1, 0.0, start=0.0),
    ]
    [s] = sessions(records)
    assert [step.record.program.program_call for step in s.path] == ["E", "F"]
    assert s.latency_s == pytest.approx(2.0)
    assert s.parts["think"] == pytest.approx(0.1) and s.parts["ttft"] == pytest.approx(0.1)
    assert s.parts["decode"] == pytest.approx(1.8) and sum(s.parts.values()) == pytest.approx(2.0)


def test_a_session_a_stop_rule_cut_is_not_measured():
    cut = [
        _call(0, "w", "A", 0.0, 0.0, 0.1, 0.2, start=0.0),
        _call(1, "w", "B", 0.3, 0.3, 0.4, 0.5, "A", "end", 0.1, 0.0, start=0.0),
    ]
    for r in cut:  # its program has three calls: the third was never sent
        r.program = replace(r.program, program_calls=3)
    [s] = sessions(cut)
    assert not s.ok and s.latency_s is None
    assert program_stats(cut, cut, (0.0, 100.0), None).measured_sessions == 0


def test_a_points_programs_over_its_window():
    failed = _call(9, "u", "A", 50.0, 50.0, 50.1, 50.2, start=50.0)
    failed.outcome = Outcome.HTTP_ERROR
    stats = program_stats(RECORDS + [failed], RECORDS + [failed], (0.0, 100.0), None)
    assert stats.measured_sessions == 1  # the failed session is not measured
    assert stats.session_s.max == pytest.approx(1.304)
    assert stats.critical_path.calls.max == 3
    assert stats.critical_path.mean_s["tool"] == pytest.approx(0.3)
    assert stats.critical_path.share["tool"] == pytest.approx(0.3 / 1.304)
    assert stats.schedule_lag_s.count == 5 and stats.schedule_lag_s.max == pytest.approx(0.002)
    assert set(stats.by_role) == {"root", "follow_up"} and stats.by_role["root"].count == 2
    assert stats.by_role["root"].ok == 1 and stats.by_depth["0"].count == 5
    # a session started outside the window is not measured
    assert program_stats(RECORDS, RECORDS, (10.5, 100.0), None).measured_sessions == 0


def test_a_session_limit_counts_the_sessions_within_it():
    two = RECORDS + [
        _call(10 + r.id, "v", r.program.program_call, r.scheduled_s + 1, r.sent_s + 1, r.chunk_times_s[0] + 1,
              r.closed_s + 1.5, r.program.program_after, r.program.program_anchor, r.program.program_delay_s,
              r.program.program_tool_s, start=11.0)
        for r in RECORDS
    ]  # fmt: skip
    stats = program_stats(two, two, (0.0, 100.0), None, limit_s=1.5)
    [fast, slow] = sorted(s.latency_s for s in sessions(two))
    assert fast == pytest.approx(1.304) and slow > 1.5
    assert stats.good_sessions_fraction == 0.5 and stats.good_sessions_per_s == pytest.approx(1 / 100)
    assert program_stats(two, two, (0.0, 100.0), None).good_sessions_per_s is None
