"""A staged point's results stage by stage (config.StagedLoad): each stage's requests, rates,
latencies, SLO attainment and backlog, from the point's records (pure).

Populations: a stage's requests are those *scheduled* in its window (open loop: their arrival
times; closed loop: when their user became free), whatever became of them, so a request the
overload delayed still counts where it was due; its distributions are over the ok ones and its
SLO attainment over the ones that ended (the run's --slo, from the scheduled time, as goodput's:
metrics.point.meets_slo). Its throughput is what arrived within its window: ok completions and
output tokens whose chunk came in it. The backlog (scheduled and not yet ended: in flight, or
waiting client-side for a slot) counts every record of the point; a request the run cut (cancelled
in flight, never sent) stays in it: a backlog the point's end cut off never drained.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from tokenbench.config import StagedLoad
from tokenbench.config.slo import SLOConfig
from tokenbench.metrics.point import meets_slo
from tokenbench.metrics.span import tokens_per_chunk
from tokenbench.metrics.stats import distribution
from tokenbench.records import UNFINISHED, Outcome, RequestRecord, failed
from tokenbench.results.run import Backlog, StageResult

POPULATION = (
    "requests, ok, failed, offered_per_s, good_fraction and the distributions: the requests scheduled in "
    "the stage; requests_per_s and output_tokens_per_s: ok completions and output tokens that arrived "
    "within its window; backlog: every request of the point scheduled and not yet ended"
)


class StageTally:
    """What the stages read from chunk times, taken as the records pass (before their chunk times
    are dropped: metrics.ChunkTally): the output tokens that arrived in each stage's window and the
    ITL gaps of each stage's ok requests."""

    def __init__(self, load: StagedLoad, start_s: float, load_end_s: float | None = None) -> None:
        """The stages of a point that started at ``start_s`` (run clock) and whose load ended at
        ``load_end_s``: a point stopped early (an interrupt, the breaker) has the stages it began,
        the last cut there."""
        edges = [start_s + t for t in load.starts_s]
        if load_end_s is not None and load_end_s < edges[-1] - 1e-9:
            began = [t for t in edges[:-1] if t < load_end_s]
            edges = [*began, load_end_s] if began else [start_s]
        self.edges = np.array(edges)
        k = len(self.edges) - 1
        self.tokens = np.zeros(k)
        self._gaps: list[list[np.ndarray]] = [[] for _ in range(k)]

    def observe(self, records: Iterable[RequestRecord]) -> Iterator[RequestRecord]:
        """``records`` passed on as they come, each tallied on the way."""
        for r in records:
            self._add(r)
            yield r

    def stage_of(self, t_s: float) -> int | None:
        i = int(np.searchsorted(self.edges, t_s, side="right")) - 1
        return i if 0 <= i < len(self.edges) - 1 else None

    def gaps(self, i: int) -> np.ndarray:
        return np.concatenate(self._gaps[i]) if self._gaps[i] else np.empty(0)

    def _add(self, r: RequestRecord) -> None:
        times = np.asarray(r.chunk_times_s, dtype=np.float64)
        if times.size == 0:
            return
        k = len(self.edges) - 1
        w = np.searchsorted(self.edges, times, side="right") - 1
        inside = (w >= 0) & (w < k)
        self.tokens += np.bincount(w[inside], minlength=k)[:k] * tokens_per_chunk(r)
        i = self.stage_of(r.scheduled_s)
        if i is not None and r.outcome is Outcome.OK and times.size >= 2:
            self._gaps[i].append(np.diff(times))


@dataclass(frozen=True)
class _Backlogs:
    """The backlog as a step function: requests scheduled by ``t`` less those ended by ``t``."""

    begun: np.ndarray
    ended: np.ndarray

    @classmethod
    def of(cls, records: Sequence[RequestRecord]) -> _Backlogs:
        begun = np.sort(np.array([r.scheduled_s for r in records], dtype=np.float64))
        ends = [_ended_s(r) for r in records]
        return cls(begun, np.sort(np.array(ends, dtype=np.float64)))

    def at(self, t_s: float | np.ndarray) -> np.ndarray:
        return np.searchsorted(self.begun, t_s, side="right") - np.searchsorted(self.ended, t_s, side="right")

    def before(self, t_s: float) -> int:
        """Just before ``t_s``: what one stage leaves to the next (a request due at the boundary is the next's)."""
        return int(np.searchsorted(self.begun, t_s, side="left") - np.searchsorted(self.ended, t_s, side="left"))

    def peak(self, start_s: float, end_s: float) -> int:
        lo, hi = np.searchsorted(self.begun, [start_s, end_s], side="left")
        candidates = np.concatenate(([start_s], self.begun[lo:hi]))
        return int(self.at(candidates).max())

    def drained_at(self, start_s: float, level: int) -> float | None:
        """The first time from ``start_s`` at which the backlog is at most ``level`` (it falls only
        as requests end); None: never."""
        if int(self.at(start_s)) <= level:
            return start_s
        after = self.ended[np.searchsorted(self.ended, start_s, side="right") :]
        after = after[np.isfinite(after)]
        if after.size == 0:
            return None
        below = np.flatnonzero(self.at(after) <= level)
        return float(after[below[0]]) if below.size else None


def _ended_s(r: RequestRecord) -> float:
    """When a request left the backlog: when it closed; one the run cut (cancelled in flight, never
    sent) or that never closed stayed in it (its cut is no drain)."""
    if r.outcome in UNFINISHED:
        return math.inf
    for t in (r.closed_s, r.end_s):
        if t is not None:
            return t
    return math.inf


def stage_results(
    records: Sequence[RequestRecord], load: StagedLoad, start_s: float, slo: SLOConfig, tally: StageTally
) -> list[StageResult]:
    """One result per stage of a staged point that started at ``start_s`` (run clock), per the
    tally's stages (the ones it began); ``tally``: the chunk times' figures, taken as the records
    passed."""
    backlogs = _Backlogs.of(records)
    stages = load.stages[: len(tally.edges) - 1]
    by_stage: list[list[RequestRecord]] = [[] for _ in stages]
    for r in records:
        i = tally.stage_of(r.scheduled_s)
        if i is not None:
            by_stage[i].append(r)
    results: list[StageResult] = []
    grew_from: int | None = None  # the backlog at the start of the stage before, when it grew in it
    for i, stage in enumerate(stages):
        a, b = float(tally.edges[i]), float(tally.edges[i + 1])
        length = b - a
        mine = by_stage[i]
        ok = [r for r in mine if r.outcome is Outcome.OK]
        ended = [r for r in mine if r.outcome not in UNFINISHED]
        at_start, at_end = backlogs.before(a), backlogs.before(b)
        drain_s = None
        if grew_from is not None:
            drained = backlogs.drained_at(a, grew_from)
            drain_s = None if drained is None else drained - a
        completed = sum(1 for r in records if r.outcome is Outcome.OK and r.end_s is not None and a <= r.end_s < b)
        results.append(
            StageResult(
                index=i,
                start_s=a - start_s,
                end_s=b - start_s,
                target_rate_per_s=stage.rate_per_s,
                target_users=stage.users,
                ramp_s=stage.ramp_s,
                population=POPULATION,
                requests=len(mine),
                ok=len(ok),
                failed=sum(1 for r in mine if failed(r.outcome)),
                offered_per_s=len(mine) / length,
                requests_per_s=completed / length,
                output_tokens_per_s=float(tally.tokens[i]) / length,
                good_fraction=sum(1 for r in ended if meets_slo(r, slo)) / len(ended) if slo.any and ended else None,
                ttft_s=distribution([r.ttft_s for r in ok if r.ttft_s is not None]),
                itl_s=distribution(tally.gaps(i)),
                e2e_s=distribution([r.e2e_s for r in ok if r.e2e_s is not None]),
                backlog=Backlog(
                    at_start=at_start,
                    at_end=at_end,
                    peak=backlogs.peak(a, b),
                    growth_per_s=(at_end - at_start) / length,
                    drain_s=drain_s,
                ),
            )
        )
        grew_from = at_start if at_end > at_start else None
    return results
