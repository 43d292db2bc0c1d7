"""`tokenbench export DIR`: a run's (or an experiment's) files as tables anyone can load.

Three tables, written with pyarrow as Parquet (or CSV), so a pandas, polars or DuckDB user needs
no parser of ours:
- ``records``: one row per request, every field of records.jsonl plus the per-request figures
  derived from it (``ttft_s``, ``ttfo_s``, ``e2e_s``, ``tpot_s``, ``queue_s``, ``chunks``, ``streamed_tokens``,
  ``ttftc_s``; structured output's ``structured``, ``output_parsed``, ``output_valid`` and the tool
  calls' ``tool_calls``, ``tool_args_parsed`` ... are records.jsonl fields; the HTTP phases
  ``pool_wait_s``, ``connect_s``, ``response_headers_s`` ... too); with server spans (
  --server-traces) each request's server phases: ``server_arrival_s``, ``server_network_s``, ``server_frontend_s``,
  ``server_queue_s``, ``server_prefill_s``, ``server_ttft_s``, ``server_first_token_s``,
  ``server_delivery_s``, ``server_decode_s``, ``server_finish_s``, ``client_minus_server_ttft_s``
  (null without a joined span);
- ``points``: one row per load point, results.json's point flattened with ``_`` (``ttft_s_p99``,
  ``requests_by_outcome_ok``, ``server_preemptions``...), its time series left to
- ``timeseries``: one row per window of a point.
Every row carries the run's facts as columns (``run_dir``, ``tool_version``, ``backend``,
``engine``, ``engine_version``, ``model``, ``api``, ``dataset``) and, for an experiment's cells,
``experiment``, ``server``, ``variant``, ``trial``.

In CSV a list (``chunk_times_s``) or a mapping (``server_timings``) is a JSON string; in Parquet
``chunk_times_s`` is a list of doubles and ``server_timings`` a JSON string (its keys differ by
engine).
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any, Literal

from tokenbench.errors import BadInput
from tokenbench.metrics.catalogue import E2E, QUEUE, TPOT, TTFO, TTFT
from tokenbench.records import RequestRecord
from tokenbench.results.layout import EXPERIMENT, RECORDS, RESULTS, SPANS
from tokenbench.rundir import read_records
from tokenbench.rundir.read import read_results
from tokenbench.spans.phases import GRACE_S, RequestPhases, SpanIndex, request_phases

Format = Literal["parquet", "csv", "benchmark-report"]
TABLES = ("records", "points", "timeseries")

# results.json or experiment.json read as plain JSON: every key becomes a column, whatever the
# layout's version, so export reads no model (a true edge: any shape).
Json = dict[str, Any]
Row = dict[str, object]  # one table row: a column's name -> its JSON value


class ExportError(BadInput):
    """A directory that cannot be exported; the message says why."""


def flatten(data: Json, prefix: str = "") -> Row:
    """{"ttft_s": {"p99": 1.0}} -> {"ttft_s_p99": 1.0}; lists are kept as they are."""
    out: Row = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "_"))
        else:
            out[name] = value
    return out


def run_facts(run_dir: Path, results: Json) -> Row:
    target = results.get("target") or {}
    dataset = results.get("dataset") or {}
    return {
        "run_dir": str(run_dir),
        "tool_version": (results.get("tool") or {}).get("version"),
        "backend": target.get("backend"),
        "engine": target.get("engine"),
        "engine_version": target.get("engine_version"),
        "model": target.get("model"),
        "api": target.get("api"),
        "dataset": dataset.get("name"),
    }


def run_tables(run_dir: Path, extra: Row | None = None) -> dict[str, list[Row]]:
    """The three tables' rows of one run directory."""
    run_dir = Path(run_dir)
    results_path = run_dir / RESULTS
    if not results_path.is_file():
        raise ExportError(f"{run_dir}: no results.json (`tokenbench recompute {run_dir}` derives it from the records)")
    results = read_results(run_dir).to_json()
    facts = {**run_facts(run_dir, results), **(extra or {})}
    records: list[Row] = []
    joiner = _ServerPhases.of(run_dir, results)
    if (run_dir / RECORDS).is_file():
        for r in read_records(run_dir):
            row = r.to_json(keep_text=r.output_text is not None)
            row["server_timings"] = json.dumps(row["server_timings"]) if row["server_timings"] is not None else None
            row.update(
                {
                    TTFT.key: r.ttft_s,
                    TTFO.key: r.ttfo_s,  # = TTFT unless the reply began with reasoning
                    E2E.key: r.e2e_s,
                    TPOT.key: r.tpot_s,
                    QUEUE.key: r.queue_s,
                    "chunks": len(r.chunk_times_s),
                    "streamed_tokens": r.streamed_tokens,
                    "ttftc_s": r.ttftc_s,  # time to the first tool-call token (None without a call)
                }
            )
            if joiner is not None:
                row.update(joiner.columns(r))
            records.append({**facts, **row})
    points: list[Row] = []
    windows: list[Row] = []
    for point in results.get("points", []):
        point = dict(point)
        for window in point.pop("timeseries", None) or []:
            windows.append({**facts, "point": point["index"], **flatten(window)})
        row = flatten(point)
        row["point"] = row.pop("index")
        points.append({**facts, **row})
    return {"records": records, "points": points, "timeseries": windows}


class _ServerPhases:
    """server spans: a record's server phases as results.json derived them: its point's clock offset,
    and spans received after the point's results were due left out (late)."""

    def __init__(self, spans: SpanIndex, origin_unix_s: float, points: dict[int, tuple[float, float]]) -> None:
        self._spans, self._origin, self._points = spans, origin_unix_s, points

    @classmethod
    def of(cls, run_dir: Path, results: Json) -> _ServerPhases | None:
        clock = results.get("clock") or {}
        if clock.get("origin_unix_s") is None:
            return None
        spans = SpanIndex.read(run_dir / SPANS, float(clock["origin_unix_s"]))
        if spans is None:
            return None
        points = {}
        for p in results.get("points", []):
            offset = ((p.get("server_phases") or {}).get("clock") or {}).get("offset_s") or 0.0
            points[int(p["index"])] = (float(p["span"]["end_s"]) + GRACE_S, float(offset))
        return cls(spans, float(clock["origin_unix_s"]), points)

    def columns(self, record: RequestRecord) -> Row:
        span = self._spans.by_request.get((record.point, record.worker, record.id))
        due, offset = self._points.get(record.point, (float("inf"), 0.0))
        phases = (
            request_phases(record, span, self._origin, offset)
            if span is not None and record.ok and span.received_s <= due
            else None
        )
        return {_column(f.name): getattr(phases, f.name) if phases is not None else None for f in fields(RequestPhases)}


def _column(field: str) -> str:
    """A RequestPhases field as its records column: server_ unless it says whose it is."""
    return field if field.startswith(("server_", "client_")) else f"server_{field}"


def dir_tables(path: Path) -> dict[str, list[Row]]:
    """A run directory's tables, or an experiment's: every cell with rows, one table each."""
    path = Path(path)
    state_path = path / EXPERIMENT
    if not state_path.is_file():
        return run_tables(path)
    state = json.loads(state_path.read_text())
    tables: dict[str, list[Row]] = {name: [] for name in TABLES}
    for cell_id, cell in state.get("cells", {}).items():
        cell_dir = path / cell["run_dir"]
        if not (cell_dir / RESULTS).is_file():
            continue
        extra: Row = {
            "experiment": state.get("name"),
            "cell": cell_id,
            "server": cell.get("server"),
            "variant": cell.get("variant"),
            "trial": cell.get("trial"),
            "status": cell.get("status"),
        }
        for name, rows in run_tables(cell_dir, extra).items():
            tables[name].extend(rows)
    return tables


def to_table(rows: list[Row], csv: bool) -> object:
    """Rows (dicts with possibly different keys) -> a pyarrow Table with every key as a column,
    in first-seen order; for CSV, lists and mappings become JSON strings."""
    import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type hints

    columns: dict[str, None] = {}
    for row in rows:
        for key in row:
            columns.setdefault(key, None)
    data: dict[str, object] = {}
    for key in columns:
        values = [row.get(key) for row in rows]
        if csv or any(isinstance(v, dict) for v in values):
            values = [json.dumps(v) if isinstance(v, (list, dict)) else v for v in values]
        data[key] = pa.array(values)
    return pa.table(data)


def export(path: Path, fmt: Format = "parquet", out_dir: Path | None = None) -> dict[str, Path]:
    """Write the tables of a run or experiment directory; returns {table: file}."""
    import pyarrow.csv as pa_csv  # type: ignore[import-untyped]  # pyarrow ships no type hints
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    if fmt not in ("parquet", "csv", "benchmark-report"):
        raise ExportError(f"--format must be parquet, csv or benchmark-report, got {fmt!r}")
    out_dir = Path(out_dir or path)
    if fmt == "benchmark-report":
        return _benchmark_reports(path, out_dir)
    tables = dir_tables(path)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name in TABLES:
        table = to_table(tables[name], csv=fmt == "csv")
        file = out_dir / f"{name}.{fmt}"
        if fmt == "parquet":
            pq.write_table(table, file)
        else:
            pa_csv.write_csv(table, file)
        written[name] = file
    return written


def _benchmark_reports(path: Path, out_dir: Path) -> dict[str, Path]:
    """A run's points as llm-d Benchmark Reports v0.2.1 (history/benchmark_report.py), one file
    each: benchmark_report_<point>.json; {"benchmark_report_<point>": file}."""
    from tokenbench.history.benchmark_report import benchmark_reports

    if not (path / RESULTS).is_file():
        raise ExportError(f"{path}: --format benchmark-report exports a run directory (results.json): give a cell's")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for index, report in benchmark_reports(path).items():
        file = out_dir / f"benchmark_report_{index}.json"
        file.write_text(json.dumps(report, indent=2) + "\n")
        written[file.stem] = file
    return written
