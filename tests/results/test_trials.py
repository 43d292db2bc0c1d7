"""A metric over trials (results/trials.py): mean ± Student-t 95% CI, with known answers."""

import math

import pytest

from tokenbench.results import NO_TRIALS, TrialStat, mean_ci95


def test_mean_ci95_known_answer():
    # values 10, 12, 14: mean 12, s = 2, t(0.975, 2) = 4.3027 -> half-width 4.3027 * 2 / sqrt(3)
    r = mean_ci95([10, 12, 14])
    assert r.mean == 12 and r.n == 3
    assert r.ci95 == pytest.approx(4.302653 * 2 / math.sqrt(3), rel=1e-5)
    assert mean_ci95([5.0]).ci95 is None  # one trial: unknown, not 0
    assert mean_ci95([None, None]) == TrialStat(mean=None, ci95=None, n=0, values=[]) == NO_TRIALS


def test_none_and_nan_are_left_out_of_n():
    r = mean_ci95([1.0, None, math.nan, 3.0])
    assert r.n == 2 and r.values == [1.0, 3.0] and r.mean == 2.0


def test_as_experiment_json_holds_it():
    assert mean_ci95([2.0]).model_dump() == {"mean": 2.0, "ci95": None, "n": 1, "values": [2.0]}
