"""When a point's figures stopped drifting, and when its queue grows without bound (issue 25; pure).

**Steady state** (``steady_start``). The point after its ramp-up is cut into fixed windows (the
run's ``--window``). Steady state begins at the start of the earliest window *i* such that, over
the ``STEADY_WINDOWS`` (K) complete windows i .. i+K-1, neither figure drifts:

- TTFT: the least-squares slope of every ok request's TTFT against its window's midpoint (all the
  block's requests, not K window means: a step is seen as well as a ramp);
- output tok/s: the slope of the K windows' tokens/s against their midpoints.

A figure *drifts* when its slope's 95% confidence interval (Student t) excludes 0 **and** the
fitted change across the block is at least ``DRIFT_FLOOR`` (1%) of the block's mean: on a long
block a tiny, harmless slope is otherwise always significant. The rule is causal (a block is
judged on its own windows), so ``--warmup auto`` can apply it while the point runs: its window
starts at the steady start found as soon as the K windows after it are complete. A transient that
ends inside window i is in the block of i and is seen there; one that ends in window i-1 is not:
the start found is within one window of the transient's end. The TTFT slope's interval assumes
independent requests: on a real server correlated TTFTs make it narrower, so steady state is
declared later, never earlier.

**Over-saturation** (``backlog_growth``). Under open loop the backlog (requests sent and not yet
finished, plus those waiting in the client for a slot) is sampled as the point runs. Over the last
``BACKLOG_SPAN_S`` the samples are averaged into ``BACKLOG_BINS`` bins (which thins the samples'
autocorrelation) and the bins' least-squares slope is taken: the backlog grows without bound when
the slope's 95% interval lies above 0 **and** the fitted growth across the span is at least
``BACKLOG_MIN_GROWTH`` requests and half the span's mean backlog (a stable queue wanders; one that
grows by half its size in seconds is not stable).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats  # type: ignore[import-untyped]  # scipy-stubs is not a dependency

from ..config import BACKLOG_SPAN_S

STEADY_WINDOWS = 4  # K: complete windows without drift that make a steady start
DRIFT_FLOOR = 0.01  # a fitted change across the block below 1% of its mean is no drift
# BACKLOG_SPAN_S (config: --stop-oversaturated's help names it): the sustained span of the backlog's slope
BACKLOG_BINS = 8
BACKLOG_MIN_GROWTH = 5.0  # requests: a smaller growth across the span is not a trend


@dataclass(frozen=True)
class Trend:
    """A least-squares slope (per second) and its 95% interval; ``change``: fitted across the span."""

    slope: float
    low: float
    high: float
    mean: float
    change: float

    @property
    def significant(self) -> bool:
        return self.low > 0 or self.high < 0

    @property
    def drifts(self) -> bool:
        return self.significant and abs(self.change) >= DRIFT_FLOOR * abs(self.mean)


@dataclass
class WindowStats:
    """One window's sums: its ok requests' TTFTs (by when their first chunk came) and its tokens."""

    start_s: float
    end_s: float
    n: int = 0
    ttft_sum: float = 0.0
    ttft_sumsq: float = 0.0
    tokens: float = 0.0

    def add_ttft(self, ttft: float) -> None:
        self.n += 1
        self.ttft_sum += ttft
        self.ttft_sumsq += ttft * ttft

    @property
    def mid_s(self) -> float:
        return (self.start_s + self.end_s) / 2.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / (self.end_s - self.start_s)


def trend(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> Trend | None:
    """The least-squares slope of y on x with its 95% t interval; None below 3 points or one x."""
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return _trend_sums(len(xs), xs.sum(), ys.sum(), (xs * xs).sum(), (xs * ys).sum(), (ys * ys).sum(), _span(xs))


def _span(xs: np.ndarray) -> float:
    return float(xs.max() - xs.min()) if xs.size else 0.0


def _trend_sums(n: float, sx: float, sy: float, sxx: float, sxy: float, syy: float, span: float) -> Trend | None:
    """The slope from sufficient sums (n points; sums of x, y, x², xy, y²)."""
    if n < 3:
        return None
    sxx_c = sxx - sx * sx / n
    if sxx_c <= 0:
        return None
    sxy_c = sxy - sx * sy / n
    slope = sxy_c / sxx_c
    ssr = max(0.0, (syy - sy * sy / n) - slope * sxy_c)
    se = math.sqrt(ssr / (n - 2) / sxx_c)
    half = float(stats.t.ppf(0.975, n - 2)) * se
    return Trend(slope, slope - half, slope + half, sy / n, slope * span)


def ttft_trend(block: Sequence[WindowStats]) -> Trend | None:
    """The slope of the block's per-request TTFTs against their windows' midpoints."""
    n = sum(w.n for w in block)
    sx = sum(w.n * w.mid_s for w in block)
    sxx = sum(w.n * w.mid_s**2 for w in block)
    sy = sum(w.ttft_sum for w in block)
    sxy = sum(w.mid_s * w.ttft_sum for w in block)
    syy = sum(w.ttft_sumsq for w in block)
    span = block[-1].end_s - block[0].start_s if block else 0.0
    return _trend_sums(n, sx, sy, sxx, sxy, syy, span)


def throughput_trend(block: Sequence[WindowStats]) -> Trend | None:
    trend_ = trend([w.mid_s for w in block], [w.tokens_per_s for w in block])
    if trend_ is None:
        return None
    span = block[-1].end_s - block[0].start_s
    return Trend(trend_.slope, trend_.low, trend_.high, trend_.mean, trend_.slope * span)


def drifting(block: Sequence[WindowStats]) -> bool:
    """Either figure drifts over the block (module doc); a block without enough data drifts."""
    ttft = ttft_trend(block)
    if ttft is None:
        return True
    tput = throughput_trend(block)
    return ttft.drifts or (tput is not None and tput.drifts)


def steady_start(windows: Sequence[WindowStats], k: int = STEADY_WINDOWS) -> int | None:
    """The index of the window where steady state begins (the first with K windows from it that do
    not drift), among ``windows``: complete windows after the ramp-up, in time order; None: not
    (yet) steady."""
    for i in range(len(windows) - k + 1):
        if not drifting(windows[i : i + k]):
            return i
    return None


def window_edges(start_s: float, end_s: float, window_s: float) -> list[tuple[float, float]]:
    """The complete windows of ``window_s`` from ``start_s`` that end by ``end_s``."""
    count = int(math.floor((end_s - start_s) / window_s + 1e-9))
    return [(start_s + i * window_s, start_s + (i + 1) * window_s) for i in range(max(0, count))]


@dataclass(frozen=True)
class BacklogGrowth:
    """The evidence of a backlog growing without bound: the slope (requests/s) and its 95% CI."""

    slope: float
    low: float
    high: float
    span_s: float
    mean: float

    @property
    def unbounded(self) -> bool:
        growth = self.slope * self.span_s
        return self.low > 0 and growth >= max(BACKLOG_MIN_GROWTH, 0.5 * self.mean)


def backlog_growth(
    samples: Sequence[tuple[float, int]], now_s: float, span_s: float = BACKLOG_SPAN_S, bins: int = BACKLOG_BINS
) -> BacklogGrowth | None:
    """The backlog's slope over the last ``span_s`` before ``now_s`` from (time, backlog) samples,
    averaged into ``bins`` bins; None until the samples cover the span (every bin has one)."""
    t = np.array([s for s, _ in samples], dtype=np.float64)
    b = np.array([v for _, v in samples], dtype=np.float64)
    start = now_s - span_s
    if t.size == 0 or t.min() > start + span_s / bins:
        return None
    edges = np.linspace(start, now_s, bins + 1)
    which = np.searchsorted(edges, t, side="right") - 1
    inside = (which >= 0) & (which < bins)
    counts = np.bincount(which[inside], minlength=bins)
    if (counts == 0).any():
        return None
    means = np.bincount(which[inside], weights=b[inside], minlength=bins) / counts
    mids = (edges[:-1] + edges[1:]) / 2.0
    fit = trend(mids, means)
    if fit is None:
        return None
    return BacklogGrowth(fit.slope, fit.low, fit.high, span_s, float(means.mean()))
