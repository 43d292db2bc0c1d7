"""How precise a point's figures are (``--duration auto``): 95% confidence intervals that
stay valid when the samples are correlated, as a load point's are (pure, numpy + scipy).

Means (TTFT, TPOT): **batch means**. The series, in the order the requests were sent, is cut into
``BATCHES`` contiguous batches of equal size; the interval is the grand mean ± t(B-1) · s_B / √B,
s_B the standard deviation of the batch means. Why it holds for correlated samples: neighbouring
requests share a batch, a queue and a server state, so their figures are correlated and the naive
σ/√n is too narrow; but the means of long contiguous batches are nearly independent (the
correlation between two batches is only that across their shared edge, which shrinks as the
batches grow) and nearly normal (the central limit theorem for weakly dependent series), so the
t-interval over B batch means is the standard estimator of the mean's variance for a stationary
series (the "fixed number of batches" method: the batches grow with the point).

Output tok/s: the same over time, not requests: the tokens/s of short time bins in time order
(autostop.TOKEN_BIN_S) are the series, so each batch is an equal span of the window.

Percentiles (p90, p99): the **order-statistic (binomial) bound**: the 95% interval of the q-th
quantile is [x_(l), x_(u)] with l, u = nq ∓ 1.96·√(nq(1-q)) (the count of samples below the true
quantile is binomial). For correlated samples n is replaced by the effective sample size that
batch means of the indicator series 1{x ≤ x̂_q} give (its variance over the iid variance q(1-q)/n),
never more than n. Where l or u falls outside 1..n there is no bound yet (None).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Student's t quantile from scipy.special (stdtrit), not scipy.stats: importing scipy.stats took 0.9 s
# of every `tokenbench run`'s start (the runner imports this module)
from scipy.special import stdtrit  # type: ignore[import-untyped]  # scipy-stubs is not a dependency

BATCHES = 20  # batch means: this many batches, whatever the length (t with 19 degrees of freedom)
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Interval:
    """A figure and its 95% interval: ``half_width`` / |value| is its relative precision."""

    value: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    @property
    def relative(self) -> float:
        """The half-width relative to the value (inf when the value is 0)."""
        return self.half_width / abs(self.value) if self.value else math.inf


def batch_means(values: Sequence[float] | np.ndarray, batches: int = BATCHES) -> Interval | None:
    """The mean of ``values`` (a series in time order) and its 95% batch-means interval; None with
    fewer than two samples per batch."""
    x = np.asarray(values, dtype=np.float64)
    size = x.size // batches
    if size < 2:
        return None
    # the first samples that do not fill a batch are dropped from the batches, not from the mean
    means = x[x.size - size * batches :].reshape(batches, size).mean(axis=1)
    mean = float(x.mean())
    half = float(stdtrit(batches - 1, 0.975) * means.std(ddof=1) / math.sqrt(batches))
    return Interval(mean, mean - half, mean + half)


def quantile_bound(values: Sequence[float] | np.ndarray, q: float, batches: int = BATCHES) -> Interval | None:
    """The q-th quantile (0 < q < 1) of ``values`` (time order) and its 95% order-statistic bound,
    with n shrunk to the effective sample size of the indicator series (module doc); None while
    the bound does not exist (too few samples for this q)."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n < 2:
        return None
    point = float(np.quantile(x, q))
    n_eff = float(n)
    below = batch_means((x <= point).astype(np.float64), batches)
    if below is not None:
        iid_var = q * (1.0 - q) / n
        bm_var = (below.half_width / stdtrit(batches - 1, 0.975)) ** 2
        if bm_var > iid_var > 0:
            n_eff = n * iid_var / bm_var
    spread = Z95 * math.sqrt(q * (1.0 - q) / n_eff) * n  # in ranks
    lo_rank, hi_rank = math.floor(n * q - spread), math.ceil(n * q + spread)
    if lo_rank < 1 or hi_rank > n:
        return None
    ordered = np.sort(x)
    return Interval(point, float(ordered[lo_rank - 1]), float(ordered[hi_rank - 1]))
