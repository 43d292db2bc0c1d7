"""A point's scaling (results.scaling.Scaling) from the scaler's polls and the point's records:
pure. The polls are the sampler's ``replicas`` lines (telemetry/scaler.py); every time is on the
run's clock.

- Timeline: one row per successful poll in the point's span [start, end].
- Transitions: a poll's replicas against the last successful one before it (the baseline is the
  last poll before the point started, else the point's first poll: a point's first poll then has
  no transitions).
- Scale-ups: replicas that first appear in the point. The step is the point's start when its load
  rose over the point before, or in a staged point the last stage start at or before the
  replica's first sign where the stage's level rose over the one before (``step_s``; None: no
  step, no lags). ``first_request_s`` is when the
  first reply the replica served began (the earliest first content chunk among the point's records
  naming it in ``replica``): when it was serving, which a request sent earlier and queued at a
  router would antedate.
- Scale-downs: replicas that go STOPPING, or vanish, in the point.
- SLO attainment around a scale-up: the requests *scheduled* in each window (results.scaling.ScaleUp
  says which), the fraction meeting the run's SLO (metrics.point.meets_slo).
- Replica-seconds: RUNNING replicas integrated over the span, each poll's count held until the
  next (the last until the span's end; the time before the span's first poll counts the count of
  the last poll before it, when there is one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenbench.common.replica_states import ReplicaState
from tokenbench.config import LoadPoint, RateLoad, ReplayLoad, StagedLoad, UsersLoad
from tokenbench.config.slo import SLOConfig
from tokenbench.metrics.point import meets_slo
from tokenbench.records import RequestRecord
from tokenbench.results.scaling import (
    ReplicaPoll,
    ScaleDown,
    ScaleUp,
    Scaling,
    SloWindow,
    TimelineRow,
    Transition,
)


@dataclass(frozen=True)
class ScalingSpan:
    """What a point's scaling is measured over: its span, its load step (None: its load did not
    rise over the point before's), the run's SLO and the sampler's interval."""

    start_s: float
    end_s: float
    step_s: float | None
    slo: SLOConfig
    interval_s: float | None
    # a staged point's rises: each stage start (run clock) whose level is above the one before;
    # a scale-up's step is the last of them at or before its first sign (else step_s)
    stage_steps_s: tuple[float, ...] = ()

    def step_before(self, t_s: float) -> float | None:
        """The load step a change first seen at ``t_s`` answers."""
        rises = [s for s in self.stage_steps_s if s <= t_s]
        return rises[-1] if rises else self.step_s


def stage_steps_s(load: LoadPoint, start_s: float) -> tuple[float, ...]:
    """A staged point's stage starts where its level rose over the stage before (the first stage
    against the point's start level), on the run's clock; () for any other point."""
    if not isinstance(load, StagedLoad):
        return ()
    levels = [load.start_level, *(stage.level for stage in load.stages)]
    starts = load.starts_s
    return tuple(start_s + t for t, a, b in zip(starts, levels, levels[1:], strict=False) if b > a)


def load_step_s(previous: LoadPoint | None, load: LoadPoint, start_s: float) -> float | None:
    """The point's start when its load rose over the point before's (more users, a higher rate, a
    faster replay); None for a first point, a load that fell or stayed, or loads of two kinds."""
    if isinstance(previous, UsersLoad) and isinstance(load, UsersLoad) and load.users > previous.users:
        return start_s
    if isinstance(previous, RateLoad) and isinstance(load, RateLoad) and load.rate_per_s > previous.rate_per_s:
        return start_s
    if isinstance(previous, ReplayLoad) and isinstance(load, ReplayLoad) and load.speed > previous.speed:
        return start_s
    return None


def point_scaling(polls: Sequence[ReplicaPoll], records: Sequence[RequestRecord], span: ScalingSpan) -> Scaling | None:
    """The point's scaling; None without a poll (a run that polled no scaler)."""
    if not polls:
        return None
    inside = [p for p in polls if span.start_s <= p.t_s <= span.end_s]
    ok = [p for p in inside if p.ok]
    before = [p for p in polls if p.t_s < span.start_s and p.ok]
    baseline = before[-1] if before else (ok[0] if ok else None)
    transitions = _transitions(baseline, ok)
    ups = [_scale_up(t.replica, ok, records, span) for t in transitions if t.from_state is None]
    seconds = replica_seconds(baseline if before else None, ok, span.start_s, span.end_s)
    length = span.end_s - span.start_s
    return Scaling(
        source=polls[0].source,
        interval_s=span.interval_s,
        period_s=[span.start_s, span.end_s],
        polls=len(inside),
        failed_polls=len(inside) - len(ok),
        max_poll_gap_s=_max_gap([*(before[-1:]), *ok]),
        timeline=[_row(p) for p in ok],
        transitions=transitions,
        scale_ups=ups,
        scale_downs=_scale_downs(transitions),
        replica_seconds=seconds,
        mean_running_replicas=seconds / length if seconds is not None and length > 0 else None,
        max_running_replicas=max((_running(p) for p in ok), default=None),
    )


def _max_gap(polls: Sequence[ReplicaPoll]) -> float | None:
    gaps = [b.t_s - a.t_s for a, b in zip(polls, polls[1:], strict=False)]
    return max(gaps) if gaps else None


def _states(poll: ReplicaPoll) -> dict[str, ReplicaState]:
    return {r.id: r.state for r in poll.replicas or []}


def _running(poll: ReplicaPoll) -> int:
    return sum(1 for r in poll.replicas or [] if r.state == "RUNNING")


def _row(poll: ReplicaPoll) -> TimelineRow:
    running = _running(poll)
    return TimelineRow(t_s=poll.t_s, running=running, other=len(poll.replicas or []) - running, desired=poll.desired)


def _transitions(baseline: ReplicaPoll | None, polls: Sequence[ReplicaPoll]) -> list[Transition]:
    if baseline is None:
        return []
    out: list[Transition] = []
    last = _states(baseline)
    for poll in polls:
        now = _states(poll)
        for rid, state in now.items():
            if last.get(rid) != state:
                out.append(Transition(t_s=poll.t_s, replica=rid, from_state=last.get(rid), to_state=state))
        out += [
            Transition(t_s=poll.t_s, replica=rid, from_state=s, to_state=None)
            for rid, s in last.items()
            if rid not in now
        ]
        last = now
    return out


def _scale_up(
    replica: str, polls: Sequence[ReplicaPoll], records: Sequence[RequestRecord], span: ScalingSpan
) -> ScaleUp:
    seen_s = next(p.t_s for p in polls if replica in _states(p))
    running_s = next((p.t_s for p in polls if _states(p).get(replica) == "RUNNING"), None)
    first = [
        r.chunk_times_s[0] for r in records if r.served is not None and r.served.replica == replica and r.chunk_times_s
    ]
    first_request_s = min(first) if first else None
    step = span.step_before(seen_s)

    def lag(t: float | None) -> float | None:
        return t - step if t is not None and step is not None else None

    return ScaleUp(
        replica=replica,
        step_s=step,
        seen_s=seen_s,
        running_s=running_s,
        first_request_s=first_request_s,
        lag_seen_s=lag(seen_s),
        lag_running_s=lag(running_s),
        lag_first_request_s=lag(first_request_s),
        slo_before=slo_window(records, step, seen_s, span.slo) if step is not None else None,
        slo_during=slo_window(records, seen_s, running_s, span.slo) if running_s is not None else None,
        slo_after=slo_window(records, running_s, span.end_s, span.slo) if running_s is not None else None,
    )


def _scale_downs(transitions: Sequence[Transition]) -> list[ScaleDown]:
    downs: dict[str, ScaleDown] = {}
    for t in transitions:
        if t.to_state == "STOPPING" and t.replica not in downs:
            downs[t.replica] = ScaleDown(replica=t.replica, stopping_s=t.t_s, gone_s=None)
        elif t.to_state is None:
            known = downs.get(t.replica)
            downs[t.replica] = ScaleDown(
                replica=t.replica, stopping_s=known.stopping_s if known else t.t_s, gone_s=t.t_s
            )
    return list(downs.values())


def slo_window(records: Sequence[RequestRecord], start_s: float, end_s: float, slo: SLOConfig) -> SloWindow:
    """The requests scheduled in [start_s, end_s) and the fraction that met every objective."""
    population = [r for r in records if start_s <= r.scheduled_s < end_s]
    if not slo.any:
        return SloWindow(period_s=[start_s, end_s], requests=len(population), good=None, attainment=None)
    good = sum(1 for r in population if meets_slo(r, slo))
    attainment = good / len(population) if population else None
    return SloWindow(period_s=[start_s, end_s], requests=len(population), good=good, attainment=attainment)


def replica_seconds(
    before: ReplicaPoll | None, polls: Sequence[ReplicaPoll], start_s: float, end_s: float
) -> float | None:
    """RUNNING replicas integrated over [start_s, end_s] (module docstring); None without a poll."""
    steps = ([(start_s, _running(before))] if before is not None else []) + [(p.t_s, _running(p)) for p in polls]
    if not steps:
        return None
    edges = [t for t, _ in steps[1:]] + [end_s]
    return sum(count * (b - a) for (a, count), b in zip(steps, edges, strict=True))
