"""Distributions (metrics.stats): count, mean, sample std, percentiles, on known values; values
held by their repeat count (WeightedValues) give the distribution of the values repeated."""

import numpy as np
import pytest

from tokenbench.metrics import distribution
from tokenbench.metrics.stats import WeightedValues


def test_empty_distribution_is_none_not_zero():
    d = distribution([])
    assert d.count == 0 and d.mean is None and d.p99 is None


def test_distributions_use_sample_std_and_hide_p999_below_1000():
    d = distribution([1.0, 2.0, 3.0, 4.0])
    assert d.std == pytest.approx(1.2909944)  # sample (n - 1), not population (1.118)
    assert d.p999 is None and d.p99 is not None
    assert distribution([1.0]).std is None
    assert distribution(float(i) for i in range(1000)).p999 == pytest.approx(998.001)


def test_sample_std_sums_squares_a_block_at_a_time(monkeypatch):
    from tokenbench import metrics

    values = np.random.default_rng(3).exponential(0.02, 5000)
    assert metrics.stats._sample_std(values) == float(values.std(ddof=1))  # up to a block: numpy's own
    monkeypatch.setattr(metrics.stats, "_STD_BLOCK", 1024)
    assert metrics.stats._sample_std(values) == pytest.approx(float(values.std(ddof=1)), rel=1e-12)
    kept = values.copy()
    d = distribution(kept, consume=True)  # percentiles may reorder it in place
    assert d.mean == float(values.mean()) and d.p50 == float(np.percentile(values, 50))
    assert distribution(values) == distribution(values.tolist())
    before = values.copy()
    assert distribution(values).p90 == float(np.percentile(values, 90))
    assert (values == before).all()  # not consumed: left as it was


def weighted_distribution(values, weights):
    """``distribution(np.repeat(values, weights))`` without the repeat."""
    held = WeightedValues()
    held.add(values, weights)
    return held.distribution()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weighted_distribution_is_the_repeated_values_distribution(seed):
    rng = np.random.default_rng(seed)
    values = rng.exponential(0.02, 700)
    weights = rng.integers(0, 5, 700).astype(np.uint32)
    expected = distribution(np.repeat(values, weights))
    got = weighted_distribution(values, weights)
    for stat in ("count", "min", "p50", "p90", "p95", "p99", "p999", "max"):
        assert getattr(got, stat) == getattr(expected, stat), stat
    assert got.mean == pytest.approx(expected.mean, rel=1e-12)
    assert got.std == pytest.approx(expected.std, rel=1e-9)
    assert weighted_distribution(values[:1], np.array([1], dtype=np.uint32)).std is None
    assert weighted_distribution(values, np.zeros(700, dtype=np.uint32)).count == 0
