"""The capacity search as a plan of load points: the runner asks it for the next point after each
one finished (runner.run's ``plan``), and it keeps the evidence: the ceiling, every probe, every
decision, and the result (``CapacityResult``) at any moment. No I/O of its own: ``on_change``
(the caller's) is told after each point, so capacity.json can be rewritten as the search goes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field, field_validator

from tokenbench.capacity.decide import Bracket, Verdict, next_step
from tokenbench.capacity.objectives import check, check_mean, measure
from tokenbench.common.frozen import FrozenModel
from tokenbench.common.units import fraction
from tokenbench.config import LoadPoint, RateLoad, UsersLoad
from tokenbench.config.flags import SEARCH, Flag
from tokenbench.results.capacity import (
    AtAnswer,
    CapacityResult,
    Ceiling,
    Decision,
    Objective,
    Probe,
    StoppedBy,
    Variable,
)
from tokenbench.results.run import PointResult, RunResults
from tokenbench.results.trials import mean_ci95


class CapacitySettings(FrozenModel):
    """How the search runs (docs/capacity.md): the load variable, the relative tolerance on the
    gap between the highest passing and lowest failing value, trials per value (the verdict is
    on the trial mean), the probe budget (distinct values after the saturating probe) and the
    users of the saturating probe. Each is a flag of `tokenbench capacity` (cli/capacity.py)."""

    _fractions = field_validator("tolerance", mode="before")(fraction)

    variable: Annotated[
        Variable,
        Flag("--variable", "The load searched: rate (open loop, req/s) or users (closed loop).", SEARCH, default=True),
    ] = "rate"
    tolerance: Annotated[
        float,
        Field(gt=0, lt=1),
        Flag(
            "--tolerance",
            "Stop when (lowest failing - highest passing) / highest passing is at most this.",
            SEARCH,
            default=True,
        ),
    ] = 0.05
    trials: Annotated[
        int,
        Field(gt=0),
        Flag("--trials", "Points per probed value; the verdict is on the trial mean.", SEARCH, default=True),
    ] = 1
    max_probes: Annotated[
        int,
        Field(gt=0),
        Flag("--max-probes", "Probe budget: load values probed after the saturating probe.", SEARCH, default=True),
    ] = 8
    saturate_users: Annotated[
        int,
        Field(gt=0),
        Flag(
            "--saturate-users",
            "Users of the saturating probe (closed loop, no think time) that estimates the ceiling.",
            SEARCH,
            default=True,
        ),
    ] = 32


@dataclass
class CapacityPlan:
    """The point after each finished one: the saturating probe, then each value ``trials`` times."""

    template: RateLoad | UsersLoad  # the probed load; its rate or users replaced by each value
    objectives: Sequence[Objective]
    settings: CapacitySettings
    on_change: Callable[[CapacityResult], None] = lambda _: None

    def __post_init__(self) -> None:
        self.ceiling: Ceiling | None = None
        self.probes: list[Probe] = []
        self.decisions: list[Decision] = []
        self.points: dict[int, PointResult] = {}
        self.value: float | None = None  # the value being probed
        self.stopped_by: StoppedBy | None = None

    def saturating_load(self) -> UsersLoad:
        """A closed loop of many users with no think time: its throughput is the first upper guess."""
        ramp = self.template.ramp_up_s if isinstance(self.template, UsersLoad) else 0.0
        return UsersLoad(users=self.settings.saturate_users, ramp_up_s=ramp)

    def __call__(self, results: RunResults) -> LoadPoint | None:
        if not results.points:
            return self.saturating_load()
        point = results.points[-1]
        self.points[point.index] = point
        if self.ceiling is None:
            self.ceiling = _ceiling(point, self.settings)
            if self.ceiling.estimate is None:
                self.stopped_by = "no_ceiling"
            value = self._next() if self.ceiling.estimate is not None else None
        else:
            value = self._record(point)
        self.on_change(self.result())
        return self._load(value) if value is not None else None

    def _record(self, point: PointResult) -> float | None:
        """This trial's probe; after a value's last trial, its decision and the next value."""
        assert self.value is not None
        trial = sum(1 for p in self.probes if p.value == self.value)
        checks = [check(o, measure(point, o)) for o in self.objectives]
        # autostop: a probe whose backlog grew without bound (--stop-oversaturated) fails, however
        # its few seconds measured
        passed = all(c.passed for c in checks) and point.over_saturated is None
        self.probes.append(
            Probe(
                value=self.value,
                trial=trial,
                point_index=point.index,
                requests=point.requests_in_window.total,
                passed=passed,
                objectives=checks,
            )
        )
        if trial + 1 < self.settings.trials:
            return self.value
        self.decisions.append(self._decide(self.value))
        return self._next()

    def _decide(self, value: float) -> Decision:
        trials = [p for p in self.probes if p.value == value]
        checks = [check_mean(o, [measure(self.points[p.point_index], o) for p in trials]) for o in self.objectives]
        saturated = any(self.points[p.point_index].over_saturated is not None for p in trials)
        return Decision(
            value=value,
            passed=all(c.passed for c in checks) and not saturated,
            point_indices=[p.point_index for p in trials],
            objectives=checks,
            over_saturated=saturated,
        )

    def _next(self) -> float | None:
        assert self.ceiling is not None and self.ceiling.estimate is not None
        verdicts = [Verdict(float(d.value), d.passed) for d in self.decisions]
        s = self.settings
        step = next_step(float(self.ceiling.estimate), verdicts, s.variable, s.tolerance, s.max_probes)
        self.stopped_by = step.stopped_by
        self.value = step.value if step.value is not None else self.value
        return step.value

    def _load(self, value: float) -> LoadPoint:
        if isinstance(self.template, UsersLoad):
            return self.template.model_copy(update={"users": int(value)})
        return self.template.model_copy(update={"rate_per_s": value})

    def result(self, interrupted: bool = False) -> CapacityResult:
        """The search as it stands (``stopped_by`` None while it goes on)."""
        verdicts = [Verdict(float(d.value), d.passed) for d in self.decisions]
        bracket = Bracket.of(verdicts)
        lo, hi = bracket.max_passing, bracket.min_failing
        stopped_by = self.stopped_by or ("interrupted" if interrupted else None)
        users = self.settings.variable == "users"
        return CapacityResult(
            variable=self.settings.variable,
            max_passing=_whole(lo, users),
            max_rate_per_s=lo if not users else None,
            max_users=int(lo) if users and lo is not None else None,
            min_failing=_whole(hi, users),
            tolerance=self.settings.tolerance,
            trials=self.settings.trials,
            max_probes=self.settings.max_probes,
            slo=list(self.objectives),
            ceiling=self.ceiling,
            probes=self.probes,
            decisions=self.decisions,
            at_answer=self._at_answer(lo),
            stopped_by=stopped_by,
            answer=answer_line(self.settings.variable, self.objectives, self.decisions, self.ceiling, self._unit()),
        )

    def _unit(self) -> str | None:
        """An agent-programs search's rate is sessions a second (None: the variable's own unit)."""
        if self.ceiling is None or self.settings.variable != "rate":
            return None
        return "sessions/s" if self.points[self.ceiling.point_index].programs is not None else None

    def _at_answer(self, value: float | None) -> AtAnswer | None:
        if value is None:
            return None
        points = [self.points[p.point_index] for p in self.probes if p.value == value]
        output = mean_ci95(p.output_tokens_per_s for p in points)
        return AtAnswer(
            value=value,
            requests_per_s=mean_ci95(p.requests_per_s for p in points),
            goodput_per_s=mean_ci95(p.goodput_per_s for p in points),
            output_tokens_per_s=output,
            usd_per_million_output_tokens=_usd_per_million(points, output.mean),
        )


def _usd_per_million(points: list[PointResult], output_tokens_per_s: float | None) -> float | None:
    """The hardware's price over the answer's mean output throughput (a priced run: --cost-per-hour),
    as each point's cost is: USD/h / 3600 / tok/s x 10^6; None unpriced or without throughput."""
    cost = points[0].cost if points else None
    if cost is None or not output_tokens_per_s:
        return None
    return cost.usd_per_hour / 3600 / output_tokens_per_s * 1e6


def _whole(value: float | None, users: bool) -> float | int | None:
    return int(value) if users and value is not None else value


def _ceiling(point: PointResult, settings: CapacitySettings) -> Ceiling:
    """The saturating probe's first upper guess: rate, its requests/s (agent programs: its
    sessions/s, the rate's unit there); users, Little's law at the unqueued service time:
    ceil(requests/s x the shortest E2E), at least 1."""
    rps = point.requests_per_s
    if point.programs is not None and settings.variable == "rate":
        rps = point.programs.sessions_per_s
    min_e2e = point.e2e_s.min
    estimate: float | None = None
    if rps:
        if settings.variable == "rate":
            estimate = float(f"{rps:.3g}")
        elif min_e2e is not None:
            estimate = float(max(1, math.ceil(rps * min_e2e)))
    assert isinstance(point.load.users, int)
    return Ceiling(
        users=point.load.users,
        point_index=point.index,
        requests_per_s=rps,
        min_e2e_s=min_e2e,
        estimate=estimate,
    )


def answer_line(
    variable: Variable,
    objectives: Sequence[Objective],
    decisions: Sequence[Decision],
    ceiling: Ceiling | None,
    unit: str | None = None,
) -> str:
    """'max 6.1 req/s under ttft p90 ≤ 500 ms (next 6.4 failed: ttft p90 0.83 s)', or why no load
    (``unit``: the rate's, when it is not requests': an agent-programs search's sessions/s)."""
    unit = unit or ("req/s" if variable == "rate" else "users")
    under = ", ".join(o.label() for o in objectives)
    bracket = Bracket.of([Verdict(float(d.value), d.passed) for d in decisions])
    lo, hi = bracket.max_passing, bracket.min_failing
    failed = next((d for d in decisions if d.value == hi), None)
    if lo is None:
        if ceiling is not None and ceiling.estimate is None:
            return f"no load meets the SLO: the saturating probe ({ceiling.users} users) completed no request"
        if failed is None:
            return f"no load meets the SLO ({under}): nothing probed"
        return f"no load meets the SLO ({under}): the lowest probe, {hi:g} {unit}, failed: {_failures(failed)}"
    tail = f"next {hi:g} failed: {_failures(failed)}" if failed is not None else "no probe above it failed"
    return f"max {lo:g} {unit} under {under} ({tail})"


def _failures(decision: Decision) -> str:
    bad = [c.shown() for c in decision.objectives if not c.passed]
    if decision.over_saturated:  # it fails whatever the objectives measured in its few seconds
        bad.append("over-saturated (its backlog grew without bound)")
    return ", ".join(bad)
