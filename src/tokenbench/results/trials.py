"""A metric over an experiment's trials: ``TrialStat`` (mean ± 95% CI) and the one function that
makes it (``mean_ci95``), used by experiment.json's aggregates, the report and compare."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from tokenbench.common.frozen import FrozenModel

if TYPE_CHECKING:
    from tokenbench.results.run import PointResult


class TrialStat(FrozenModel):
    """A metric over an experiment's trials: the mean, the half-width of its 95% confidence
    interval (Student's t; None below 2 trials: unknown, not 0), how many, and the values."""

    mean: float | None
    ci95: float | None
    n: int
    values: list[float]


# No trial had the metric: shown as "–", never 0.
NO_TRIALS = TrialStat(mean=None, ci95=None, n=0, values=[])


def mean_ci95(values: Iterable[float | None]) -> TrialStat:
    """The TrialStat of the finite values (None and NaN are left out of n)."""
    # Student's t quantile from scipy.special (what scipy.stats.t.ppf calls, the same numbers):
    # importing scipy.stats took 1.5-3 s of every experiment's and report's process, this 0.3-1 s.
    from scipy.special import stdtrit  # type: ignore[import-untyped]

    xs = [float(v) for v in values if v is not None and math.isfinite(v)]
    n = len(xs)
    if n == 0:
        return NO_TRIALS
    mean = sum(xs) / n
    if n < 2:
        return TrialStat(mean=mean, ci95=None, n=n, values=xs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = float(stdtrit(n - 1, 0.975)) * sd / math.sqrt(n)
    return TrialStat(mean=mean, ci95=half, n=n, values=xs)


def trial_groups(points: Sequence[PointResult]) -> list[list[PointResult]]:
    """The points by load, in the order the loads first ran: the points at one load (the same
    kind, value and settings) are its trials (--trials N runs each load N times in a row)."""
    groups: dict[str, list[PointResult]] = {}
    for p in points:
        groups.setdefault(p.load.model_dump_json(), []).append(p)
    return list(groups.values())
