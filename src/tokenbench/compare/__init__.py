"""Side-by-side comparison of runs or experiments: per matching configuration and load point, each
headline metric (the catalogue's compare view) of every other input against the first (the
baseline), its absolute and relative difference, and whether the difference is significant across
trials.

    rows = compare([Path("runs/a"), Path("runs/b")])
    Console().print(compare_table(rows))     # or compare_markdown(rows)

Significance: Welch's t-test (scipy.stats.ttest_ind, equal_var=False) over the per-trial values
(a proportion, accuracy, with fewer than two trials a side: the pooled two-proportion z-test on
its correct / graded counts summed over each side's trials),
with the p-values of one comparison (every metric x load x input) adjusted by Holm-Bonferroni's
step-down method, significant when the adjusted p < 0.05: 8 metrics x 6 loads at p < 0.05 would
otherwise give 2-3 "significant" differences under the null. With fewer than two trials on
either side, or no variance on both (two sets of identical values: t is undefined, not
infinite), there is nothing to test: "n/a", explained under the table (``NA_NOTE``).

A metric only some runs have (the catalogue's ``optional``: an agent-programs run's session
latency and rate, a pooling run's inputs/s) is a row only where both sides measured it.

Points are matched by load: the same kind and value (4 users with 4 users, 2 req/s with 2 req/s),
within the same configuration where the inputs share configurations. A point with no match is
named under the table, not drawn as a row against "–"; an input none of whose points matches the
baseline's (a users sweep against a rate sweep) is bad input: one line, exit 2. Each input is
named by its directory and what it measured (backend, model, URL), not by "attached".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rich.table import Table as RichTable
from rich.text import Text
from scipy.special import stdtr  # type: ignore[import-untyped]  # scipy-stubs is not a dependency

from tokenbench.console import fmt
from tokenbench.console.fmt import NULL_TEXT, md
from tokenbench.errors import BadInput
from tokenbench.metrics.accuracy import two_proportion_p
from tokenbench.metrics.catalogue import METRICS, Metric, shown_in
from tokenbench.report.read.data import PointRow, ReportData, load_key
from tokenbench.report.read.load import load_inputs
from tokenbench.results import NO_TRIALS, TrialStat
from tokenbench.results.manifest import ATTACHED

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
    # Welch's t-test; None when either side has < 2 trials or no variance (a proportion such as
    # accuracy then: the two-proportion z-test on its counts)
    p_value: float | None
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
    return welch_test(
        _mean(a.values), _variance(a.values), len(a.values), _mean(b.values), _variance(b.values), len(b.values)
    )


def welch_test(mean_a: float, var_a: float, n_a: int, mean_b: float, var_b: float, n_b: int) -> float | None:
    """Two-sided p-value of Welch's t-test from each side's mean, sample variance (n - 1) and
    count (n >= 2 each, not both variances 0): Welch's t with the Welch-Satterthwaite degrees of
    freedom, as scipy.stats.ttest_ind(..., equal_var=False) computes it (tests/report/test_compare.py
    checks the two agree), with the t distribution from scipy.special: importing scipy.stats cost
    every report 1.5-3 s. None when the p-value is not a number."""
    se2_a, se2_b = var_a / n_a, var_b / n_b
    t = (mean_a - mean_b) / math.sqrt(se2_a + se2_b)
    df = (se2_a + se2_b) ** 2 / (se2_a**2 / (n_a - 1) + se2_b**2 / (n_b - 1))
    p = float(2 * stdtr(df, -abs(t)))
    return None if math.isnan(p) else min(p, 1.0)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _variance(values: Sequence[float]) -> float:
    """The sample variance (n - 1)."""
    m = _mean(values)
    return sum((v - m) ** 2 for v in values) / (len(values) - 1)


def _p_value(metric: Metric, b: PointRow, o: PointRow, bs: TrialStat, os_: TrialStat) -> float | None:
    """Welch's t over trials; a proportion (accuracy) with fewer than 2 trials a side: the
    two-proportion z-test on its counts pooled over each side's trials."""
    p = welch_p(bs, os_)
    if p is not None or min(len(bs.values), len(os_.values)) >= 2:
        return p
    if metric.counts is None:
        return None
    a, c = b.proportion(metric.counts), o.proportion(metric.counts)
    return two_proportion_p(*a, *c) if a is not None and c is not None else None


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


_Key = tuple[object, ...]


def _by_load(base: ReportData, other: ReportData) -> bool:
    """How rows are matched: by load alone when each input is one configuration of its own (a
    vLLM run and an SGLang run), else by (configuration, load)."""
    return len(_configs(base)) == 1 and len(_configs(other)) == 1 and not set(_configs(base)) & set(_configs(other))


def _key(row: PointRow, by_load: bool) -> _Key:
    return (load_key(row),) if by_load else (row.config, load_key(row))


def _match(
    base: ReportData, other: ReportData
) -> tuple[list[tuple[PointRow, PointRow]], list[PointRow], list[PointRow]]:
    """Pairs of rows at the same load (same kind and value), then the baseline's rows and the
    other's rows that have no match."""
    by_load = _by_load(base, other)
    index: dict[_Key, PointRow] = {}
    for r in other.rows:
        index.setdefault(_key(r, by_load), r)
    pairs = [(r, index[_key(r, by_load)]) for r in base.rows if _key(r, by_load) in index]
    matched = {_key(b, by_load) for b, _ in pairs}
    base_only = [r for r in base.rows if _key(r, by_load) not in matched]
    other_only = [r for r in other.rows if _key(r, by_load) not in matched]
    return pairs, base_only, other_only


@dataclass(frozen=True)
class Comparison:
    """A comparison's rows, each input's name, and what could not be compared."""

    rows: list[CompareRow]
    names: dict[str, str]  # an input's source (its directory's name) -> "runs/a: vllm, Qwen/.. at URL"
    unmatched: list[str]  # one line per input: its points with no match on the other side


# Under the table wherever a row's significance is n/a: why, and how to get a test.
NA_NOTE = (
    "significant: n/a where a side has fewer than 2 trials (one trial per point: run --trials 3, or an "
    "experiment with trials: 3, for a test) or neither side varies"
)


PROPORTION_NOTE = (
    "accuracy: with fewer than 2 trials a side, tested as two proportions (pooled z-test on correct/graded, "
    "summed over each side's trials), Holm-adjusted with the rest"
)


def comparison(dirs: list[Path], metrics: tuple[Metric, ...] = shown_in("compare")) -> Comparison:
    """Compare every input after the first with the first (the baseline), metric by metric, at
    the loads both have; the points of either side without a match are listed in ``unmatched``.
    An input with no point at a load of the baseline is bad input (nothing to compare)."""
    if len(dirs) < 2:
        raise BadInput("compare needs at least two run or experiment directories")
    inputs = [load_inputs([Path(d)]) for d in dirs]
    base = inputs[0]
    names = {_source_name(d): input_name(d) for d in inputs}
    rows: list[CompareRow] = []
    unmatched: list[str] = []
    for other_data in inputs[1:]:
        other_name = _source_name(other_data)
        pairs, base_only, other_only = _match(base, other_data)
        if not pairs:
            raise BadInput(
                f"compare: no load point of {other_name} ({_loads(other_data.rows)}) matches one of the baseline "
                f"{_source_name(base)} ({_loads(base.rows)}): compare runs at the same loads (users with users, "
                "a rate with the same rate)"
            )
        if base_only:
            unmatched.append(f"not in {other_name}: {_source_name(base)}'s {_loads(base_only)}")
        if other_only:
            unmatched.append(f"not in the baseline {_source_name(base)}: {other_name}'s {_loads(other_only)}")
        for b, o in pairs:
            for metric in metrics:
                bs = b.metrics.get(metric.key, NO_TRIALS)
                os_ = o.metrics.get(metric.key, NO_TRIALS)
                if _optional(metric) and (bs.mean is None or os_.mean is None):
                    continue  # only some runs have it (sessions, inputs/s): a row where both do
                delta, pct, better = _delta(metric, bs, os_)
                rows.append(
                    CompareRow(
                        baseline_source=b.source,
                        other_source=other_name,
                        baseline_config=_config_name(b, base),
                        other_config=_config_name(o, other_data),
                        label=b.label,
                        metric=metric.key,
                        baseline=bs,
                        other=os_,
                        delta=delta,
                        delta_pct=pct,
                        p_value=_p_value(metric, b, o, bs, os_),
                        significant=None,
                        better=better,
                    )
                )
    adjusted = holm([r.p_value for r in rows])
    rows = [
        replace(r, p_adjusted=q, significant=None if q is None else q < SIGNIFICANCE_P) for r, q in zip(rows, adjusted)
    ]
    return Comparison(rows, names, unmatched)


def _optional(metric: Metric) -> bool:
    """Only some runs have it (an agent-programs run's sessions, a pooling run's inputs/s)."""
    return metric.optional or (metric.distribution is not None and metric.distribution.optional)


def compare(dirs: list[Path], metrics: tuple[Metric, ...] = shown_in("compare")) -> list[CompareRow]:
    """``comparison``'s rows: one per metric at each load both inputs have."""
    return comparison(dirs, metrics).rows


def _loads(rows: Sequence[PointRow]) -> str:
    return ", ".join(dict.fromkeys(r.label for r in rows)) or "no points"


def _source_name(data: ReportData) -> str:
    if data.rows:
        return data.rows[0].source
    names = [h.name for h in data.runs] + [e.name for e in data.experiments]
    return names[0] if names else "?"


def _served(data: ReportData) -> str | None:
    """A run's 'vllm, Qwen/Qwen3-0.6B at http://host:8000' (the backend unless it was only
    attached to); None for an experiment (its configurations name themselves)."""
    if len(data.runs) != 1 or data.experiments:
        return None
    h = data.runs[0]
    what = f"{h.model or 'model ?'} at {h.url or '?'}"
    return f"{h.backend}, {what}" if h.backend and h.backend != ATTACHED else what


def input_name(data: ReportData) -> str:
    """How compare names an input: its directory, and for a run what it measured."""
    served = _served(data)
    return _source_name(data) + (f": {served}" if served else "")


def _config_name(row: PointRow, data: ReportData) -> str:
    """A row's configuration; a run's "attached" (or no backend) as what it measured."""
    if row.config in (ATTACHED, "run"):
        return _served(data) or row.config
    return row.config


# ---------------------------------------------------------------------------------------------
# rendering


def _na(row: CompareRow) -> str:
    """'n/a' and why: too few trials on a side, or no variance on either."""
    trials = min(len(row.baseline.values), len(row.other.values))
    if trials == 0:
        return "n/a (not measured)"
    return f"n/a ({trials} trial{'s' if trials != 1 else ''})" if trials < 2 else "n/a (no variance)"


def _cells(row: CompareRow) -> list[str]:
    metric = METRICS[row.metric]
    delta = NULL_TEXT if row.delta is None else f"{row.delta * metric.scale:+,.{metric.digits}f}"
    pct = fmt.percent(row.delta_pct)
    sig = _na(row) if row.significant is None else ("yes" if row.significant else "no")
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


def _parts(result: Comparison | list[CompareRow]) -> tuple[list[CompareRow], dict[str, str], list[str]]:
    """The rows, the inputs' names and the notes under the table (unmatched points, why n/a)."""
    if isinstance(result, Comparison):
        rows, names, notes = result.rows, result.names, list(result.unmatched)
    else:
        rows, names, notes = result, {}, []
    if any(r.significant is None for r in rows):
        notes.append(NA_NOTE)
    if any(METRICS[r.metric].counts is not None and r.p_value is not None for r in rows):
        notes.append(PROPORTION_NOTE)
    return rows, names, notes


def _pairs(rows: list[CompareRow], names: dict[str, str]) -> list[tuple[str, str]]:
    sources = dict.fromkeys((r.baseline_source, r.other_source) for r in rows)
    return [(names.get(a, a), names.get(b, b)) for a, b in sources]


def compare_table(result: Comparison | list[CompareRow]) -> RichTable:
    """A Rich table, one line per metric, the notes as its caption; text from files is never read
    as Rich markup."""
    rows, names, notes = _parts(result)
    title = "; ".join(f"{a} (baseline) vs {b}" for a, b in _pairs(rows, names)) or "tokenbench compare"
    table = RichTable(title=Text(title), caption=Text("\n".join(notes)) if notes else None)
    for i, h in enumerate(_HEADERS):
        table.add_column(h, justify="right" if 3 <= i <= 6 else "left")
    for row in rows:
        cells = [Text(c) for c in _cells(row)]
        if row.significant and row.better is not None:
            cells[7].stylize("green" if row.better else "red")
        table.add_row(*cells)
    return table


def compare_markdown(result: Comparison | list[CompareRow]) -> str:
    rows, names, notes = _parts(result)
    out = ["# tokenbench compare", ""]
    out += [f"- baseline **{md(a)}** vs **{md(b)}**" for a, b in _pairs(rows, names)] + [""]
    out += [
        "| " + " | ".join(md(h) for h in _HEADERS) + " |",
        "| " + " | ".join("---:" if 3 <= i <= 6 else "---" for i in range(len(_HEADERS))) + " |",
    ]
    out += ["| " + " | ".join(md(c) for c in _cells(r)) + " |" for r in rows]
    out += [""] + [f"- {md(n)}" for n in notes] if notes else []
    return "\n".join(out) + "\n"
