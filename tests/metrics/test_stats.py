"""Distributions (metrics.stats): count, mean, sample std, percentiles, on known values."""

import pytest

from tokenbench.metrics import distribution


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
    import numpy as np

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
