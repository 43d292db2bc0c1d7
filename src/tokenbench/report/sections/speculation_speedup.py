"""Speculative decoding against the same engine without it (the ``speculation`` preset's study): per
speculating configuration and load, how much faster it was than its baseline, with a 95% CI, and
the load where a gain turns into none. Pure: report rows in, speedups, sentences and tables out.

Which configuration is which comes from the experiment's tags (a backend entry's ``tags``, in each
row's ``swept``): ``speculation: off`` marks a configuration without speculation; any other value
of ``speculation`` (the method: ``draft_model``, ``ngram``, ``eagle``) marks a speculating one, and
``speculative_tokens`` its draft length. A speculating configuration's *baseline* is the ``off``
one of the same input, backend and dataset variant; of several, the one whose other swept knobs and
tags are the same (so a sweep of max-num-seqs pairs each value with its own); none, or still
several: none (said, not guessed). An experiment without both kinds of tag has no study.

Speedup of a metric, at the same load: baseline / speculating for a latency (TPOT p50, E2E p50:
above 1 = faster), speculating / baseline for a throughput (above 1 = more). Its 95% CI is the
relative difference's (paired.py): paired by trial when both sides have every planned trial (the
mean and CI of the per-trial ratios), else the ratio of the means with the two CIs combined over
the denominator's mean. Verdict: *gain* when the CI is above 1, *loss* when below, *no difference*
when it holds 1, *unknown* without a CI (one trial).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rich.console import RenderableType
from rich.table import Table as RichTable

from tokenbench.console import fmt
from tokenbench.console.fmt import NULL_TEXT
from tokenbench.metrics.catalogue import METRICS, Metric
from tokenbench.report.read.data import PointRow, ReportData
from tokenbench.report.sections.paired import Side, difference, load_text, side
from tokenbench.report.sections.tables import Table
from tokenbench.results import NO_TRIALS, TrialStat

SPECULATION_TAG = "speculation"  # a backend entry's tag: "off", or the speculation method
DRAFT_TOKENS_TAG = "speculative_tokens"  # its draft length (num_speculative_tokens)
OFF = "off"
# What the study compares: per-token and per-request latency (medians) and output throughput.
SPEEDUP_METRICS: tuple[str, ...] = ("tpot_s_p50", "e2e_s_p50", "output_tokens_per_s")

Gain = Literal["gain", "loss", "no difference", "unknown"]
_GAINS: dict[Side, Gain] = {"better": "gain", "worse": "loss", "no difference": "no difference", "unknown": "unknown"}

SPEEDUP_CAPTION = (
    "Each speculating configuration against the same engine without speculation (tag speculation: off), at "
    "the same load: speedup = baseline / speculating for a latency, speculating / baseline for throughput "
    "(above 1: speculation paid), mean and 95% CI. Paired by trial when both have every trial (trial k sends "
    "the same prompts at the same times), else the two CIs combined. Gain / loss: the CI above / below 1; "
    "no difference: it holds 1; unknown: one trial (no CI)."
)


@dataclass(frozen=True)
class Speedup:
    """One metric of one speculating configuration at one load, against its baseline."""

    config: str  # the speculating configuration's label
    baseline: str  # the configuration without speculation
    variant: str | None
    label: str  # the load point's: "4 users"
    load_kind: str  # "rate" | "users" | "replay"
    load_value: float | None
    metric: str  # a catalogue key
    baseline_stat: TrialStat
    spec_stat: TrialStat
    speedup: float | None  # above 1: speculation faster (latency) or more (throughput)
    ci95: float | None  # the speedup's half-width
    paired: bool
    verdict: Gain

    @property
    def load(self) -> str:
        return load_text(self.load_kind, self.load_value, self.label)

    @property
    def low(self) -> float | None:
        return None if self.speedup is None or self.ci95 is None else self.speedup - self.ci95

    @property
    def high(self) -> float | None:
        return None if self.speedup is None or self.ci95 is None else self.speedup + self.ci95


def speculation_of(row: PointRow) -> str | None:
    """The row's speculation tag: "off", the method, or None (not in the study)."""
    value = row.swept.get(SPECULATION_TAG)
    return None if value is None else str(value)


def has_study(rows: tuple[PointRow, ...] | list[PointRow]) -> bool:
    """Some configuration speculates and some does not (the tag says which)."""
    tags = {speculation_of(r) for r in rows} - {None}
    return OFF in tags and len(tags) > 1


def _others(row: PointRow) -> dict[str, object]:
    """The row's swept knobs and tags but speculation's own."""
    return {k: v for k, v in row.swept.items() if k not in (SPECULATION_TAG, DRAFT_TOKENS_TAG)}


def baselines(rows: tuple[PointRow, ...] | list[PointRow]) -> dict[str, str | None]:
    """Speculating configuration -> its configuration without speculation (None: none, or several)."""
    configs: dict[str, PointRow] = {}
    for r in rows:
        configs.setdefault(r.config, r)
    offs = [r for r in configs.values() if speculation_of(r) == OFF]
    out: dict[str, str | None] = {}
    for spec in (r for r in configs.values() if speculation_of(r) not in (None, OFF)):
        same = [o for o in offs if (o.source, o.backend, o.variant) == (spec.source, spec.backend, spec.variant)]
        if len(same) > 1:
            same = [o for o in same if _others(o) == _others(spec)]
        out[spec.config] = same[0].config if len(same) == 1 else None
    return out


def speedup_of(
    metric: Metric, base: TrialStat, spec: TrialStat, trials: int | None
) -> tuple[float | None, float | None, bool]:
    """(speedup, its CI half-width, paired): the relative difference of the numerator over the
    denominator (paired.difference), plus 1."""
    numerator, denominator = (spec, base) if metric.higher_is_better else (base, spec)
    rel = difference(denominator, numerator, trials)
    if rel.pct is None:
        return None, None, rel.paired
    return 1 + rel.pct, rel.pct_ci95, rel.paired


def speedups(data: ReportData) -> list[Speedup]:
    """Every speculating configuration's speedup per (load, metric), in the rows' order."""
    base_of = baselines(data.rows)
    trials = {e.name: e.trials for e in data.experiments}
    index = {(r.config, r.load_kind, r.load_value, r.label): r for r in data.rows}
    out = []
    for row in data.rows:
        name = base_of.get(row.config)
        base = None if name is None else index.get((name, row.load_kind, row.load_value, row.label))
        if base is None:
            continue
        for key in SPEEDUP_METRICS:
            base_stat, spec_stat = base.metrics.get(key, NO_TRIALS), row.metrics.get(key, NO_TRIALS)
            value, ci, paired = speedup_of(METRICS[key], base_stat, spec_stat, trials.get(row.source))
            found = _GAINS[side(None if value is None else value - 1, ci, higher_is_better=True)]
            out.append(
                Speedup(
                    row.config,
                    base.config,
                    row.variant,
                    row.label,
                    row.load_kind,
                    row.load_value,
                    key,
                    base_stat,
                    spec_stat,
                    value,
                    ci,
                    paired,
                    found,
                )
            )
    return out


# ---------------------------------------------------------------------------------------------
# text


def times(value: float | None) -> str:
    return NULL_TEXT if value is None else f"{value:.2f}x"


def interval(low: float, high: float) -> str:
    return f"{low:.2f}–{high:.2f}"  # an en dash: a negative low bound reads -0.20–1.40


def ci_text(s: Speedup) -> str:
    """The interval of the speedup, "CI 1.40–1.64", or "no CI"."""
    return "no CI" if s.low is None or s.high is None else f"CI {interval(s.low, s.high)}"


def _better(metric: Metric) -> str:
    return "higher" if metric.higher_is_better else "faster"


_TURNS: dict[Gain, str] = {"loss": "a loss", "no difference": "no gain", "unknown": "no CI"}


def _sentence(config: str, key: str, of: list[Speedup]) -> str | None:
    """Where this configuration gained on this metric and the lowest load above where it no longer
    does; None when it gained nowhere (said once for the configuration)."""
    metric = METRICS[key]
    first = next((i for i, s in enumerate(of) if s.verdict == "gain"), None)
    if first is None:
        return None
    turn = next((i for i in range(first + 1, len(of)) if of[i].verdict != "gain"), None)
    gained = of[first : turn if turn is not None else len(of)]
    parts = [f"no gain below {of[first].load}"] if first > 0 else []
    for n, s in enumerate(gained):
        word = f" {_better(metric)}" if n == 0 else ""
        parts.append(f"{times(s.speedup)}{word} at {s.load} ({ci_text(s)})")
    if turn is None:
        end = " (a gain at every load)" if first == 0 and len(of) > 1 else ""
        return f"{config}: {metric.title} " + ", ".join(parts) + end + "."
    rest = of[turn:]
    t = of[turn]
    where = "from" if all(s.verdict != "gain" for s in rest) and len(rest) > 1 else "at"
    parts.append(f"{_TURNS[t.verdict]} {where} {t.load} ({times(t.speedup)}, {ci_text(t)})")
    again = [s.load for s in rest if s.verdict == "gain"]
    tail = f"; a gain again at {', '.join(again)}" if again else ""
    return f"{config}: {metric.title} " + ", ".join(parts) + tail + "."


def _sort_key(s: Speedup) -> tuple[bool, float]:
    return (s.load_value is None, s.load_value if s.load_value is not None else 0.0)


def _losses(config: str, key: str, of: list[Speedup]) -> str | None:
    """A metric that gained nowhere: where it lost beyond the CI (None: nowhere)."""
    losses = [s for s in of if s.verdict == "loss"]
    if not losses:
        return None
    found = ", ".join(f"{times(s.speedup)} at {s.load} ({ci_text(s)})" for s in losses)
    return f"{config}: {METRICS[key].title} no gain at any load, a loss: {found}."


def speedup_lines(items: list[Speedup], data: ReportData | None = None) -> list[str]:
    """Per speculating configuration, metric by metric: where it gained and where the gain turns
    into none (the lowest load above a gain without one), or where a metric that gained nowhere
    lost; a configuration with neither is said to, and one without a baseline is named."""
    lines: list[str] = []
    groups: dict[str, list[Speedup]] = {}
    for s in items:
        groups.setdefault(s.config, []).append(s)
    for config, group in groups.items():
        said = len(lines)
        for key in SPEEDUP_METRICS:
            of = sorted((s for s in group if s.metric == key), key=_sort_key)
            line = _sentence(config, key, of) or _losses(config, key, of)
            if line is not None:
                lines.append(line)
        if len(lines) > said:
            continue
        baseline = group[0].baseline
        lines.append(
            f"{config}: one trial per configuration, so no CI: run trials to tell it from {baseline}."
            if all(s.verdict == "unknown" for s in group)
            else f"{config}: no gain or loss over {baseline} beyond the 95% CI at any load, on any metric."
        )
    if data is not None:
        for config, base in baselines(data.rows).items():
            if base is None:
                lines.append(
                    f"{config}: no single configuration without speculation (tag {SPECULATION_TAG}: {OFF}) to compare with."
                )
    return lines


# ---------------------------------------------------------------------------------------------
# tables


def _cell(s: Speedup | None) -> str:
    if s is None or s.speedup is None:
        return NULL_TEXT
    return times(s.speedup) if s.low is None or s.high is None else f"{times(s.speedup)} ({interval(s.low, s.high)})"


def _by_row(items: list[Speedup]) -> dict[tuple[str, str], dict[str, Speedup]]:
    """(configuration, load) -> metric -> its speedup, in the items' order."""
    out: dict[tuple[str, str], dict[str, Speedup]] = {}
    for s in items:
        out.setdefault((s.config, s.load), {})[s.metric] = s
    return out


def _headers() -> list[str]:
    out = ["configuration", "baseline", "load"]
    for key in SPEEDUP_METRICS:
        out += [f"{METRICS[key].title} speedup (95% CI)", f"{METRICS[key].title}"]
    return out


def _rows(items: list[Speedup]) -> list[list[str]]:
    rows = []
    for (config, load), by_metric in _by_row(items).items():
        first = next(iter(by_metric.values()))
        cells = [config, first.baseline, load]
        for key in SPEEDUP_METRICS:
            s = by_metric.get(key)
            cells += [
                _cell(s),
                NULL_TEXT if s is None else s.verdict + (" (paired)" if s.paired and s.verdict != "unknown" else ""),
            ]
        rows.append(cells)
    return rows


def speedup_table(items: list[Speedup]) -> Table:
    """One row per (speculating configuration, load): each metric's speedup with its CI, and the verdict."""
    return Table(_headers(), _rows(items), numeric=tuple(range(3, 3 + 2 * len(SPEEDUP_METRICS), 2)))


def speculation_values_table(data: ReportData) -> Table | None:
    """Per configuration of the study (without speculation and speculating) and load: the compared
    metrics, mean ± 95% CI over trials; None without a study."""
    if not has_study(data.rows):
        return None
    metrics = [METRICS[k] for k in SPEEDUP_METRICS]
    rows = [
        [
            r.config,
            speculation_of(r) or NULL_TEXT,
            str(r.swept.get(DRAFT_TOKENS_TAG, NULL_TEXT)),
            r.label,
            str(r.num_trials),
        ]
        + [fmt.stat(r.metrics.get(m.key), m, unit=False) for m in metrics]
        for r in data.rows
        if speculation_of(r) is not None
    ]
    headers = ["configuration", "speculation", "draft tokens", "load", "trials"] + [m.label for m in metrics]
    return Table(headers, rows, numeric=tuple(range(4, 5 + len(metrics))))


def speculation_study(experiment_dir: Path) -> list[RenderableType]:
    """An experiment tagged with speculation: each speculating configuration's speedup over its
    baseline per load, then where each gained and where the gain ends; [] without the tags."""
    from rich.text import Text

    from tokenbench.report.read.load import load_inputs

    data = load_inputs([experiment_dir])
    if not has_study(data.rows):
        return []
    items = speedups(data)
    table = RichTable(title="speculative decoding: speedup vs without it (mean and 95% CI over trials)")
    for i, header in enumerate(_headers()):
        table.add_column(header, justify="right" if i >= 3 and (i - 3) % 2 == 0 else "left")
    for cells in _rows(items):
        table.add_row(*(Text(c) for c in cells))
    return [table, *(Text(line) for line in speedup_lines(items, data))]
