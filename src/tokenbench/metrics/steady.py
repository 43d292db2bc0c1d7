"""When a point's figures stopped drifting, and when its queue grows without bound ( pure).

**Steady state** (``steady_start``). The point after its ramp-up is cut into fixed windows (the
run's ``--window``). Steady state begins at the start of the earliest window *i* such that, over
all the complete windows from i to now (at least ``STEADY_WINDOWS``, K), neither figure drifts:

- TTFT: the least-squares slope of every ok request's TTFT against the midpoint of the window it
  was sent in (all the requests, not window means; by send time, since the server's state when a
  request arrives sets its TTFT: a transient's last slow requests do not spill into the next window);
- output tok/s: the slope of the windows' tokens/s against their midpoints;
- and, since a slope is blind to a tail whose first window alone is off (a step just before it:
  the queue still filling, the first replies not yet back), the first window must agree with the
  rest: TTFT, its requests' mean against the rest's (Welch's z); tok/s, inside the rest's
  prediction interval (t).

Each test is at the 99% level (``ALPHA``: four tests of one tail, so a steady tail is called
drifting about 4% of the time, not 20%), and a difference counts only when it is at least
``DRIFT_FLOOR`` (2%) of the figure: on a long tail a tiny, harmless slope is otherwise always
significant. Judging the whole tail, not the last K windows, keeps a plateau (a slow warm-up
longer than K windows, then faster) from passing as steady. While the point runs the start can
only be judged on the windows so far, so ``--warmup auto`` moves its window's start as later
windows arrive; results give the start over the whole point. A transient that ends inside window
i is in the tail of i and is seen there (if large enough to be significant); one that ends in
window i-1 is not: the start is within one window of the transient's end. The TTFT slope's
interval assumes independent requests: on a real server correlated TTFTs make it narrower, so
steady state is declared later, never earlier.

**Over-saturation** (``backlog_growth``). Under open loop the backlog (requests sent and not yet
finished, plus those waiting in the client for a slot) is sampled as the point runs. Over the
point so far (once it lasted ``BACKLOG_SPAN_S``) the samples are averaged into ``BACKLOG_BINS``
bins (which thins their autocorrelation) and the bins' least-squares slope is taken: the backlog
grows without bound when the slope's 95% interval lies above 0 **and** the fitted growth across
the span is at least ``BACKLOG_MIN_GROWTH`` requests and at least the span's mean backlog (a
stable queue wanders around its mean; one that grows by its whole mean size over the point is
not stable: a backlog growing linearly from empty grows by twice its mean).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Student's t quantile from scipy.special (stdtrit), not scipy.stats: importing scipy.stats took 0.9 s
# of every `tokenbench run`'s start (the runner imports this module)
from scipy.special import stdtrit  # type: ignore[import-untyped]  # scipy-stubs is not a dependency

from tokenbench.config import BACKLOG_SPAN_S

STEADY_WINDOWS = 4  # K: complete windows without drift that make a steady start
DRIFT_FLOOR = 0.02  # a change below 2% of the figure is no drift
ALPHA = 0.01  # each drift test's level
# BACKLOG_SPAN_S (config: --stop-oversaturated's help names it): the sustained span of the backlog's slope
BACKLOG_BINS = 8
Z_ALPHA = 2.5758293035489004  # two-sided, ALPHA
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
    """One window's sums: the TTFTs of the ok requests sent in it, and the output tokens that came in it."""

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


def trend(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, alpha: float = 0.05) -> Trend | None:
    """The least-squares slope of y on x with its 1-alpha t interval; None below 3 points or one x."""
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    sums = (len(xs), xs.sum(), ys.sum(), (xs * xs).sum(), (xs * ys).sum(), (ys * ys).sum())
    return _trend_sums(*sums, _span(xs), alpha)


def _span(xs: np.ndarray) -> float:
    return float(xs.max() - xs.min()) if xs.size else 0.0


def _trend_sums(
    n: float, sx: float, sy: float, sxx: float, sxy: float, syy: float, span: float, alpha: float = 0.05
) -> Trend | None:
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
    half = float(stdtrit(n - 2, 1 - alpha / 2)) * se
    return Trend(slope, slope - half, slope + half, sy / n, slope * span)


def ttft_trend(block: Sequence[WindowStats], alpha: float = ALPHA) -> Trend | None:
    """The slope of the block's per-request TTFTs against their windows' midpoints."""
    n = sum(w.n for w in block)
    sx = sum(w.n * w.mid_s for w in block)
    sxx = sum(w.n * w.mid_s**2 for w in block)
    sy = sum(w.ttft_sum for w in block)
    sxy = sum(w.mid_s * w.ttft_sum for w in block)
    syy = sum(w.ttft_sumsq for w in block)
    span = block[-1].end_s - block[0].start_s if block else 0.0
    return _trend_sums(n, sx, sy, sxx, sxy, syy, span, alpha)


def throughput_trend(block: Sequence[WindowStats], alpha: float = ALPHA) -> Trend | None:
    fit = trend([w.mid_s for w in block], [w.tokens_per_s for w in block], alpha)
    if fit is None:
        return None
    span = block[-1].end_s - block[0].start_s
    return Trend(fit.slope, fit.low, fit.high, fit.mean, fit.slope * span)


def drifting(block: Sequence[WindowStats]) -> bool:
    """Either figure drifts over the block, or its first window is off (module doc); a block
    without enough data drifts."""
    ttft = ttft_trend(block)
    if ttft is None:
        return True
    tput = throughput_trend(block)
    return ttft.drifts or (tput is not None and tput.drifts) or first_window_off(block)


def first_window_off(block: Sequence[WindowStats]) -> bool:
    """The block's first window disagrees with the rest (module doc)."""
    first, rest = block[0], block[1:]
    n = sum(w.n for w in rest)
    if first.n >= 2 and n >= 2:
        m1, m2 = first.ttft_sum / first.n, sum(w.ttft_sum for w in rest) / n
        v1 = max(0.0, first.ttft_sumsq / first.n - m1 * m1) * first.n / (first.n - 1)
        v2 = max(0.0, sum(w.ttft_sumsq for w in rest) / n - m2 * m2) * n / (n - 1)
        se = math.sqrt(v1 / first.n + v2 / n)
        if abs(m1 - m2) >= DRIFT_FLOOR * abs(m2) and abs(m1 - m2) > Z_ALPHA * se:
            return True
    if len(rest) >= 2:
        y = np.array([w.tokens_per_s for w in rest])
        mean = float(y.mean())
        t = float(stdtrit(len(rest) - 1, 1 - ALPHA / 2))
        limit = t * float(y.std(ddof=1)) * math.sqrt(1 + 1 / len(rest))
        diff = abs(first.tokens_per_s - mean)
        if diff >= DRIFT_FLOOR * abs(mean) and diff > limit:
            return True
    return False


def steady_start(windows: Sequence[WindowStats], k: int = STEADY_WINDOWS) -> int | None:
    """The index of the window where steady state begins (the earliest from which every window
    to the last, at least K, does not drift), among ``windows``: complete windows after the
    ramp-up, in time order; None: not (yet) steady."""
    for i in range(len(windows) - k + 1):
        if not drifting(windows[i:]):
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
        return self.low > 0 and growth >= max(BACKLOG_MIN_GROWTH, self.mean)


def backlog_growth(
    samples: Sequence[tuple[float, int]], now_s: float, min_span_s: float = BACKLOG_SPAN_S, bins: int = BACKLOG_BINS
) -> BacklogGrowth | None:
    """The backlog's slope from the first sample to ``now_s`` (time, backlog) samples, averaged
    into ``bins`` bins (the empty ones left out); None until the samples span ``min_span_s`` (and
    fill half the bins)."""
    t = np.array([s for s, _ in samples], dtype=np.float64)
    b = np.array([v for _, v in samples], dtype=np.float64)
    if t.size == 0 or now_s - t.min() < min_span_s:
        return None
    start = float(t.min())
    span_s = now_s - start
    edges = np.linspace(start, now_s + 1e-9, bins + 1)
    which = np.searchsorted(edges, t, side="right") - 1
    inside = (which >= 0) & (which < bins)
    counts = np.bincount(which[inside], minlength=bins)
    filled = counts > 0  # a stalled loop samples nothing for a while: the bins it left empty are left out
    if int(filled.sum()) < bins // 2:
        return None
    means = np.bincount(which[inside], weights=b[inside], minlength=bins)[filled] / counts[filled]
    mids = ((edges[:-1] + edges[1:]) / 2.0)[filled]
    fit = trend(mids, means)
    if fit is None:
        return None
    return BacklogGrowth(fit.slope, fit.low, fit.high, span_s, float(means.mean()))
