"""Serving layers against the engine alone (the whitepaper's engine-alone vs behind-a-server study):
per layer and load, what the layer added over the same engine without it, and where it helped.
Pure: report rows in, overheads, sentences and tables out.

A *layer* is a configuration with an upstream (experiment.json's server ``upstream``: Triton or Ray
Serve in front of an engine). Its *baseline* is the configuration of the same input with no
upstream whose backend is that engine (``xllamacpp``, the in-process llama.cpp server, counts as
``llamacpp``) or that is labelled as it (an attached server), the same dataset variant and load. Several candidates: the one with the
same swept knobs, else the one labelled as the engine; still several: none (said, not guessed).

Overhead of a metric = layer − engine alone, in the metric's stored unit, and as a fraction of the
engine alone, with its 95% CI (paired.py: paired by trial when both sides have every planned trial,
else the two CIs combined).

Verdict: *helped* when the layer is better (lower latency, higher throughput) and the CI of the
difference excludes 0; *hurt* when worse beyond the CI; *no difference* within it; *unknown* with
no CI (one trial).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rich.console import RenderableType
from rich.table import Table as RichTable

from tokenbench.console import fmt
from tokenbench.console.fmt import NULL_TEXT
from tokenbench.metrics.catalogue import (
    METRICS,
    Metric,
)
from tokenbench.report.read.data import PointRow, ReportData
from tokenbench.report.sections.paired import (
    Difference,
    Side,
    compared_cells,
    delta_text,
    difference,
    load_text,
    pct_text,
    side,
)
from tokenbench.report.sections.tables import Table
from tokenbench.results import NO_TRIALS, TrialStat

Verdict = Literal["helped", "hurt", "no difference", "unknown"]

# What the study compares: latency (median and tail) and throughput, keys of catalogue.METRICS.
OVERHEAD_METRICS: tuple[str, ...] = (
    "ttft_s_p50",
    "ttft_s_p99",
    "tpot_s_p50",
    "tpot_s_p99",
    "e2e_s_p50",
    "e2e_s_p99",
    "output_tokens_per_s",
    "requests_per_s",
)
# Profiles that run the same engine under another name.
ENGINE_ALIASES = {"xllamacpp": "llamacpp"}

LAYERS_CAPTION = (
    "Each serving layer against the same engine alone, at the same load: overhead = layer − engine alone "
    "(absolute, and as a share of the engine alone), mean ± 95% CI. Paired by trial when both have every "
    "trial (trial k sends the same prompts at the same times), else the two CIs combined. Helped / hurt: "
    "better / worse beyond the CI; no difference: within it; unknown: one trial (no CI)."
)


@dataclass(frozen=True)
class Overhead:
    """One metric of one layer at one load, against its engine alone."""

    layer: str  # the layer's configuration label
    engine: str  # the baseline's configuration label
    variant: str | None
    label: str  # the load point's: "2 req/s poisson"
    load_kind: str  # "rate" | "users" | "replay"
    load_value: float | None
    metric: str  # a catalogue key
    engine_stat: TrialStat
    layer_stat: TrialStat
    diff: Difference
    verdict: Verdict


def engine_name(backend: str | None) -> str | None:
    return None if backend is None else ENGINE_ALIASES.get(backend, backend)


_VERDICTS: dict[Side, Verdict] = {
    "better": "helped",
    "worse": "hurt",
    "no difference": "no difference",
    "unknown": "unknown",
}


def verdict(metric: Metric, diff: Difference) -> Verdict:
    return _VERDICTS[side(diff.delta, diff.delta_ci95, metric.higher_is_better)]


def baselines(rows: tuple[PointRow, ...] | list[PointRow]) -> dict[str, str | None]:
    """Layer configuration -> its engine-alone configuration (None: none, or no single one)."""
    configs: dict[str, PointRow] = {}
    for r in rows:
        configs.setdefault(r.config, r)
    engines = [r for r in configs.values() if r.upstream is None]
    out: dict[str, str | None] = {}
    for layer in (r for r in configs.values() if r.upstream is not None):
        same = [
            e
            for e in engines
            if e.source == layer.source
            and (engine_name(e.backend) == engine_name(layer.upstream) or e.config == layer.upstream)
        ]
        if len(same) > 1:
            same = [e for e in same if e.swept == layer.swept] or same
        if len(same) > 1:
            same = [e for e in same if e.config == layer.upstream] or same
        out[layer.config] = same[0].config if len(same) == 1 else None
    return out


def overheads(data: ReportData) -> list[Overhead]:
    """Every layer's overhead per (variant, load, metric), in the rows' order."""
    base_of = baselines(data.rows)
    trials = {e.name: e.trials for e in data.experiments}
    index = {(r.config, r.variant, r.load_kind, r.load_value, r.label): r for r in data.rows}
    out = []
    for row in data.rows:
        engine = base_of.get(row.config)
        base = None if engine is None else index.get((engine, row.variant, row.load_kind, row.load_value, row.label))
        if base is None:
            continue
        for key in OVERHEAD_METRICS:
            engine_stat = base.metrics.get(key, NO_TRIALS)
            layer_stat = row.metrics.get(key, NO_TRIALS)
            diff = difference(engine_stat, layer_stat, trials.get(row.source))
            out.append(
                Overhead(
                    row.config,
                    base.config,
                    row.variant,
                    row.label,
                    row.load_kind,
                    row.load_value,
                    key,
                    engine_stat,
                    layer_stat,
                    diff,
                    verdict(METRICS[key], diff),
                )
            )
    return out


# ---------------------------------------------------------------------------------------------
# sentences


def short_load(o: Overhead) -> str:
    """The load in short: "32 req/s" (the point's label when it has no number)."""
    return load_text(o.load_kind, o.load_value, o.label)


def _where(chosen: list[Overhead], of: list[Overhead]) -> str:
    """'at every load', 'at 32+ req/s' (the highest loads, from one up) or 'at 2 req/s, 8 req/s'."""
    if len(chosen) == len(of):
        return "at every load"
    loads = sorted(o.load_value for o in of if o.load_value is not None)
    values = [o.load_value for o in chosen]
    if len(loads) == len(of) and values == loads[len(loads) - len(values) :]:
        return f"at {short_load(chosen[0]).replace(' ', '+ ', 1)}"
    return "at " + ", ".join(short_load(o) for o in chosen)


def _sentence(layer: str, engine: str, key: str, chosen: list[Overhead], of: list[Overhead], kind: Verdict) -> str:
    metric = METRICS[key]
    if kind == "helped":
        verb = "beat the engine alone" if metric.higher_is_better else "was faster than the engine alone"
    else:
        verb = "fell behind the engine alone" if metric.higher_is_better else "was slower than the engine alone"
    details = "; ".join(f"{pct_text(o.diff)} at {short_load(o)}" for o in chosen)
    return f"{layer} {verb} ({engine}) on {metric.title} {_where(chosen, of)} ({details})."


_FINDINGS: tuple[Verdict, ...] = ("helped", "hurt")


def layer_lines(items: list[Overhead], data: ReportData | None = None) -> list[str]:
    """Per layer: where it helped (beyond the CI), then where it hurt, metric by metric; a layer
    that did neither is said to, and a layer with no engine-alone configuration is named."""
    lines: list[str] = []
    groups: dict[tuple[str, str, str | None], list[Overhead]] = {}
    for o in items:
        groups.setdefault((o.layer, o.engine, o.variant), []).append(o)
    for (layer, engine, _), group in groups.items():
        name = layer  # the configuration's label: it names the variant when there are several
        said = len(lines)
        for kind in _FINDINGS:
            for key in OVERHEAD_METRICS:
                of = [o for o in group if o.metric == key]
                chosen = [o for o in of if o.verdict == kind]
                if chosen:
                    lines.append(_sentence(name, engine, key, chosen, of, kind))
        if len(lines) == said:
            unknown = all(o.verdict == "unknown" for o in group)
            lines.append(
                f"{name}: one trial per configuration, so no CI: run trials to tell the layer from the engine alone."
                if unknown
                else f"{name} made no difference beyond the 95% CI to the engine alone ({engine}) on any metric."
            )
    if data is not None:
        for layer, base in baselines(data.rows).items():
            if base is None:
                lines.append(f"{layer}: no single engine-alone configuration of its upstream to compare with.")
    return lines


# ---------------------------------------------------------------------------------------------
# tables


def overhead_table(items: list[Overhead]) -> Table:
    """One row per (layer, load, metric): the engine alone, the layer, the overhead and the verdict."""
    rows = [
        [
            o.layer,
            o.engine,
            short_load(o),
            METRICS[o.metric].label,
            *compared_cells(METRICS[o.metric], o.engine_stat, o.layer_stat, o.diff, o.verdict),
        ]
        for o in items
    ]
    headers = [
        "layer",
        "engine alone",
        "load",
        "metric",
        "engine alone",
        "behind the layer",
        "overhead",
        "overhead %",
        "",
    ]
    return Table(headers, rows, numeric=(4, 5, 6, 7))


def layers_table(data: ReportData) -> Table | None:
    """Per configuration of the study (engines alone and layers) and load: the compared metrics,
    mean ± 95% CI over trials; None when the inputs have no layer."""
    base_of = baselines(data.rows)
    if not base_of:
        return None
    keep = set(base_of) | {e for e in base_of.values() if e is not None}
    metrics = [METRICS[k] for k in OVERHEAD_METRICS]
    rows = [
        [
            r.config,
            (r.backend or NULL_TEXT) if r.upstream else "none (alone)",
            r.upstream or r.backend or NULL_TEXT,
            r.label,
        ]
        + [str(r.num_trials)]
        + [fmt.stat(r.metrics.get(m.key), m, unit=False) for m in metrics]
        for r in data.rows
        if r.config in keep
    ]
    headers = ["configuration", "layer", "engine", "load", "trials"] + [m.label for m in metrics]
    return Table(headers, rows, numeric=tuple(range(4, 5 + len(metrics))))


def layer_study(experiment_dir: Path) -> list[RenderableType]:
    """An experiment with serving layers (servers with an upstream): the overhead of each layer
    over the engine alone per load and metric, then where each helped or hurt; [] without layers."""
    from rich.text import Text

    from tokenbench.metrics.catalogue import METRICS
    from tokenbench.report.read.load import load_inputs

    data = load_inputs([experiment_dir])
    if not any(r.upstream for r in data.rows):
        return []
    items = overheads(data)
    table = RichTable(title="serving layers: overhead = layer − engine alone (mean ± 95% CI over trials)")
    for header in ("layer", "load", "metric", "overhead", "%", "verdict"):
        table.add_column(header, justify="right" if header in ("overhead", "%") else "left")
    for o in items:
        metric = METRICS[o.metric]
        shift = delta_text(metric, o.diff)
        cells = (o.layer, short_load(o), metric.title, f"{shift} {metric.unit}".rstrip(), pct_text(o.diff), o.verdict)
        table.add_row(*(Text(c) for c in cells))
    return [table, *(Text(line) for line in layer_lines(items, data))]
