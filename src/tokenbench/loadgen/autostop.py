"""A point's stopping rules that read its own figures while it runs ( pure: the load
generator feeds it records and backlog counts and asks it at each tick, with the clock's time).

- ``--warmup auto``: the measured window starts where steady state began (metrics.steady's rule,
  over the run's ``--window`` windows from the point's start, after its ramp-up), judged again as
  each window completes (a later drift moves the start later).
- ``--duration auto``: the point stops, as ``precise``, once its window (judged up to the longest
  recent request's E2E ago: later requests and tokens are still partly in flight) holds at least
  ``--min-requests`` requests and the 95% interval of each gated figure (``GATED``: mean TTFT and
  TPOT and output tok/s by batch means, TTFT p90 by the order-statistic bound; metrics.precision)
  is within ``--precision`` of it, at ``PRECISE_PASSES`` judgements in a row (each after the window
  grew by ``REJUDGE_GROWTH``). Otherwise it runs to its ceiling (the deadline).
- ``--stop-oversaturated`` (open loop): the point stops, as ``over_saturated``, once its backlog
  grows without bound (metrics.steady.backlog_growth), with the slope and its interval as evidence.

The figures judged live are the monitor's own tally of the records finished so far; results.json's
``precision`` is computed again over the point's final window (derive), so it says what was
reached, not what was judged.
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tokenbench.config import StopConfig
from tokenbench.metrics.precision import Interval, batch_means, quantile_bound
from tokenbench.metrics.steady import STEADY_WINDOWS, WindowStats, backlog_growth, steady_start, window_edges
from tokenbench.records import RequestRecord
from tokenbench.results.stopping import AutoStopFacts, Backlog, FigurePrecision

PRECISE = "precise"
OVER_SATURATED = "over_saturated"
CEILING = "ceiling"
MAX_REQUESTS = "max_requests"
LAG_RECORDS = 200  # the recent requests whose longest E2E is how far behind now the live judgement stops
# precise judgements in a row that stop a point: the 20 batch means' spread is itself an estimate
# (about ±16%), and stopping the first time it dips under the target would report a precision that
# the final window, a few requests later, does not quite have
PRECISE_PASSES = 2
REJUDGE_GROWTH = 0.02  # --duration auto: judge precision again once the window has 2% more requests
TOKEN_BIN_S = 0.05  # output tokens are tallied in bins this long (a rate's batches are made of them)
GATED = ("ttft_mean", "tpot_mean", "output_tokens_per_s", "ttft_p90")  # what --duration auto waits for
REPORTED = (*GATED, "ttft_p99")  # results' precision: the gated figures and the p99 beside


@dataclass(frozen=True)
class AutoStop:
    """Why a point stopped by its own figures, and when (run clock); ``evidence``: the numbers."""

    reason: str
    at_s: float
    evidence: dict[str, float] = field(default_factory=dict)


@dataclass
class Samples:
    """The ok requests' figures in send order, and output tokens by time bin, of one span."""

    sent: list[float] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)
    token_bins: dict[int, float] = field(default_factory=dict)

    def add(self, record: RequestRecord) -> None:
        ttft = record.ttft_s
        if not record.ok or ttft is None or record.sent_s is None:
            return
        self.sent.append(record.sent_s)
        self.ttft.append(ttft)
        tpot = record.tpot_s
        self.tpot.append(math.nan if tpot is None else tpot)


def figures(samples: Samples, start_s: float, end_s: float) -> dict[str, Interval | None]:
    """Each reported figure's 95% interval over the requests sent in [start_s, end_s) and the tokens
    that came in it (None: not enough samples for one)."""
    sent = np.asarray(samples.sent, dtype=np.float64)
    order = np.argsort(sent, kind="stable")
    keep = order[(sent[order] >= start_s) & (sent[order] < end_s)]
    ttft = np.asarray(samples.ttft, dtype=np.float64)[keep]
    tpot = np.asarray(samples.tpot, dtype=np.float64)[keep]
    tpot = tpot[~np.isnan(tpot)]
    # tok/s: each bin's rate; batch means of equal runs of whole bins (batches never split a bin)
    first, last = math.ceil(start_s / TOKEN_BIN_S - 1e-9), math.floor(end_s / TOKEN_BIN_S + 1e-9)
    rates = np.array([samples.token_bins.get(b, 0.0) for b in range(first, last)], dtype=np.float64) / TOKEN_BIN_S
    return {
        "ttft_mean": batch_means(ttft),
        "tpot_mean": batch_means(tpot),
        "output_tokens_per_s": batch_means(rates),
        "ttft_p90": quantile_bound(ttft, 0.90),
        "ttft_p99": quantile_bound(ttft, 0.99),
    }


def precise(found: dict[str, Interval | None], precision: float) -> bool:
    """Every gated figure has an interval within ``precision`` of it."""
    return all((i := found.get(name)) is not None and i.relative <= precision for name in GATED)


class PointMonitor:
    """One point's (or one worker's part's) live judge: fed finished records and backlog counts."""

    def __init__(
        self, stop: StopConfig, start_s: float, ramp_end_s: float, window_start_s: float, open_loop: bool
    ) -> None:
        self.stop = stop
        self.start_s, self.ramp_end_s = start_s, ramp_end_s
        self.window_s = stop.window_s or 5.0
        self.open_loop = open_loop
        # the measured window's start: fixed (ramp + --warmup), or found (--warmup auto)
        self.window_start_s: float | None = None if stop.warmup_auto else window_start_s
        self.steady_at_s: float | None = None  # when --warmup auto last found it
        self._judged = -1  # complete windows at the last steady judgement
        self.windows: dict[int, WindowStats] = {}
        self.samples = Samples()
        self.backlog: list[tuple[float, int]] = []
        self.stopped: AutoStop | None = None
        self.recent_e2e: deque[float] = deque(maxlen=LAG_RECORDS)  # the lag of what is judged live
        self._judged_n = 0  # requests in the window at the last precision judgement
        self._passes = 0  # precise judgements in a row

    @property
    def active(self) -> bool:
        """Whether anything is judged live (otherwise the load generator does not tick)."""
        return bool(self.stop.warmup_auto or self.stop.duration_auto or self.wants_backlog)

    @property
    def wants_backlog(self) -> bool:
        return bool(self.stop.stop_oversaturated) and self.open_loop

    def observe(self, record: RequestRecord) -> None:
        """A finished record: its TTFT into the window it was sent in, its tokens into theirs."""
        if not record.ok or not record.chunk_times_s:
            return
        self.samples.add(record)
        if record.e2e_s is not None:
            self.recent_e2e.append(record.e2e_s)
        ttft, sent = record.ttft_s, record.sent_s
        if ttft is not None and sent is not None and sent >= self.ramp_end_s:
            self.window_at(sent).add_ttft(ttft)
        times = record.chunk_times_s
        per = float(record.output_tokens or len(times)) / len(times)
        # a record as sent holds every chunk time; one read back only its first and last (ChunkEnds)
        t = np.frombuffer(times, dtype=np.float64) if isinstance(times, array) else np.array([times[0], times[-1]])
        per *= len(times) / t.size
        bins = self.samples.token_bins
        found, counts = np.unique((t // TOKEN_BIN_S).astype(np.int64), return_counts=True)
        for b, c in zip(found.tolist(), counts.tolist(), strict=True):
            bins[b] = bins.get(b, 0.0) + per * c
        after = t[t >= self.ramp_end_s]
        found, counts = np.unique(((after - self.start_s) // self.window_s).astype(np.int64), return_counts=True)
        for i, c in zip(found.tolist(), counts.tolist(), strict=True):
            self.window_at(self.start_s + (i + 0.5) * self.window_s).tokens += per * c

    def window_at(self, t: float) -> WindowStats:
        i = int((t - self.start_s) // self.window_s)
        w = self.windows.get(i)
        if w is None:
            start = self.start_s + i * self.window_s
            w = self.windows[i] = WindowStats(start, start + self.window_s)
        return w

    def sample_backlog(self, now_s: float, backlog: int) -> None:
        self.backlog.append((now_s, backlog))

    def check(self, now_s: float) -> AutoStop | None:
        """Judge the point at ``now_s``: the steady start (once), then over-saturation, then
        precision; the first stop found is kept (and returned from then on)."""
        if self.stopped is not None:
            return self.stopped
        if self.stop.warmup_auto:
            self._find_steady(now_s)
        if self.wants_backlog:
            growth = backlog_growth(self.backlog, now_s)
            if growth is not None and growth.unbounded:
                evidence = {
                    "backlog_slope_per_s": growth.slope,
                    "ci95_low": growth.low,
                    "ci95_high": growth.high,
                    "span_s": growth.span_s,
                    "mean_backlog": growth.mean,
                }
                self.stopped = AutoStop(OVER_SATURATED, now_s, evidence)
                return self.stopped
        start = self.window_start_s
        # what finished by now is complete only up to the longest recent request ago: the requests
        # sent since, and their tokens, are partly still in flight (a slow one the more likely)
        until = now_s - max(self.recent_e2e, default=0.0)
        if self.stop.duration_auto and start is not None and until > start:
            sent = np.asarray(self.samples.sent, dtype=np.float64)
            n = int(np.count_nonzero((sent >= start) & (sent < until)))
            # judged again once the window grew by REJUDGE_GROWTH: a long point's sort stays cheap
            if n >= self.stop.auto_min_requests and n >= self._judged_n * (1 + REJUDGE_GROWTH):
                self._judged_n = n
                found = figures(self.samples, start, until)
                self._passes = self._passes + 1 if precise(found, self.stop.auto_precision) else 0
                if self._passes >= PRECISE_PASSES:
                    evidence = {name: i.relative for name, i in found.items() if i is not None}
                    self.stopped = AutoStop(PRECISE, now_s, evidence)
        return self.stopped

    def _find_steady(self, now_s: float) -> None:
        # a window is complete once the requests sent in it finished: up to the longest recent E2E ago
        until = now_s - max(self.recent_e2e, default=0.0)
        complete = steady_windows(self.windows, self.start_s, self.ramp_end_s, until, self.window_s)
        if len(complete) == self._judged:
            return  # judged once per completed window
        self._judged = len(complete)
        i = steady_start(complete)
        start = None if i is None else complete[i].start_s
        if start != self.window_start_s:
            self._judged_n = self._passes = 0  # a new window: judged afresh
        self.window_start_s = start
        if i is not None:
            self.steady_at_s = now_s


def stop_facts(monitor: PointMonitor, reason: str, at_s: float, window_start_s: float) -> AutoStopFacts:
    """What a point that judged itself says of its stop (samples.jsonl's ``auto_stop``): why and
    when, with --duration auto its figures' precision over its window [window start, ``at_s``), and
    an over-saturated point's backlog evidence."""
    stopped = monitor.stopped
    backlog = None
    if stopped is not None and stopped.reason == OVER_SATURATED:
        e = stopped.evidence
        backlog = Backlog(
            slope_per_s=e["backlog_slope_per_s"],
            ci95_low=e["ci95_low"],
            ci95_high=e["ci95_high"],
            span_s=e["span_s"],
            mean_backlog=e["mean_backlog"],
        )
    precision = None
    if monitor.stop.duration_auto:
        found = figures(monitor.samples, window_start_s, at_s)
        precision = {name: _precision(found[name]) for name in REPORTED}
    return AutoStopFacts(
        reason=reason,
        at_s=at_s,
        precision_target=monitor.stop.auto_precision if monitor.stop.duration_auto else None,
        precision=precision,
        backlog=backlog,
    )


def _precision(interval: Interval | None) -> FigurePrecision | None:
    if interval is None:
        return None
    rel = interval.relative
    return FigurePrecision(
        value=interval.value, low=interval.low, high=interval.high, relative=rel if math.isfinite(rel) else None
    )


def steady_windows(
    windows: dict[int, WindowStats], start_s: float, ramp_end_s: float, end_s: float, window_s: float
) -> list[WindowStats]:
    """The complete windows (of ``window_s`` from ``start_s``) after the ramp-up that end by
    ``end_s``, each with its tally (empty where nothing came)."""
    found = []
    for i, (a, b) in enumerate(window_edges(start_s, end_s, window_s)):
        if a >= ramp_end_s - 1e-9:
            found.append(windows.get(i) or WindowStats(a, b))
    return found


def steady_state_of(
    records: Iterable[RequestRecord],
    start_s: float,
    ramp_end_s: float,
    end_s: float,
    window_s: float,
    tokens: Sequence[float] | None = None,
) -> float | None:
    """Where steady state began (run clock) over a finished point's records, by the same rule
    (None: never within the point). ``tokens``: output tokens per ``window_s`` window from
    ``start_s`` (the time series' tally), since finished records may keep only their first and
    last chunk times; without it they are counted from the records' chunks."""
    stop = StopConfig(max_requests=1, window_s=window_s, warmup_auto=True)
    monitor = PointMonitor(stop, start_s, ramp_end_s, ramp_end_s, open_loop=False)
    for record in records:
        if tokens is None:
            monitor.observe(record)
        elif record.ok and record.ttft_s is not None and record.sent_s is not None and record.sent_s >= ramp_end_s:
            monitor.window_at(record.sent_s).add_ttft(record.ttft_s)
    if tokens is not None:
        for i, count in enumerate(tokens):
            a = start_s + i * window_s
            if a >= ramp_end_s - 1e-9:
                monitor.window_at(a + window_s / 2).tokens = float(count)
    complete = steady_windows(monitor.windows, start_s, ramp_end_s, end_s, window_s)
    found = steady_start(complete)
    return None if found is None else complete[found].start_s


__all__ = ["STEADY_WINDOWS", "AutoStop", "PointMonitor", "figures", "precise", "steady_state_of", "stop_facts"]
