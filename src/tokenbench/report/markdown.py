"""report.md: the report's text (inputs, verdict, tables) in Markdown, charts linked as PNGs."""

from __future__ import annotations

from pathlib import Path

from .charts import Chart
from .fmt import md
from .load import ReportData
from .tables import (
    Table,
    best_table,
    experiment_facts,
    failed_cells_table,
    headline_table,
    runs_table,
    saturation_table,
    servers_table,
    slo_table,
    stability_table,
    verdict_lines,
)
from .verdict import Verdict, slo_text


def table_md(table: Table | None) -> str:
    if table is None:
        return ""
    align = ["---:" if i in table.numeric else "---" for i in range(len(table.headers))]
    lines = ["| " + " | ".join(md(h) for h in table.headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines) + "\n"


def render_markdown(data: ReportData, verdict: Verdict, charts: list[Chart], png_paths: list[Path]) -> str:
    out = ["# tokenbench report", ""]
    out += ["## Inputs", ""]
    if data.runs:
        out += [table_md(runs_table(data))]
    for exp in data.experiments:
        out += [f"### Experiment {md(exp.name)}", ""]
        out += [f"- **{md(k)}**: {md(v)}" for k, v in experiment_facts(exp)] + [""]
        out += [table_md(servers_table(exp))]
        failed = failed_cells_table(exp)
        if failed is not None:
            out += ["Cells that did not finish:", "", table_md(failed)]
    out += ["## Verdict", ""]
    out += [f"- {md(line)}" for line in verdict_lines(verdict, data)] + [""]
    slos = [t for t in (slo_text(s) for s in data.slos) if t]
    best = best_table(verdict)
    if best is not None:
        out += ["### Best at each load", "", table_md(best)]
    if verdict.slo:
        out += ["### Service-level objectives", ""]
        if slos:
            out += [f"SLO: {md('; '.join(slos))}.", ""]
        out += [table_md(slo_table(verdict))]
    sat = saturation_table(verdict, data)
    if sat is not None:
        out += [
            "### Saturation",
            "",
            "First offered rate whose median TTFT exceeds 2x the lowest rate's, or whose achieved "
            "request rate is below 90% of the arrivals scheduled in its window.",
            "",
            table_md(sat),
        ]
    headline = headline_table(data)
    if headline is not None:
        out += [
            "## Headline numbers",
            "",
            "Mean over trials ± 95% CI half-width; – means not measured.",
            "",
            table_md(headline),
        ]
    stab = stability_table(verdict)
    if stab is not None:
        out += ["## Stability over time", "", table_md(stab)]
    if charts:
        out += ["## Charts", ""]
        for chart, path in zip(charts, png_paths):
            out += [f"### {md(chart.title)}", "", f"![{chart.chart_id}]({path.as_posix()})", "", md(chart.caption), ""]
    return "\n".join(out).rstrip() + "\n"
