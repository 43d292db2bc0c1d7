"""Accuracy over a point's population (metrics/accuracy.py): the counts, the population (failed
requests not graded, counted apart), Wilson's interval against scipy's, and the two-proportion
test against scipy's chi-square test of the 2x2 table (the same test, z squared)."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest, chi2_contingency

from tokenbench.metrics.accuracy import accuracy_metrics, two_proportion_p, wilson_interval
from tokenbench.records import Grade, Outcome, RequestRecord


@pytest.mark.parametrize(("k", "n"), [(0, 1), (1, 1), (7, 10), (0, 20), (20, 20), (15, 20), (613, 1319)])
def test_wilson_interval_is_scipys(k: int, n: int) -> None:
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_no_graded_request_has_no_interval() -> None:
    assert wilson_interval(0, 0) is None


@pytest.mark.parametrize(("a", "n_a", "b", "n_b"), [(40, 40, 20, 40), (40, 40, 38, 40), (15, 20, 7, 20), (3, 9, 5, 11)])
def test_two_proportion_p_is_the_chi_square_of_the_table(a: int, n_a: int, b: int, n_b: int) -> None:
    _, p, _, _ = chi2_contingency([[a, n_a - a], [b, n_b - b]], correction=False)
    assert two_proportion_p(a, n_a, b, n_b) == pytest.approx(p, rel=1e-9)


def test_identical_all_correct_sides_cannot_differ() -> None:
    assert two_proportion_p(10, 10, 10, 10) == 1.0 and two_proportion_p(0, 0, 1, 1) is None


def _record(i: int, outcome: Outcome, grade: Grade | None) -> RequestRecord:
    return RequestRecord(point=0, id=i, scheduled_s=float(i), sent_s=float(i), outcome=outcome, grade=grade)


def test_failed_requests_are_not_graded_and_counted_apart() -> None:
    records = [_record(i, Outcome.OK, Grade("numeric", True, i < 6, "1")) for i in range(8)]  # 6 of 8 correct
    records += [
        _record(8, Outcome.HTTP_ERROR, Grade("numeric", False)),
        _record(9, Outcome.TIMEOUT, Grade("numeric", False)),
    ]
    records.append(_record(10, Outcome.OK, None))  # a row without an expected answer: not in it
    a = accuracy_metrics(records)["accuracy"]
    assert (a.grader, a.requests, a.graded, a.not_graded, a.correct, a.accuracy) == ("numeric", 10, 8, 2, 6, 0.75)
    assert (a.ci_low, a.ci_high) == pytest.approx(wilson_interval(6, 8))
    assert accuracy_metrics([_record(0, Outcome.OK, None)]) == {}  # no graded row: the point keeps its shape


def test_nothing_graded_has_no_accuracy() -> None:
    a = accuracy_metrics([_record(0, Outcome.HTTP_ERROR, Grade("exact", False))])["accuracy"]
    assert (a.graded, a.not_graded, a.accuracy, a.ci_low) == (0, 1, None, None)
