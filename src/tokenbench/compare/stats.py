"""The gate's two-sample tests on per-request (or per-window) values (pure, numpy).

- A mean: Welch's t-test (unequal variances, Welch-Satterthwaite degrees of freedom).
- A percentile: a two-sample z-test on the difference of the sample percentiles, each one's
  standard error estimated from ``BOOTSTRAP_REPS`` seeded bootstrap resamples of its own run's
  values (so the p-value is continuous and deterministic, not a count of resamples). Why not
  Mann-Whitney: it tests a shift of the whole distribution, and a gate on p90 must not fail on a
  change of the median alone, nor pass a change of the tail the rank sum dilutes.

Both treat the values as independent draws. Requests of one run are not quite independent (they
share a queue); the percentile's bootstrap and Welch's variance then understate the error a
little, which the multiple-test correction and the gate's limit (a change must also exceed it)
absorb. Trials, where there are some, are independent: compare's Welch over trials is used then.
"""

from __future__ import annotations

import math

import numpy as np

from tokenbench.compare import welch_test

BOOTSTRAP_REPS = 1000
_BATCH_VALUES = 2_000_000  # values resampled at once (16 MB)


def welch_p(a: np.ndarray, b: np.ndarray) -> float | None:
    """Two-sided p of Welch's t-test; None below 2 values a side or without variance on both."""
    if a.size < 2 or b.size < 2:
        return None
    var_a, var_b = float(a.var(ddof=1)), float(b.var(ddof=1))
    mean_a, mean_b = float(a.mean()), float(b.mean())
    if var_a + var_b == 0:
        return 1.0 if mean_a == mean_b else None
    return welch_test(mean_a, var_a, a.size, mean_b, var_b, b.size)


def bootstrap_se(values: np.ndarray, q: float, rng: np.random.Generator, reps: int = BOOTSTRAP_REPS) -> float:
    """The standard error of the ``q``-th percentile (numpy's linear rule, as results.json's) of
    ``values`` over ``reps`` resamples with replacement."""
    n = values.size
    batch = max(1, min(reps, _BATCH_VALUES // max(n, 1)))
    estimates: list[np.ndarray] = []
    done = 0
    while done < reps:
        k = min(batch, reps - done)
        draws = values[rng.integers(0, n, size=(k, n))]
        estimates.append(np.percentile(draws, q, axis=1))
        done += k
    return float(np.concatenate(estimates).std(ddof=1))


def percentile_p(a: np.ndarray, b: np.ndarray, q: float, seed: int = 0) -> float | None:
    """Two-sided p of the z-test of percentile ``q`` of ``b`` against ``a`` (bootstrap standard
    errors, seeded); None below 2 values a side, or when neither percentile varies but they differ."""
    if a.size < 2 or b.size < 2:
        return None
    rng = np.random.default_rng(seed)
    diff = float(np.percentile(b, q) - np.percentile(a, q))
    se = math.hypot(bootstrap_se(a, q, rng), bootstrap_se(b, q, rng))
    if se == 0:
        return 1.0 if diff == 0 else None
    return float(math.erfc(abs(diff / se) / math.sqrt(2)))
