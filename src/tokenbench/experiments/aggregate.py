"""Trials -> headline metrics as mean with a 95% confidence interval (pure but for reading files).

The metrics are the catalogue's ``aggregates`` view (``catalogue.METRICS``), under their keys.

The interval is Student's t: mean ± t(0.975, n-1) · s / √n over the trials' values; with one
trial it is None (unknown), never 0. A metric a trial does not have (None) is left out of that
metric's n.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenbench.metrics.catalogue import shown_in
from tokenbench.results import AggregateRow, Experiment, PointResult, RunResults, mean_ci95
from tokenbench.results.capacity import CapacityResult
from tokenbench.results.experiment import CapacityRow
from tokenbench.results.layout import CAPACITY, RESULTS
from tokenbench.rundir.read import read_results


def aggregate(experiment_dir: Path, state: Experiment) -> list[AggregateRow]:
    """One row per (server configuration, variant, load point) over its successful trials."""
    rows = []
    for (label, variant), trials in _finished_trials(experiment_dir, state).items():
        by_point: dict[int, list[PointResult]] = {}
        for results in trials:
            for point in results.points:
                by_point.setdefault(point.index, []).append(point)
        server = state.server(label)
        for index in sorted(by_point):
            points = by_point[index]
            rows.append(
                AggregateRow(
                    server=label,
                    backend=None if server is None else server.backend,
                    swept={} if server is None else server.swept,
                    variant=variant,
                    point=index,
                    label=points[0].label,
                    load=points[0].load,
                    metrics={m.key: mean_ci95(m.get(p) for p in points) for m in shown_in("aggregates")},
                )
            )
    return rows


def _finished_trials(experiment_dir: Path, state: Experiment) -> dict[tuple[str, str], list[RunResults]]:
    """(server, variant) -> the results of its cells that finished ok, in the state's order."""
    groups: dict[tuple[str, str], list[RunResults]] = {}
    for cell in state.cells.values():
        results_path = experiment_dir / cell.run_dir / RESULTS
        if cell.status != "ok" or not results_path.exists():
            continue
        results = read_results(results_path.parent)
        groups.setdefault((cell.server, cell.variant), []).append(results)
    return groups


def capacity_rows(experiment_dir: Path, state: Experiment) -> list[CapacityRow]:
    """One row per search cell that finished ok: its capacity.json in short."""
    rows = []
    for cell in state.cells.values():
        path = experiment_dir / cell.run_dir / CAPACITY
        if cell.status != "ok" or not path.exists():
            continue
        result = CapacityResult.model_validate(json.loads(path.read_text()))
        server = state.server(cell.server)
        at = result.at_answer
        rows.append(
            CapacityRow(
                server=cell.server,
                backend=None if server is None else server.backend,
                swept={} if server is None else server.swept,
                variant=cell.variant,
                run_dir=cell.run_dir,
                variable=result.variable,
                max_passing=result.max_passing,
                min_failing=result.min_failing,
                stopped_by=result.stopped_by,
                trials=result.trials,
                requests_per_s=None if at is None else at.requests_per_s,
                output_tokens_per_s=None if at is None else at.output_tokens_per_s,
                usd_per_million_output_tokens=None if at is None else at.usd_per_million_output_tokens,
                answer=result.answer,
            )
        )
    return rows
