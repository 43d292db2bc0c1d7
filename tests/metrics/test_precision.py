"""Batch means and the order-statistic bound: known answers, and coverage on correlated series."""

import math

import numpy as np
import pytest

from tokenbench.metrics.precision import BATCHES, batch_means, quantile_bound


def ar1(rng: np.random.Generator, n: int, phi: float, mean: float = 10.0) -> np.ndarray:
    """A stationary AR(1) series around ``mean`` (unit innovations): correlated like a queue's figures."""
    # imported here: scipy.signal loads scipy.stats, 0.5 s of every xdist worker's collection
    from scipy.signal import lfilter

    e = rng.standard_normal(n)
    e[0] /= math.sqrt(1 - phi * phi)  # started in its stationary law
    return mean + lfilter([1.0], [1.0, -phi], e)


def test_batch_means_known_answer():
    # ten batches of two: batch means 1..10, grand mean 5.5, sd of the means sqrt(55/6)
    values = [v for b in range(1, 11) for v in (b - 0.5, b + 0.5)]
    got = batch_means(values, batches=10)
    assert got is not None
    half = 2.2621571627409915 * math.sqrt(55 / 6) / math.sqrt(10)  # t(0.975, 9)
    assert got.value == pytest.approx(5.5)
    assert got.half_width == pytest.approx(half)
    assert got.relative == pytest.approx(half / 5.5)


def test_batch_means_needs_two_per_batch():
    assert batch_means(list(range(2 * BATCHES - 1))) is None
    assert batch_means(list(range(2 * BATCHES))) is not None


def test_batch_means_covers_a_correlated_mean_where_the_iid_interval_does_not():
    """20 seeded AR(1) series (phi 0.9): the true mean (10) lies in the 95% batch-means interval
    in about 19 of 20; the naive iid interval (sigma/sqrt(n)), far too narrow here, misses often."""
    covered = naive = 0
    for seed in range(20):
        x = ar1(np.random.default_rng(seed), 20000, 0.9)
        got = batch_means(x)
        assert got is not None
        covered += got.low <= 10.0 <= got.high
        half = 1.96 * x.std(ddof=1) / math.sqrt(x.size)
        naive += abs(x.mean() - 10.0) <= half
    assert covered >= 17  # measured: 20 of 20 (and 381 of 400 series of 2000 at phi 0.5 below)
    assert naive <= 12  # measured: 6 of 20: the correlation the batch means account for


def test_batch_means_coverage_is_about_95_percent():
    rng = np.random.default_rng(7)
    hits = sum(
        (got := batch_means(ar1(rng, 2000, 0.5))) is not None and got.low <= 10.0 <= got.high for _ in range(400)
    )
    assert 0.91 <= hits / 400 <= 0.98


def test_quantile_bound_is_order_statistics():
    x = np.random.default_rng(0).permutation(np.arange(1, 1001, dtype=float))
    got = quantile_bound(x, 0.9)
    assert got is not None
    spread = 1.959963984540054 * math.sqrt(1000 * 0.9 * 0.1)
    assert got.low == math.floor(900 - spread)
    assert got.high >= math.ceil(900 + spread)
    assert got.low <= got.value <= got.high


def test_quantile_bound_needs_enough_samples_for_its_tail():
    assert quantile_bound(np.arange(50.0), 0.99) is None  # the upper rank would pass n
    assert quantile_bound(np.random.default_rng(0).permutation(np.arange(2000.0)), 0.99) is not None


def test_quantile_bound_coverage_on_correlated_series():
    """p90 of an AR(1) series (phi 0.5): the marginal is normal with variance 1/(1-phi^2)."""
    true = 10.0 + 1.2815515655446004 / math.sqrt(1 - 0.25)
    rng = np.random.default_rng(3)
    hits = sum(
        (got := quantile_bound(ar1(rng, 3000, 0.5), 0.9)) is not None and got.low <= true <= got.high
        for _ in range(200)
    )
    assert hits / 200 >= 0.9
