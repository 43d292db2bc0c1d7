"""An experiment directory (experiment.json and a run directory per cell) -> what the report shows
of it: one row per aggregate (trials as mean ± CI), the finished cells' time series and request
outcomes, and the experiment's header (servers, cells, model, dataset, SLO)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from tokenbench.metrics.catalogue import SLO_DISTRIBUTIONS, shown_in
from tokenbench.report.read.data import CellInfo, ExperimentHeader, Part, PointRow, RunSeries, ServerInfo, Slo, SlowRow
from tokenbench.report.read.programs import program_rows, session_rows
from tokenbench.report.read.run_dir import (
    SLOWEST_REQUESTS,
    dataset_text,
    facts_text,
    image_rows,
    load_value,
    phase_rows,
    point_spans,
    read_capacity,
    replica_rows,
    scaling_rows,
    slo_of,
    slow_rows,
    stage_rows,
    turn_rows,
)
from tokenbench.results import NO_TRIALS, Experiment, RunResults
from tokenbench.results.layout import RESULTS
from tokenbench.rundir.read import ReportInputError, StaleLayoutError, read_experiment, read_results

# experiment.json's spec (or a part of it): the user's YAML document as given, any shape (a true
# edge); the header reads a few keys of it when no cell has results.
SpecDoc = dict[str, Any]

# The headline metrics every row has (a key an older aggregate lacks reads as "no trials").
METRIC_NAMES: tuple[str, ...] = tuple(m.key for m in shown_in("aggregates"))

Outcomes = dict[tuple[str, str, int], dict[str, int]]  # (server, variant, point) -> outcome -> count


def read_experiment_dir(path: Path) -> Part:
    exp = read_experiment(path)
    name = exp.name or str(exp.spec.get("name") or path.name)
    many_variants = len({c.variant for c in exp.cells.values()} | {a.variant for a in exp.aggregates}) > 1
    cell_results = _cell_results(path, exp)
    outcomes, series = _finished_cells(path, exp, cell_results, many_variants)
    apis = {(c.server, c.variant): r.target.api for k, c in exp.cells.items() if (r := cell_results.get(k))}
    rows = _rows(exp, name, outcomes, many_variants, apis)
    header = _header(path, exp, name, next(iter(cell_results.values()), None))
    part = Part(name, [], [header], rows, series, [header.slo])
    for cell_id, cell in exp.cells.items():  # multi-turn session cells: TTFT by turn, per trial
        if cell_id in cell_results and cell.status == "ok":
            config = _config(cell.server, cell.variant, many_variants)
            rows_of_cell = turn_rows(cell_results[cell_id], config)
            part.turns += [replace(t, label=f"{t.label} · trial {cell.trial}") for t in rows_of_cell]
            image_rows_of_cell = image_rows(cell_results[cell_id], config)  # images
            part.images += [replace(i, label=f"{i.label} · trial {cell.trial}") for i in image_rows_of_cell]
            # server spans: each cell's points, and its slowest requests (kept below per configuration)
            part.phases += [
                replace(p, label=f"{p.label} · trial {cell.trial}") for p in phase_rows(cell_results[cell_id], config)
            ]
            slow = slow_rows(path / cell.run_dir, cell_results[cell_id], config)
            part.slowest += [replace(r, label=f"{r.label} · trial {cell.trial}") for r in slow]
            # agent programs: each cell's points, slowest sessions and the slowest one's timeline
            trial = f" · trial {cell.trial}"
            part.programs += [replace(r, label=r.label + trial) for r in program_rows(cell_results[cell_id], config)]
            found, timelines = session_rows(path / cell.run_dir, cell_results[cell_id], config)
            part.sessions += [replace(r, label=r.label + trial) for r in found]
            part.timelines += [replace(t, label=t.label + trial) for t in timelines]
            part.stages += [replace(r, label=r.label + trial) for r in stage_rows(cell_results[cell_id], config)]
            part.scaling += [replace(r, label=r.label + trial) for r in scaling_rows(cell_results[cell_id], config)]
            part.replicas += [replace(r, label=r.label + trial) for r in replica_rows(cell_results[cell_id], config)]
        if cell.status == "ok":  # a search cell: its capacity.json (an unfinished search is not ranked)
            part.capacities += read_capacity(path / cell.run_dir, _config(cell.server, cell.variant, many_variants))
    part.slowest = _slowest_per_config(part.slowest)
    return part


def _slowest_per_config(rows: list[SlowRow]) -> list[SlowRow]:
    """Each configuration's SLOWEST_REQUESTS slowest over all its cells, slowest first."""
    by_config: dict[str, list[SlowRow]] = {}
    for r in rows:
        by_config.setdefault(r.config, []).append(r)
    return [r for group in by_config.values() for r in sorted(group, key=lambda r: -r.ttft_s)[:SLOWEST_REQUESTS]]


def _config(label: str, variant: str | None, many_variants: bool) -> str:
    return f"{label} · {variant}" if many_variants and variant is not None else label


def _cell_results(path: Path, exp: Experiment) -> dict[str, RunResults]:
    """Each cell's results.json that exists: time series, outcomes and header facts."""
    out = {}
    for cell_id, cell in exp.cells.items():
        if (path / cell.run_dir / RESULTS).is_file():
            try:
                out[cell_id] = read_results(path / cell.run_dir)
            except StaleLayoutError:
                raise
            except ReportInputError:
                continue  # a cell killed mid-write; its aggregate (if any) still shows
    return out


def _finished_cells(
    path: Path, exp: Experiment, cell_results: dict[str, RunResults], many_variants: bool
) -> tuple[Outcomes, list[RunSeries]]:
    """Outcomes summed per (server, variant, point) and one time series per cell. Only finished
    cells, as in the aggregates: an interrupted trial's partial point would mix into the outcome
    shares and the stability verdict (it is listed with its status)."""
    outcomes: Outcomes = {}
    series = []
    for cell_id, cell in exp.cells.items():
        results = cell_results.get(cell_id)
        if results is None or cell.status != "ok":
            continue
        for p in results.points:
            acc = outcomes.setdefault((cell.server, cell.variant, p.index), {})
            for outcome, n in p.requests.by_outcome.items():
                acc[outcome] = acc.get(outcome, 0) + int(n)
        config = _config(cell.server, cell.variant, many_variants)
        series.append(
            RunSeries(
                title=f"{config} · trial {cell.trial}",
                config=config,
                trial=cell.trial,
                run_dir=path / cell.run_dir,
                points=point_spans(results),
            )
        )
    return outcomes, series


def _rows(
    exp: Experiment, name: str, outcomes: Outcomes, many_variants: bool, apis: dict[tuple[str, str], str | None]
) -> list[PointRow]:
    """One row per aggregate; ``apis``: the API each (server, variant)'s cells sent by."""
    backend_of = {s.label: s.backend for s in exp.servers}
    upstream_of = {s.label: s.upstream for s in exp.servers}
    rows = []
    for agg in exp.aggregates:
        metrics = {k: agg.metrics.get(k, NO_TRIALS) for k in (*agg.metrics, *METRIC_NAMES)}
        rows.append(
            PointRow(
                source=name,
                config=_config(agg.server, agg.variant, many_variants),
                backend=agg.backend or backend_of.get(agg.server),
                swept=dict(agg.swept),
                variant=agg.variant,
                point=agg.point,
                label=agg.label,
                load_kind=agg.load.kind,
                load_value=load_value(agg.load),
                metrics=metrics,
                outcomes=outcomes.get((agg.server, agg.variant, agg.point), {}),
                num_trials=max((s.n for s in metrics.values()), default=0),
                upstream=upstream_of.get(agg.server),
                server=agg.server,
                api=apis.get((agg.server, agg.variant)),
            )
        )
    return rows


def _load_text(load: SpecDoc, search: SpecDoc | None = None) -> str:
    if search:
        return f"capacity search ({search.get('variable', 'rate')}) under {search.get('slo')}"
    if load.get("users"):
        return "users " + ", ".join(str(u) for u in load["users"])
    if load.get("rates"):
        return "rates " + ", ".join(f"{r:g}" for r in load["rates"]) + " req/s"
    return "–"


def _spec_slo(spec: SpecDoc) -> Slo:
    slo = spec.get("slo") or {}
    return {d.key: slo.get(d.key) for d in SLO_DISTRIBUTIONS}


def _spec_model(spec: SpecDoc) -> str | None:
    models = {b.get("model") for b in spec.get("backends") or [] if b.get("model")}
    return ", ".join(sorted(str(m) for m in models)) or None


def _spec_dataset(spec: SpecDoc) -> str:
    d = spec.get("dataset")
    if not d:
        return "–"
    return dataset_text(d.get("name"), d.get("source"), d.get("system_prompt"), d.get("unique_prefix"), None)


def _header(path: Path, exp: Experiment, name: str, first: RunResults | None) -> ExperimentHeader:
    """The experiment's facts; model, dataset and SLO from its first cell with results, else
    from its spec (every server failed)."""
    spec = exp.spec
    model = first.target.model if first is not None else None
    return ExperimentHeader(
        path=path,
        name=name,
        description=exp.description or str(spec.get("description") or ""),
        complete=exp.complete,
        trials=spec.get("trials") if isinstance(spec.get("trials"), int) else None,  # "auto": trials_needed
        trials_needed=tuple(f"{r.server} · {r.variant}: {r.trials} ({r.stopped_by})" for r in exp.trials_needed),
        load=_load_text(spec.get("load") or {}, spec.get("search")),
        model=model if model is not None else _spec_model(spec),
        dataset=facts_text(first.dataset) if first is not None else _spec_dataset(spec),
        slo=slo_of(first) if first is not None else _spec_slo(spec),
        servers=tuple(
            ServerInfo(
                label=s.label,
                config=s.label,
                backend=s.backend,
                swept=dict(s.swept),
                status=s.status,
                error=s.error,
                cold_start_s=s.cold_start_s,
                engine_version=s.engine_version,
                upstream=s.upstream,
            )
            for s in exp.servers
        ),
        cells=tuple(
            CellInfo(cell_id=cid, server=c.server, variant=c.variant, trial=c.trial, status=c.status, error=c.error)
            for cid, c in exp.cells.items()
        ),
    )
