"""A graded dataset's accuracy over a point's population (the client grades each reply when it
ends: RequestRecord.grade, datasets/graders.py).

    accuracy = correct / graded

``graded``: the successful requests of the population (the point's window) that carried an
expected answer; ``correct``: of them, the replies the grader found the expected answer in. A
failed request has no reply to grade: it is counted apart (``not_graded``) and in error_rate,
never as wrong. The 95% interval is Wilson's score interval (scipy.stats.binomtest's
``proportion_ci(method="wilson")`` gives the same: tests/metrics/test_accuracy.py), which stays
inside [0, 1] and is honest at 0 and n correct, where the normal approximation's collapses to a
point. Added to a point only when some request carried an expected answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from scipy.special import ndtri  # type: ignore[import-untyped]  # scipy-stubs is not a dependency

from tokenbench.records import Outcome, RequestRecord
from tokenbench.results.run import Accuracy

CONFIDENCE = 0.95
INTERVAL = "wilson 95%"  # results.json's accuracy.interval


def wilson_interval(correct: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Wilson's score interval for ``correct`` successes of ``n`` (None: n is 0)."""
    if n <= 0:
        return None
    z = float(ndtri(0.5 + confidence / 2))
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def two_proportion_p(correct_a: int, n_a: int, correct_b: int, n_b: int) -> float | None:
    """Two-sided p of the pooled two-proportion z-test (the score test of p_a = p_b); None when a
    side has nothing graded, 1.0 when the pooled proportion is 0 or 1 (no difference possible)."""
    if n_a <= 0 or n_b <= 0:
        return None
    pooled = (correct_a + correct_b) / (n_a + n_b)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    if se == 0:
        return 1.0
    z = (correct_b / n_b - correct_a / n_a) / se
    return float(math.erfc(abs(z) / math.sqrt(2)))


def accuracy_metrics(population: Sequence[RequestRecord]) -> dict[str, Any]:
    """``accuracy`` of a point (a PointMetrics field), only when some request of the population
    carried an expected answer."""
    asked = [g for r in population if (g := r.grade) is not None]
    if not asked:
        return {}
    graded = [r.grade for r in population if r.grade is not None and r.outcome is Outcome.OK and r.grade.graded]
    correct = sum(1 for g in graded if g is not None and g.correct)
    interval = wilson_interval(correct, len(graded))
    return {
        "accuracy": Accuracy(
            grader=",".join(sorted({g.grader for g in asked if g.grader})),
            requests=len(asked),
            graded=len(graded),
            not_graded=len(asked) - len(graded),
            correct=correct,
            accuracy=correct / len(graded) if graded else None,
            ci_low=interval[0] if interval else None,
            ci_high=interval[1] if interval else None,
            interval=INTERVAL,
        )
    }
