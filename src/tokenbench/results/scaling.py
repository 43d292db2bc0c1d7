"""A scaler's replicas over a point, as results: what the scaler's API showed at each poll (the
sampler's ``replicas`` lines, telemetry/scaler.py), and what metrics/scaling.py derives from them
and the records: the timeline, each replica's transitions, each scale-up's lags from the load step
before it, each scale-down, the SLO attainment around each change, and the replica-seconds.

States are Ray Serve's replica states (common/replica_states.py); a Kubernetes pod's phase and
conditions map onto them (telemetry/scaler.py).
A replica not in a poll's answer is gone (STOPPED, or never started): it has no state.

Every time is on the run's monotonic clock (seconds since its origin), as records' are. A time a
scaler showed is known only to a poll: the first poll that showed it, so a lag measured from it is
late by at most the gap since the poll before (``Scaling.max_poll_gap_s``: the sampler's interval,
or more when a slow scrape held the next poll back).
"""

from __future__ import annotations

from typing import Literal

from tokenbench.common.frozen import FrozenModel
from tokenbench.common.replica_states import ReplicaState
from tokenbench.results.base import Number, OptionalParts


class ReplicaSeen(FrozenModel):
    """One replica in one poll's answer, as samples.jsonl holds it (telemetry/scaler.py writes it
    from its reader's ``Replica``): its id (as records' ``replica`` names it where the stack says:
    Ray Serve's replica id, a pod's name, the mock's replica-K) and its state."""

    id: str
    state: ReplicaState


class ReplicaPoll(FrozenModel):
    """One poll of the scaler (samples.jsonl's ``replicas`` line): when (``t_s``, as the poll was
    sent), whether it answered, the replicas it showed, and the count the scaler wanted
    (``desired``: Ray Serve's target_num_replicas, an HPA's desiredReplicas; None where it does not say)."""

    kind: Literal["replicas"] = "replicas"
    t_s: Number
    ok: bool
    source: str  # the reader's kind and the URL polled, masked
    replicas: list[ReplicaSeen] | None = None  # None: a failed poll (``error`` says why)
    desired: int | None = None
    poll_s: Number | None = None  # how long the poll took
    error: str | None = None


class TimelineRow(FrozenModel):
    """The replicas one poll showed: RUNNING and the others (starting, updating, recovering, stopping)."""

    t_s: Number
    running: int
    other: int
    desired: int | None


class Transition(FrozenModel):
    """A replica's state changed between two polls: ``t_s`` the first poll that showed the new
    state; ``from_state`` None: a replica not shown before (new); ``to_state`` None: gone."""

    t_s: Number
    replica: str
    from_state: ReplicaState | None
    to_state: ReplicaState | None


class SloWindow(FrozenModel):
    """SLO attainment over one window around a change: the requests *scheduled* in
    ``period_s`` (sent or not) and the fraction that met every objective of the run's SLO
    (metrics.point.meets_slo). ``good`` None: the run has no SLO; ``attainment`` None: no SLO, or
    no request in the window."""

    period_s: list[Number]
    requests: int
    good: int | None
    attainment: Number | None


class ScaleUp(OptionalParts):
    """A replica that appeared during the point. ``step_s``: the point's start when its load rose
    over the point before's (a load step), None when none preceded it (then no lags). ``seen_s``:
    the first poll that showed it (scheduled or starting); ``running_s``: the first that showed it
    RUNNING (None: never, in the point); ``first_request_s``: when the first request it served was
    sent (records' ``replica``; None: none named it). Lags are from the step to each.

    SLO windows: ``slo_before`` from the step to ``seen_s`` (the scaler had not yet acted),
    ``slo_during`` from ``seen_s`` to ``running_s`` (the replica starting), ``slo_after`` from
    ``running_s`` to the point's end; a window that has no end in the point is None."""

    replica: str
    step_s: Number | None
    seen_s: Number
    running_s: Number | None
    first_request_s: Number | None
    lag_seen_s: Number | None
    lag_running_s: Number | None
    lag_first_request_s: Number | None
    slo_before: SloWindow | None = None
    slo_during: SloWindow | None = None
    slo_after: SloWindow | None = None


class ScaleDown(FrozenModel):
    """A replica that left service during the point: ``stopping_s`` the first poll that showed it
    STOPPING, or gone without a STOPPING poll (then both are that poll's time); ``gone_s`` the
    first poll that no longer showed it (None: still there at the point's end)."""

    replica: str
    stopping_s: Number
    gone_s: Number | None


class Scaling(FrozenModel):
    """A point's replicas as the scaler showed them (only a run that polled a scaler: --scaler-url).
    ``period_s`` is the point's span [start, end]; the timeline is every poll in it.

    ``max_poll_gap_s``: the longest time between two successful polls in the period (and from the
    last poll before it): how late a transition's time may be. ``replica_seconds``: the integral of RUNNING replicas over the period, each poll's count held
    until the next poll (the last until the period's end; before the first poll, none is counted):
    None without a successful poll in the period. ``mean_running_replicas`` = replica_seconds /
    the period's length; ``max_running_replicas`` the most one poll showed."""

    source: str
    interval_s: Number | None
    period_s: list[Number]
    polls: int
    failed_polls: int
    max_poll_gap_s: Number | None
    timeline: list[TimelineRow]
    transitions: list[Transition]
    scale_ups: list[ScaleUp]
    scale_downs: list[ScaleDown]
    replica_seconds: Number | None
    mean_running_replicas: Number | None
    max_running_replicas: int | None
