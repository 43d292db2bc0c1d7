"""Load profiles turned into schedules: when each user starts, when each open-loop request arrives.

Pure and seeded: the same load and seed give the same times. Times are seconds from the start of
the load point.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np

from tokenbench.config import LoadPoint, RateLoad, ReplayLoad, StagedLoad, StopConfig, UsersLoad
from tokenbench.errors import BadInput


@dataclass(frozen=True)
class Share:
    """The part of a point's one global schedule a worker runs (``--workers``): item ``i`` (a user,
    an arrival, a conversation's start) is worker ``index``'s of ``count`` when ``i % count ==
    index``. Every worker computes the same global schedule from the same seed and keeps its own
    items, so the schedule is the same whatever the count; the whole is ``Share()``."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"worker {self.index} of {self.count}")

    def mine(self, i: int) -> bool:
        return i % self.count == self.index

    def of(self, total: int | None) -> int | None:
        """How many of items ``0..total-1`` are this worker's (None: unbounded)."""
        return None if total is None else max(0, (total - self.index + self.count - 1) // self.count)


def user_start_times(load: UsersLoad) -> list[float]:
    """Users spawned evenly over the ramp: user i starts at i * ramp / users (the first at 0)."""
    step = load.ramp_up_s / load.users
    return [i * step for i in range(load.users)]


def arrival_times(load: RateLoad, seed: int, stop: StopConfig) -> Iterator[float]:
    """Open-loop arrival times, ending before ``stop.duration_s`` or after ``stop.max_requests``.

    constant: every 1/rate s, the first at 0. poisson: exponential gaps with mean 1/rate. gamma:
    gaps with shape ``burstiness`` and mean 1/rate (burstiness < 1 is burstier than poisson, > 1
    smoother; the same convention as vLLM's ``--burstiness``). For poisson and gamma the first
    gap is drawn too (a renewal process started at 0): an arrival pinned at t = 0 would add one
    request to the expected rate x duration.
    """
    rng = np.random.default_rng(seed)
    mean_gap = 1.0 / load.rate_per_s

    def gap() -> float:
        if load.arrival == "poisson":
            return float(rng.exponential(mean_gap))
        return float(rng.gamma(load.burstiness, mean_gap / load.burstiness))

    t = 0.0 if load.arrival == "constant" else gap()
    n = 0
    while stop.max_requests is None or n < stop.max_requests:
        if stop.duration_s is not None and t >= stop.duration_s:
            return
        yield t
        n += 1
        t = n * mean_gap if load.arrival == "constant" else t + gap()  # constant: no float drift


# --- a staged load: the level changes while the point runs (config/stages.py) ------------------------


@dataclass(frozen=True)
class RateCurve:
    """A staged point's rate as a piecewise-linear curve through its knots (a step is two knots at
    one time), and its integral, the cumulative rate (the expected arrivals by ``t``), both ways."""

    times_s: tuple[float, ...]
    rates_per_s: tuple[float, ...]
    cumulative: tuple[float, ...]  # the expected arrivals by each knot

    @classmethod
    def of(cls, load: StagedLoad) -> RateCurve:
        knots = [(0.0, load.start_level)]
        at = 0.0
        for stage in load.stages:
            if stage.ramp_s > 0:
                knots.append((at + stage.ramp_s, stage.level))
            else:
                knots.append((at, stage.level))
            at += stage.duration_s
            knots.append((at, stage.level))
        times, rates = tuple(t for t, _ in knots), tuple(r for _, r in knots)
        areas = ((rates[i] + rates[i + 1]) / 2 * (times[i + 1] - times[i]) for i in range(len(knots) - 1))
        return cls(times, rates, (0.0, *itertools.accumulate(areas)))

    @property
    def total(self) -> float:
        """The expected arrivals over the whole point."""
        return self.cumulative[-1]

    def expected(self, t_s: float) -> float:
        """The cumulative rate at ``t_s``: the expected arrivals in [0, t_s)."""
        k = min(max(bisect.bisect_right(self.times_s, t_s) - 1, 0), len(self.times_s) - 2)
        t0, t1, r0, r1 = self.times_s[k], self.times_s[k + 1], self.rates_per_s[k], self.rates_per_s[k + 1]
        x = min(max(t_s - t0, 0.0), t1 - t0)
        slope = (r1 - r0) / (t1 - t0) if t1 > t0 else 0.0
        return self.cumulative[k] + r0 * x + slope * x * x / 2

    def time_of(self, expected: float) -> float:
        """The inverse of ``expected``: the time by which ``expected`` arrivals are due (exact: the
        root of the segment's quadratic, in the form that keeps its precision at any slope)."""
        k = min(bisect.bisect_right(self.cumulative, expected) - 1, len(self.times_s) - 2)
        t0, t1, r0, r1 = self.times_s[k], self.times_s[k + 1], self.rates_per_s[k], self.rates_per_s[k + 1]
        y = expected - self.cumulative[k]
        if y <= 0 or t1 <= t0:
            return t0
        slope = (r1 - r0) / (t1 - t0)
        root = math.sqrt(max(0.0, r0 * r0 + 2 * slope * y))
        return min(t0 + 2 * y / (r0 + root), t1) if r0 + root > 0 else t0


def staged_arrival_times(load: StagedLoad, seed: int, stop: StopConfig) -> Iterator[float]:
    """A staged open loop's arrival times, by time-rescaling: a unit-rate process in operational
    time (the expected arrivals so far) mapped through the inverse cumulative rate. constant:
    arrival n where n arrivals are due (the first at 0, as for a rate; in a stage of constant rate
    every 1/rate s); poisson: unit exponential gaps (a non-homogeneous Poisson process over the
    curve, exact: no thinning); gamma: gaps of shape ``burstiness``, mean 1. Ends at the stages'
    end (the point's duration) or after ``stop.max_requests``."""
    curve = RateCurve.of(load)
    rng = np.random.default_rng(seed)

    def gap() -> float:
        if load.arrival == "poisson":
            return float(rng.exponential(1.0))
        return float(rng.gamma(load.burstiness, 1.0 / load.burstiness))

    end_s = load.duration_s if stop.duration_s is None else min(load.duration_s, stop.duration_s)
    s = 0.0 if load.arrival == "constant" else gap()
    n = 0
    while (stop.max_requests is None or n < stop.max_requests) and s < curve.total:
        t = curve.time_of(s)
        if t >= end_s:
            return
        yield t
        n += 1
        s = float(n) if load.arrival == "constant" else s + gap()


@dataclass(frozen=True)
class UserSpan:
    """When a staged closed loop's user is one of the point's users: from ``start_s``, retired at
    ``end_s`` (seconds from the point's start): a retired user sends no new request (its request in
    flight ends)."""

    start_s: float
    end_s: float


def staged_user_spans(load: StagedLoad) -> list[list[UserSpan]]:
    """Each user's spans (by global index) as the level follows the stages. The first
    ``start_level`` users start at 0. A stage above the level before adds the users up to its
    level evenly over its ramp (the k-th of n at ``k * ramp / n`` into it: the first at its start,
    as --ramp-up spawns); one below retires the highest-numbered users evenly over its ramp (the
    k-th at ``(k + 1) * ramp / n``: its level reached at the ramp's end); without a ramp, at once."""
    total = load.duration_s
    spans: list[list[UserSpan]] = []
    opened: dict[int, float] = {}
    for u in range(int(load.start_level)):
        opened[u] = 0.0
    active = int(load.start_level)
    for start, stage in zip(load.starts_s, load.stages, strict=False):
        target = int(stage.level)
        step = stage.ramp_s / abs(target - active) if target != active else 0.0
        for k in range(target - active):  # up: users active .. target - 1
            opened[active + k] = start + k * step
        for k in range(active - target):  # down: users active - 1 .. target
            u = active - 1 - k
            _close(spans, u, opened.pop(u), start + (k + 1) * step)
        active = target
    for u, began in sorted(opened.items()):
        _close(spans, u, began, total)
    return spans


def _close(spans: list[list[UserSpan]], user: int, start_s: float, end_s: float) -> None:
    while len(spans) <= user:
        spans.append([])
    if end_s > start_s:
        spans[user].append(UserSpan(start_s, end_s))


def ramp_up_s(load: LoadPoint) -> float:
    return load.ramp_up_s if isinstance(load, UsersLoad) else 0.0


def describe(load: LoadPoint) -> str:
    if isinstance(load, UsersLoad):
        return f"{load.users} users" + (f", ramp {load.ramp_up_s:g}s" if load.ramp_up_s else "")
    if isinstance(load, StagedLoad):
        unit = "req/s" if load.open_loop else "users"
        levels = " → ".join(f"{stage.level:g}" for stage in load.stages[:8]) + (
            " → ..." if len(load.stages) > 8 else ""
        )
        shape = f" ({load.shape.partition(':')[0]})" if load.shape else ""
        cap = f", max {load.max_concurrency} in flight" if load.max_concurrency else ""
        return f"staged{shape} {levels} {unit} over {load.duration_s:g}s{cap}"
    cap = f", max {load.max_concurrency} in flight" if load.max_concurrency else ""
    if isinstance(load, ReplayLoad):
        end = "end" if load.end_s is None else f"{load.end_s:g}s"
        window = "" if load.start_s is None and load.end_s is None else f" {load.start_s or 0:g}s-{end}"
        jitter = f", jitter {load.jitter_s:g}s" if load.jitter_s else ""
        return f"trace replay x{load.speed:g}{window}{jitter}{cap}"
    return f"{load.rate_per_s:g} req/s {load.arrival}{cap}"


# --- trace replay ---------------------------------------------------------------------------------


class _Timestamped(Protocol):
    @property
    def timestamp_s(self) -> float: ...


RowT = TypeVar("RowT", bound=_Timestamped)


@dataclass(frozen=True)
class ReplaySend(Generic[RowT]):
    """One row of a trace and when to send it, in seconds from the start of the load point."""

    offset_s: float
    row: RowT


def replay_window(loads: Sequence[LoadPoint]) -> tuple[float | None, float | None]:
    """The trace time the replay points cover (the trace's rows are read from there); points with
    different windows: the whole trace (each point still replays its own window)."""
    windows = {(load.start_s, load.end_s) for load in loads if isinstance(load, ReplayLoad)}
    return windows.pop() if len(windows) == 1 else (None, None)


def replay_offsets(
    rows: Iterable[RowT],
    speed: float = 1.0,
    start_s: float | None = None,
    end_s: float | None = None,
    jitter_s: float = 0.0,
    seed: int = 0,
) -> Iterator[ReplaySend[RowT]]:
    """The trace as a schedule, in send order, as lazily as the rows come (``rows`` in trace
    order): a row's offset is its trace time divided by ``speed`` (2 = twice as fast, 0.5 = half;
    one meaning, where vLLM, AIPerf, guidellm and SGLang differ), measured from the first row used.

    ``start_s``/``end_s`` select rows by trace time (``start_s <= timestamp_s < end_s``, before the
    speed division). ``jitter_s`` (trace seconds, opt-in) moves each row later by an independent
    uniform draw in [0, jitter_s), seeded: a gridded trace (Mooncake's conversation trace puts
    arrivals on a 3 s grid) then spreads each grid instant's burst over the bucket after it
    instead of sending it at once. Offset 0 stays the first used row's unjittered time. Jittered
    rows are put back in send order through a heap that holds only the rows within ``jitter_s``
    of the next send (a row is never later than its time plus the jitter).
    """
    if speed <= 0:
        raise BadInput(f"replay speed must be > 0 (2 = twice as fast), got {speed:g}")
    if jitter_s < 0:
        raise BadInput(f"replay jitter must be >= 0 s, got {jitter_s:g}")
    used = (
        r for r in rows if (start_s is None or r.timestamp_s >= start_s) and (end_s is None or r.timestamp_s < end_s)
    )
    first = next(used, None)
    if first is None:
        window = f"[{start_s if start_s is not None else 'start'}, {end_s if end_s is not None else 'end'})"
        raise BadInput(f"no trace rows in the replay window {window} s of trace time")
    t0 = first.timestamp_s
    if not jitter_s:
        yield ReplaySend(0.0, first)
        for r in used:
            yield ReplaySend((r.timestamp_s - t0) / speed, r)
        return
    rng = np.random.default_rng(seed)
    heap: list[tuple[float, int, RowT]] = []  # (jittered trace time, arrival order, row): stable
    for n, r in enumerate(itertools.chain([first], used)):
        while heap and heap[0][0] <= r.timestamp_s:  # nothing later can come before it
            t, _, row = heapq.heappop(heap)
            yield ReplaySend((t - t0) / speed, row)
        heapq.heappush(heap, (r.timestamp_s + float(rng.uniform(0.0, jitter_s)), n, r))
    while heap:
        t, _, row = heapq.heappop(heap)
        yield ReplaySend((t - t0) / speed, row)
