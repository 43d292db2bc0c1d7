"""Runs imported from another tool (``tokenbench import``): the tool's own figures beside
tokenbench's over the same requests, the difference, and the definition that explains it
(results.json ``imported``; imports/definitions.py). Pure: report data in, a table out."""

from __future__ import annotations

from tokenbench.console import fmt
from tokenbench.console.fmt import NULL_TEXT
from tokenbench.metrics.catalogue import METRICS, metric_of
from tokenbench.report.read.data import ReportData
from tokenbench.report.sections.tables import Table
from tokenbench.results.imported import NO_REQUESTS

IMPORTED_CAPTION = (
    "A run imported from another tool's result file: each of the tool's headline figures beside tokenbench's "
    "over the same requests (tokenbench's definitions, METRICS.md), the difference as (tool − tokenbench) / "
    "tokenbench, and, where the formulas differ, how. A source of aggregates only (a Benchmark Report) holds "
    "no requests: its figures are the tool's alone, and the report's tables show them for its run."
)


def imported_table(data: ReportData) -> Table | None:
    """One row per (imported run, point, figure); None when no input was imported."""
    rows = []
    for run in data.runs:
        if run.imported is None:
            continue
        for point in run.imported.points:
            for f in point.figures:
                metric = metric_of(f.metric) or METRICS[f.metric]
                diff = NULL_TEXT if f.difference is None else f"{f.difference * 100:+.2f}%"
                rows.append(
                    [
                        run.name,
                        f"{run.imported.tool} {run.imported.version or ''}".rstrip(),
                        str(point.index),
                        metric.label,
                        f.tool_name,
                        fmt.num(f.tool_value, metric.digits, metric.scale),
                        fmt.num(f.tokenbench_value, metric.digits, metric.scale),
                        NO_REQUESTS if run.imported.aggregate_only else diff,
                        "same definition" if f.same_definition else f.definition,
                    ]
                )
    if not rows:
        return None
    headers = ["run", "tool", "point", "metric", "the tool's name", "the tool's", "tokenbench's", "difference", "why"]
    return Table(headers, rows, numeric=(5, 6, 7))


def imported_warnings(data: ReportData) -> list[str]:
    """What the imported files show went wrong, a line per (run, point, warning): a schedule the
    tool did not keep, the tool's own warnings (results.json ``imported.points[].warnings``)."""
    return [
        f"{run.name}, point {point.index}: {warning}"
        for run in data.runs
        if run.imported is not None
        for point in run.imported.points
        for warning in point.warnings
    ]
