"""The gate's tests (gate/stats.py): Welch's t as scipy computes it, and the percentile z-test with
bootstrap standard errors holding its size under the null and finding a shifted tail."""

from __future__ import annotations

import numpy as np
import pytest

from tokenbench.compare.stats import bootstrap_se, percentile_p, welch_p


def test_welch_is_scipys() -> None:
    from scipy import stats

    rng = np.random.default_rng(3)
    a, b = rng.normal(1.0, 0.2, 50), rng.normal(1.1, 0.4, 80)
    assert welch_p(a, b) == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue, rel=1e-9)
    assert welch_p(a[:1], b) is None
    assert welch_p(np.ones(3), np.ones(4)) == 1.0 and welch_p(np.ones(3), np.full(3, 2.0)) is None


def test_bootstrap_se_of_the_median_matches_theory() -> None:
    # the median of n normal draws has SE ~ sigma * sqrt(pi / (2 n))
    rng = np.random.default_rng(1)
    x = rng.normal(0.0, 1.0, 2000)
    assert bootstrap_se(x, 50.0, np.random.default_rng(0)) == pytest.approx(np.sqrt(np.pi / 4000), rel=0.15)


def test_percentile_test_size_and_power() -> None:
    """Under the null about 5% of 200 seeded pairs reject at 0.05 (not 0, not 20%); a 10% shift
    of the p90 is found every time."""
    rejects = found = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        a, b = 0.05 + rng.gamma(2.0, 0.002, 200), 0.05 + rng.gamma(2.0, 0.002, 200)
        rejects += percentile_p(a, b, 90.0) < 0.05
        if seed < 20:
            found += percentile_p(a, b * 1.10, 90.0) < 0.05
    assert 3 <= rejects <= 20
    assert found == 20
    assert percentile_p(np.ones(5), np.ones(5), 90.0) == 1.0 and percentile_p(np.ones(1), np.ones(5), 90.0) is None
