"""Many runs and experiments as one table: one row per measured point (a run's point, an
experiment cell's point: each trial its own row), keyed by engine, version, model, knobs, dataset,
load and date, with every headline metric (the catalogue's ``aggregates`` view) as a column.

Written as Parquet (pyarrow): any dataframe library, DuckDB or Spark reads it without a server
(``SELECT engine, version, date, ttft_s_p99 FROM 'history.parquet' ORDER BY date``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tokenbench.errors import BadInput
from tokenbench.metrics.catalogue import Metric, shown_in
from tokenbench.report.read.run_dir import load_value
from tokenbench.results import RunResults
from tokenbench.results.layout import RESULTS
from tokenbench.results.manifest import ATTACHED
from tokenbench.rundir.read import is_experiment_dir, is_run_dir, read_experiment, read_results

# The columns that say what was measured (a configuration is all of them but version and date: a
# configuration's line over time shows its versions).
KEY_COLUMNS = ("engine", "version", "model", "knobs", "dataset", "load", "date")
CONFIG_COLUMNS = ("engine", "model", "knobs", "dataset", "load")
METRIC_COLUMNS: tuple[Metric, ...] = shown_in("aggregates")

Row = dict[str, Any]  # a Parquet row: column -> a JSON scalar or a datetime


def find_inputs(dirs: Sequence[Path]) -> list[Path]:
    """Each directory that is a run or an experiment, or else every run and experiment under it
    (an experiment's cells are its own, not separate runs). None at all is bad input."""
    found: list[Path] = []
    for d in map(Path, dirs):
        if not d.is_dir():
            raise BadInput(f"history: {d} is not a directory")
        before = len(found)
        found += list(_walk(d))
        if len(found) == before:
            raise BadInput(f"history: no run (results.json) or experiment (experiment.json) in {d}")
    return list(dict.fromkeys(found))


def _walk(d: Path) -> Iterator[Path]:
    if is_experiment_dir(d) or is_run_dir(d):
        yield d
        return
    for child in sorted(p for p in d.iterdir() if p.is_dir()):
        yield from _walk(child)


def _date(results: RunResults, source: Path) -> dt.datetime:
    """When the run started (its clock's origin); a run without a clock: when results.json was written."""
    unix_s = results.clock.origin_unix_s if results.clock is not None else (source / RESULTS).stat().st_mtime
    return dt.datetime.fromtimestamp(float(unix_s), tz=dt.UTC)


def _rows(
    results: RunResults, source: Path, kind: str, experiment: str | None, config: str, trial: int | None
) -> list[Row]:
    t = results.target
    base: Row = {
        "source": str(source),
        "kind": kind,
        "experiment": experiment,
        "config": config,
        "engine": t.engine or t.backend or ATTACHED,
        "version": t.engine_version,
        "model": t.model,
        "knobs": json.dumps(t.knobs or {}, sort_keys=True, default=str),
        "dataset": results.dataset.name if results.dataset is not None else None,
        "date": _date(results, source),
        "tokenbench_version": results.tool.version if results.tool is not None else None,
    }
    rows = []
    seen: dict[str, int] = {}
    for p in results.points:
        load_id = p.load.model_dump_json()
        seen[load_id] = seen.get(load_id, 0) + 1  # a run's repeats of a load are its trials
        row = dict(base)
        row.update(
            load=p.label,
            load_kind=p.load.kind,
            load_value=load_value(p.load),
            point=p.index,
            trial=trial if trial is not None else seen[load_id],
            interrupted=p.interrupted,
        )
        row.update({m.key: _float(m.get(p)) for m in METRIC_COLUMNS})
        rows.append(row)
    return rows


def _float(v: float | None) -> float | None:
    return None if v is None else float(v)


def gather(dirs: Sequence[Path]) -> list[Row]:
    """Every point of every run and experiment found under ``dirs``, oldest first."""
    rows: list[Row] = []
    for d in find_inputs(dirs):
        if is_experiment_dir(d):
            exp = read_experiment(d)
            for cell in exp.cells.values():
                cell_dir = d / cell.run_dir
                if cell.status != "ok" or not (cell_dir / RESULTS).is_file():
                    continue
                results = read_results(cell_dir)
                rows += _rows(results, cell_dir, "experiment", exp.name, cell.server, cell.trial)
        else:
            results = read_results(d)
            rows += _rows(results, d, "run", None, results.target.backend or "run", None)
    rows.sort(key=lambda r: (r["date"], r["source"], r["point"]))
    return rows


def write_parquet(rows: list[Row], path: Path) -> Path:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path
