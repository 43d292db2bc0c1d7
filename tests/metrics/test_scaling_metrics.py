"""metrics/scaling.py on hand-built polls and records with known answers: the timeline, the
transitions, a scale-up's lags from its step and its SLO windows, a scale-down, replica-seconds."""

from __future__ import annotations

import pytest
from metric_records import rec

from tokenbench.config.slo import SLOConfig
from tokenbench.metrics.scaling import ScalingSpan, point_scaling, replica_seconds
from tokenbench.records import Served
from tokenbench.results.scaling import ReplicaPoll, ReplicaSeen


def poll(t: float, *replicas: tuple[str, str], ok: bool = True) -> ReplicaPoll:
    seen = [ReplicaSeen(id=i, state=s) for i, s in replicas] if ok else None  # type: ignore[arg-type]
    return ReplicaPoll(t_s=t, ok=ok, source="ray-serve http://x", replicas=seen, desired=len(replicas) or None)


A, B = ("a", "RUNNING"), ("b", "RUNNING")
POLLS = [
    poll(9.5, A),  # before the point: the baseline
    poll(10.0, A),
    poll(11.0, A, ("b", "STARTING")),
    poll(12.0, A, ("b", "STARTING")),
    poll(13.0, A, B),
    poll(14.0, ok=False),
    poll(15.0, A, ("b", "STOPPING")),
    poll(16.0, A),
]
SPAN = ScalingSpan(start_s=10.0, end_s=17.0, step_s=10.0, slo=SLOConfig(ttft_s=0.5), interval_s=1.0)


def _on(replica: str, r):
    r.served = Served(replica=replica, replica_from="header")
    return r


RECORDS = [
    _on("a", rec(0, sent=10.2, ttft=0.9, n_chunks=3, itl=0.1)),  # before: TTFT 0.9 > 0.5, not good
    _on("a", rec(1, sent=11.5, ttft=0.8, n_chunks=3, itl=0.1)),  # during: not good
    _on("a", rec(2, sent=12.5, ttft=0.2, n_chunks=3, itl=0.1)),  # during: good
    _on("b", rec(3, sent=13.1, ttft=0.3, n_chunks=3, itl=0.1)),  # after: b's first reply began at 13.4
    _on("a", rec(4, sent=14.0, ttft=0.1, n_chunks=3, itl=0.1)),  # after: good
]


def test_a_scale_up_is_timed_from_its_step_to_seen_running_and_its_first_reply():
    scaling = point_scaling(POLLS, RECORDS, SPAN)
    assert scaling is not None
    assert (scaling.polls, scaling.failed_polls) == (7, 1)
    assert scaling.max_poll_gap_s == 2.0  # 13 -> 15: the poll at 14 failed
    assert [(r.t_s, r.running, r.other) for r in scaling.timeline] == [
        (10.0, 1, 0),
        (11.0, 1, 1),
        (12.0, 1, 1),
        (13.0, 2, 0),
        (15.0, 1, 1),
        (16.0, 1, 0),
    ]
    assert [(t.t_s, t.replica, t.from_state, t.to_state) for t in scaling.transitions] == [
        (11.0, "b", None, "STARTING"),
        (13.0, "b", "STARTING", "RUNNING"),
        (15.0, "b", "RUNNING", "STOPPING"),
        (16.0, "b", "STOPPING", None),
    ]
    (up,) = scaling.scale_ups
    assert (up.replica, up.step_s, up.seen_s, up.running_s) == ("b", 10.0, 11.0, 13.0)
    assert up.first_request_s == pytest.approx(13.4)
    assert (up.lag_seen_s, up.lag_running_s) == (1.0, 3.0)
    assert up.lag_first_request_s == pytest.approx(3.4)
    assert up.slo_before is not None and up.slo_during is not None and up.slo_after is not None
    assert (up.slo_before.period_s, up.slo_before.requests, up.slo_before.attainment) == ([10.0, 11.0], 1, 0.0)
    assert (up.slo_during.period_s, up.slo_during.requests, up.slo_during.attainment) == ([11.0, 13.0], 2, 0.5)
    assert (up.slo_after.period_s, up.slo_after.requests, up.slo_after.attainment) == ([13.0, 17.0], 2, 1.0)
    (down,) = scaling.scale_downs
    assert (down.replica, down.stopping_s, down.gone_s) == ("b", 15.0, 16.0)
    # 1 replica 10-13, 2 from 13 to 15 (the failed poll at 14 holds the count of 13), 1 from 15 to 17
    assert scaling.replica_seconds == pytest.approx(3 + 4 + 2)
    assert scaling.mean_running_replicas == pytest.approx(9 / 7)
    assert scaling.max_running_replicas == 2


def test_without_a_step_a_scale_up_has_no_lags_and_without_polls_no_scaling():
    no_step = ScalingSpan(start_s=10.0, end_s=17.0, step_s=None, slo=SLOConfig(), interval_s=1.0)
    scaling = point_scaling(POLLS, RECORDS, no_step)
    assert scaling is not None
    (up,) = scaling.scale_ups
    assert (up.lag_seen_s, up.lag_running_s, up.lag_first_request_s, up.slo_before) == (None, None, None, None)
    assert up.slo_after is not None and (up.slo_after.good, up.slo_after.attainment) == (None, None)  # no SLO
    assert point_scaling([], RECORDS, SPAN) is None


def test_the_first_poll_is_the_baseline_when_none_came_before():
    scaling = point_scaling(POLLS[1:], RECORDS, SPAN)
    assert scaling is not None and scaling.transitions[0].t_s == 11.0
    # nothing is counted before the point's first poll when no poll came before it
    assert replica_seconds(None, [poll(12.0, A)], 10.0, 14.0) == 2.0
    assert replica_seconds(None, [], 10.0, 14.0) is None
