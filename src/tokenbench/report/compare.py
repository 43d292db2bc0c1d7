"""Side-by-side comparison of runs or experiments: per matching configuration and load point, each
headline metric (the catalogue's compare view) of every other input against the first (the
baseline), its absolute and relative difference, and whether the difference is significant across
trials.

    rows = compare([Path("runs/a"), Path("runs/b")])
    Console().print(compare_table(rows))     # or compare_markdown(rows)

Significance: Welch's t-test (scipy.stats.ttest_ind, equal_var=False) over the per-trial values,
with the p-values of one comparison (every metric x load x input) adjusted by Holm-Bonferroni's
step-down method, significant when the adjusted p < 0.05: 8 metrics x 6 loads at p < 0.05 would
otherwise give 2-3 "significant" differences under the null. With fewer than two trials on
either side, or no variance on both (two sets of identical values: t is undefined, not
infinite), there is nothing to test: "n/a".
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from rich.table import Table as RichTable
from rich.text import Text
from scipy import stats as _stats  # type: ignore[import-untyped]  # scipy-stubs is not a dependency

from ..catalogue import METRICS, Metric, shown_in
from ..errors import BadInput
from ..results import NO_TRIALS, TrialStat
from . import fmt
from .data import PointRow, ReportData
from .fmt import NULL_TEXT, md
from .load import load_inputs

SIGNIFICANCE_P = 0.05


@dataclass(frozen=True)
class CompareRow:
    """One metric at one matched (configuration, load) in the baseline and in another input."""

    baseline_source: str
    other_source: str
    baseline_config: str
    other_config: str
    label: str  # the load point, "16 users"
    metric: str  # its key in catalogue.METRICS
    baseline: TrialStat
    other: TrialStat
    delta: float | None  # other - baseline, in the metric's stored unit (s, tokens/s, fraction)
    delta_pct: float | None  # delta / |baseline|
    p_value: float | None  # Welch's t-test; None when either side has < 2 trials or no variance
    significant: bool | None  # Holm-adjusted p < 0.05; None = n/a
    better: bool | None  # the change is an improvement (None when no change or no data)
    p_adjusted: float | None = None  # Holm-Bonferroni over every test of the comparison


def welch_p(a: TrialStat, b: TrialStat) -> float | None:
    """Two-sided p-value of Welch's t-test over the trial values; None when untestable."""
    if len(a.values) < 2 or len(b.values) < 2:
        return None
    if sorted(a.values) == sorted(b.values):
        return 1.0  # the same trials: no difference (scipy would warn about cancellation)
    if len(set(a.values)) == 1 and len(set(b.values)) == 1:
        # Both sides without variance: the test has no error term to scale the difference by
        # (scipy gives t = inf, p = 0: "certain" from two constants). Untestable, not certain.
        return None
    with warnings.catch_warnings():
        # Nearly identical samples make scipy warn about precision; the p-value is still right.
        warnings.simplefilter("ignore", RuntimeWarning)
        result = _stats.ttest_ind(list(a.values), list(b.values), equal_var=False)
    p = float(result.pvalue)
    return None if math.isnan(p) else p


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm-Bonferroni step-down adjusted p-values (None stays None): the k-th smallest of m is
    multiplied by m - k + 1, kept monotone, capped at 1."""
    ranked = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(ranked)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for k, (p, i) in enumerate(ranked):
        running = max(running, min(1.0, (m - k) * p))
        out[i] = running
    return out


def _delta(metric: Metric, base: TrialStat, other: TrialStat) -> tuple[float | None, float | None, bool | None]:
    if base.mean is None or other.mean is None:
        return None, None, None
    delta = other.mean - base.mean
    pct = delta / abs(base.mean) if base.mean else None
    better = None if delta == 0 else (delta > 0) == metric.higher_is_better
    return delta, pct, better


def _configs(data: ReportData) -> list[str]:
    return list(dict.fromkeys(r.config for r in data.rows))


def _match(base: ReportData, other: ReportData) -> list[tuple[PointRow, PointRow | None]]:
    """Pairs of rows at the same load. Configurations are matched by label when the inputs share
    one; two single-configuration inputs (e.g. a vLLM run and an SGLang run) match by load alone."""
    by_label = len(_configs(base)) == 1 and len(_configs(other)) == 1 and not set(_configs(base)) & set(_configs(other))
    index: dict[str | tuple[str, str], PointRow] = {}
    for r in other.rows:
        index.setdefault(r.label if by_label else (r.config, r.label), r)
    return [(r, index.get(r.label if by_label else (r.config, r.label))) for r in base.rows]


def compare(dirs: list[Path], metrics: tuple[Metric, ...] = shown_in("compare")) -> list[CompareRow]:
    """Compare every input after the first with the first, metric by metric. Rows of the baseline
    with no match in another input are kept with an empty side (shown as "–")."""
    if len(dirs) < 2:
        raise BadInput("compare needs at least two run or experiment directories")
    inputs = [load_inputs([Path(d)]) for d in dirs]
    base = inputs[0]
    rows = []
    for other_data in inputs[1:]:
        other_name = _source_name(other_data)
        for b, o in _match(base, other_data):
            for metric in metrics:
                bs = b.metrics.get(metric.key, NO_TRIALS)
                os_ = o.metrics.get(metric.key, NO_TRIALS) if o is not None else NO_TRIALS
                delta, pct, better = _delta(metric, bs, os_)
                p = welch_p(bs, os_)
                rows.append(
                    CompareRow(
                        baseline_source=b.source,
                        other_source=other_name,
                        baseline_config=b.config,
                        other_config=o.config if o is not None else NULL_TEXT,
                        label=b.label,
                        metric=metric.key,
                        baseline=bs,
                        other=os_,
                        delta=delta,
                        delta_pct=pct,
                        p_value=p,
                        significant=None,
                        better=better,
                    )
                )
    adjusted = holm([r.p_value for r in rows])
    return [
        replace(r, p_adjusted=q, significant=None if q is None else q < SIGNIFICANCE_P) for r, q in zip(rows, adjusted)
    ]


def _source_name(data: ReportData) -> str:
    if data.rows:
        return data.rows[0].source
    names = [h.name for h in data.runs] + [e.name for e in data.experiments]
    return names[0] if names else "?"


# ---------------------------------------------------------------------------------------------
# rendering


def _cells(row: CompareRow) -> list[str]:
    metric = METRICS[row.metric]
    delta = NULL_TEXT if row.delta is None else f"{row.delta * metric.scale:+,.{metric.digits}f}"
    pct = fmt.percent(row.delta_pct)
    sig = "n/a" if row.significant is None else ("yes" if row.significant else "no")
    p = "" if row.p_adjusted is None else f" (p={row.p_value:.3f}, Holm {row.p_adjusted:.3f})"
    direction = {True: "better", False: "worse", None: NULL_TEXT}[row.better]
    config = (
        row.baseline_config
        if row.baseline_config == row.other_config
        else f"{row.baseline_config} vs {row.other_config}"
    )
    return [
        config,
        row.label,
        metric.label,
        fmt.stat(row.baseline, metric, unit=False),
        fmt.stat(row.other, metric, unit=False),
        delta,
        pct,
        direction,
        sig + p,
    ]


_HEADERS = [
    "configuration",
    "load",
    "metric",
    "baseline",
    "other",
    "Δ",
    "Δ %",
    "",
    "significant (Welch, Holm-adjusted p<0.05)",
]


def compare_table(rows: list[CompareRow]) -> RichTable:
    """A Rich table, one line per metric; text from files is never read as Rich markup."""
    sources = list(dict.fromkeys((r.baseline_source, r.other_source) for r in rows))
    title = "; ".join(f"{a} (baseline) vs {b}" for a, b in sources) or "tokenbench compare"
    table = RichTable(title=Text(title))
    for i, h in enumerate(_HEADERS):
        table.add_column(h, justify="right" if 3 <= i <= 6 else "left")
    for row in rows:
        cells = [Text(c) for c in _cells(row)]
        if row.significant and row.better is not None:
            cells[7].stylize("green" if row.better else "red")
        table.add_row(*cells)
    return table


def compare_markdown(rows: list[CompareRow]) -> str:
    sources = list(dict.fromkeys((r.baseline_source, r.other_source) for r in rows))
    out = ["# tokenbench compare", ""]
    out += [f"- baseline **{md(a)}** vs **{md(b)}**" for a, b in sources] + [""]
    out += [
        "| " + " | ".join(md(h) for h in _HEADERS) + " |",
        "| " + " | ".join("---:" if 3 <= i <= 6 else "---" for i in range(len(_HEADERS))) + " |",
    ]
    out += ["| " + " | ".join(md(c) for c in _cells(r)) + " |" for r in rows]
    return "\n".join(out) + "\n"
