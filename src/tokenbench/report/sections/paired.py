"""One configuration against another at the same load, over trials: the difference of a metric with
its 95% CI, which side of the CI it falls on, and the load in short. What the studies that compare
a configuration with its baseline share (layers.py: a serving layer vs the engine alone;
speculation_speedup.py: speculative decoding vs the same engine without it). Pure.

The CI comes from ``results.mean_ci95`` (the project's one t-interval):

- *paired* when both sides have every planned trial: trial k of every configuration sends the same
  prompts at the same arrival times (the seed is per trial, experiments/spec.py), so the CI is over
  the per-trial differences (and, for the relative difference, over the per-trial relative ones);
- otherwise the difference of the two means with their half-widths combined in quadrature
  (√(a² + b²)), and the relative one = that over the base's mean; None when either side has no CI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from tokenbench.console import fmt
from tokenbench.console.fmt import NULL_TEXT
from tokenbench.metrics.catalogue import Metric
from tokenbench.results import NO_TRIALS, TrialStat, mean_ci95

# Where a difference falls: beyond its CI on the better or the worse side, within it, or no CI.
Side = Literal["better", "worse", "no difference", "unknown"]


@dataclass(frozen=True)
class Difference:
    """other − base of one metric over trials."""

    delta: float | None  # in the metric's stored unit (s, tokens/s)
    delta_ci95: float | None
    pct: float | None  # as a fraction of the base: 0.1 = +10% (paired: the mean of other_k / base_k − 1)
    pct_ci95: float | None
    paired: bool


def difference(base: TrialStat, other: TrialStat, trials: int | None = None) -> Difference:
    """other − base with its CI (paired by trial when both have ``trials`` values; see the module)."""
    if base.mean is None or other.mean is None:
        return Difference(None, None, None, None, False)
    n = len(base.values)
    if trials is not None and trials >= 2 and n == trials and len(other.values) == trials:
        diffs = mean_ci95(o - b for b, o in zip(base.values, other.values))
        rel = mean_ci95((o - b) / abs(b) if b else None for b, o in zip(base.values, other.values))
        pct = rel if rel.n == n else NO_TRIALS  # a zero baseline trial has no relative difference
        return Difference(diffs.mean, diffs.ci95, pct.mean, pct.ci95, True)
    delta = other.mean - base.mean
    ci = None if base.ci95 is None or other.ci95 is None else math.hypot(base.ci95, other.ci95)
    scale = abs(base.mean) if base.mean else None
    return Difference(
        delta,
        ci,
        None if scale is None else delta / scale,
        None if scale is None or ci is None else ci / scale,
        False,
    )


def side(delta: float | None, ci95: float | None, higher_is_better: bool) -> Side:
    """better / worse when ``delta`` is beyond its CI (a higher value better or not), no difference
    within it (its edge included), unknown without a CI (one trial)."""
    if delta is None or ci95 is None:
        return "unknown"
    if abs(delta) <= ci95:
        return "no difference"
    return "better" if (delta > 0) == higher_is_better else "worse"


_UNITS = {"rate": "req/s", "users": "users", "replay": "x speed"}


def load_text(load_kind: str, load_value: float | None, label: str) -> str:
    """The load in short: "32 req/s", "4 users", "1 user" (the point's label when it has no number)."""
    if load_value is None:
        return label
    unit = "user" if load_kind == "users" and load_value == 1 else _UNITS.get(load_kind, "")
    return f"{load_value:g} {unit}".rstrip()


def pct_text(diff: Difference) -> str:
    if diff.pct is None:
        return NULL_TEXT
    ci = "" if diff.pct_ci95 is None else f" ± {diff.pct_ci95 * 100:.1f}%"
    return f"{diff.pct * 100:+.1f}%{ci}"


def delta_text(metric: Metric, diff: Difference) -> str:
    if diff.delta is None:
        return NULL_TEXT
    text = f"{diff.delta * metric.scale:+,.{metric.digits}f}"
    if diff.delta_ci95 is not None:
        text += f" ± {fmt.num(diff.delta_ci95, metric.digits, metric.scale)}"
    return text


def compared_cells(metric: Metric, base: TrialStat, other: TrialStat, diff: Difference, verdict: str) -> list[str]:
    """A difference's table cells: the base and the other side (mean ± CI), the difference, as a
    share of the base, and the verdict (marked paired when the CI was)."""
    return [
        fmt.stat(base, metric, unit=False),
        fmt.stat(other, metric, unit=False),
        delta_text(metric, diff),
        pct_text(diff),
        verdict + (" (paired)" if diff.paired and verdict != "unknown" else ""),
    ]
