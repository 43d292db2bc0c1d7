"""`tokenbench capacity --slo`: objectives over a whole point, parsed and checked (pure).

Syntax: comma-separated ``METRIC:STAT<=LIMIT`` with METRIC one of ttft, tpot, itl, e2e, queue,
session (agent programs: a session's latency, ``points[].programs.session_s``),
STAT one of mean, p50, p90, p95, p99 and LIMIT a duration (``500ms``, ``2s``; a bare number is
seconds), and ``errors<=PCT%`` (or a fraction: ``errors<=0.01``).

What is measured: the point's own distributions in results.json (``ttft_s``, ``tpot_s``,
``itl_s``, ``e2e_s``, ``queue_s``: over the successful requests of its window population), so a
verdict can be checked against results.json. TTFT and E2E count from when the request was *sent*;
the wait for a client-side concurrency slot is the ``queue`` objective's (with ``--max-concurrency``
a queue objective is required: the search refuses to hide overload in the client's queue).
``errors`` is the point's error rate over its window population (METRICS.md: requests the run
cut off, cancelled or never sent, are censored, not failures).

This differs from ``tokenbench run --slo ttft=500ms``: that one is per request (goodput counts the
requests that each met every limit, TTFT counted from when the request was scheduled); these
objectives are statistics over a point, and a point passes when all of them hold. Each command
refuses the other's syntax with its own equivalent (``ttft=500ms`` here: ``ttft:p90<=500ms``;
units.parse_slo the other way), rather than guess a statistic or a per-request meaning.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tokenbench.common.units import parse_duration_s, parse_fraction
from tokenbench.config.mix import WorkloadMix
from tokenbench.config.slo import SLOConfig
from tokenbench.errors import BadInput
from tokenbench.results.capacity import Objective, ObjectiveCheck
from tokenbench.results.run import Distribution, PointResult

LATENCIES = ("ttft", "tpot", "itl", "e2e", "queue", "session")
STATS = ("mean", "p50", "p90", "p95", "p99")
SYNTAX = (
    "write METRIC:STAT<=LIMIT (METRIC ttft, tpot, itl, e2e, queue or session; STAT mean, p50, p90, p95 or p99; "
    "LIMIT e.g. 500ms or 2s) or errors<=PCT% (e.g. errors<=1%), comma-separated"
)
_OBJECTIVE = re.compile(r"^\s*([a-z0-9_]+)\s*(?::\s*([a-z0-9_.]+)\s*)?(<=|>=|<|>|=)\s*(.*?)\s*$")


class ObjectiveError(BadInput):
    """A malformed --slo: the message names the part and the syntax."""


def parse_objectives(text: str) -> list[Objective]:
    """'ttft:p90<=500ms,errors<=1%' -> [Objective(ttft, p90, 0.5), Objective(errors, fraction, 0.01)]."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ObjectiveError(f"--slo is empty: {SYNTAX}")
    objectives = [_objective(part) for part in parts]
    seen = [(o.name, o.stat) for o in objectives]
    dup = next((k for i, k in enumerate(seen) if k in seen[:i]), None)
    if dup is not None:
        raise ObjectiveError(f"--slo names {dup[0]} {dup[1]} twice: keep one limit")
    return objectives


def _objective(part: str) -> Objective:
    m = _OBJECTIVE.match(part.lower())
    if m is None:
        raise ObjectiveError(f"--slo part {part!r}: {SYNTAX}")
    name, stat, op, value = m.groups()
    if op == "=" and stat is None and name in LATENCIES:
        raise ObjectiveError(
            f"--slo part {part!r} is run's per-request syntax; capacity's objectives are a statistic over each "
            f"point: write {name}:p90<={value} (or mean, p50, p95, p99 for p90)"
        )
    if op != "<=":
        raise ObjectiveError(f"--slo part {part!r}: only <= is supported (an upper limit); {SYNTAX}")
    if name == "errors":
        if stat is not None:
            raise ObjectiveError(f"--slo part {part!r}: errors takes no statistic: write errors<=1%")
        return Objective(name="errors", stat="fraction", limit=_fraction(part, value))
    if name not in LATENCIES:
        raise ObjectiveError(f"--slo part {part!r}: unknown metric {name!r}; {SYNTAX}")
    if stat not in STATS:
        what = f"no statistic (e.g. {name}:p90<={value})" if stat is None else f"unknown statistic {stat!r}"
        raise ObjectiveError(f"--slo part {part!r}: {what}; {SYNTAX}")
    try:
        limit = parse_duration_s(value)
    except ValueError:
        raise ObjectiveError(f"--slo part {part!r}: cannot read the limit {value!r}; {SYNTAX}") from None
    if limit <= 0:
        raise ObjectiveError(f"--slo part {part!r}: a latency limit must be > 0")
    return Objective(name=name, stat=stat, limit=limit)  # type: ignore[arg-type]


def _fraction(part: str, value: str) -> float:
    try:
        fraction = parse_fraction(value)
    except BadInput:
        raise ObjectiveError(f"--slo part {part!r}: write the error rate as a percentage, e.g. errors<=1%") from None
    if fraction > 1:
        raise ObjectiveError(f"--slo part {part!r}: an error rate above 100% means nothing; e.g. errors<=1%")
    return fraction


def class_objectives(mix: WorkloadMix | None) -> list[Objective]:
    """Each workload mix class's own objectives (its ``objectives:``, this syntax), named by class."""
    found: list[Objective] = []
    for c in mix.classes if mix is not None else ():
        if c.objectives:
            try:
                parsed = parse_objectives(c.objectives)
            except ObjectiveError as exc:
                raise ObjectiveError(f"--mix class {c.name}'s objectives: {exc}") from None
            found += [o.model_copy(update={"request_class": c.name}) for o in parsed]
    return found


def goodput_slo(objectives: Sequence[Objective]) -> SLOConfig:
    """The per-request limits goodput counts at each probe: the tightest ttft, tpot and e2e limits
    of the objectives (queue, itl and errors have no per-request counterpart in SLOConfig)."""
    limits = {
        f"{name}_s": min((o.limit for o in objectives if o.name == name and o.request_class is None), default=None)
        for name in ("ttft", "tpot", "e2e")
    }
    return SLOConfig(**limits)


def measure(point: PointResult, objective: Objective) -> float | None:
    """The objective's statistic over the point; None when it has nothing to measure it on."""
    if objective.request_class is not None:  # a class's own
        group = (point.by_class or {}).get(objective.request_class)
        if group is None:
            return None
        if objective.name == "errors":
            ended = group.ok + group.failed
            return group.failed / ended if ended else None
        if objective.name == "itl":
            return None  # no per-class ITL (its chunk times are tallied for the point as a whole)
        value = getattr(getattr(group, f"{objective.name}_s"), objective.stat)
        return float(value) if value is not None else None
    if objective.name == "errors":
        w = point.requests_in_window
        unfinished = w.by_outcome.get("cancelled", 0) + w.by_outcome.get("not_sent", 0)
        finished = w.total - unfinished
        return (finished - w.ok) / finished if finished > 0 else None
    if objective.name == "session":  # agent programs: the measured sessions' latency
        if point.programs is None:
            return None
        value = getattr(point.programs.session_s, objective.stat)
        return float(value) if value is not None else None
    dist: Distribution = getattr(point, f"{objective.name}_s")
    value = getattr(dist, objective.stat)
    return float(value) if value is not None else None


def check(objective: Objective, measured: float | None) -> ObjectiveCheck:
    """The objective against a measured value: passes when measured <= limit."""
    margin = objective.limit - measured if measured is not None else None
    return ObjectiveCheck(
        **objective.model_dump(),
        measured=measured,
        margin=margin,
        passed=margin is not None and margin >= 0,
    )


def check_mean(objective: Objective, values: Sequence[float | None]) -> ObjectiveCheck:
    """The objective on the mean over trials; a trial that measured nothing fails it."""
    if not values or any(v is None for v in values):
        return check(objective, None)
    return check(objective, sum(v for v in values if v is not None) / len(values))
