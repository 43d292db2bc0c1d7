"""report.md: the outline (outline.py) in Markdown, its sections' text and tables, then every
chart linked as its PNG."""

from __future__ import annotations

from pathlib import Path

from tokenbench.console.fmt import md
from tokenbench.report.render.outline import Block, ReportOutline, Section
from tokenbench.report.sections.tables import Table


def table_md(table: Table | None) -> str:
    if table is None:
        return ""
    align = ["---:" if i in table.numeric else "---" for i in range(len(table.headers))]
    lines = ["| " + " | ".join(md(h) for h in table.headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines) + "\n"


def _block_md(block: Block) -> list[str]:
    out = []
    if block.md_heading is None and block.heading:
        out += [f"{'#' * block.level} {md(block.heading)}", ""]
    elif block.md_heading:
        out += [md(block.md_heading), ""]
    if block.md_caption:
        out += [md(block.md_caption), ""]
    out += [f"- **{md(k)}**: {md(v)}" for k, v in block.facts] + ([""] if block.facts else [])
    out += [f"- {md(line)}" for line in block.lines] + ([""] if block.lines else [])
    if block.text:
        out += [md(block.text), ""]
    if block.table is not None:
        out += [table_md(block.table)]
    return out


def _section_md(section: Section) -> list[str]:
    out = [f"## {md(section.short_title or section.title)}", ""]
    if section.md_caption:
        out += [md(section.md_caption), ""]
    for block in section.blocks:
        out += _block_md(block)
    return out


def render_markdown(outline: ReportOutline, png_paths: list[Path]) -> str:
    out = ["# tokenbench report", ""]
    for section in outline.sections:
        if section.in_md:
            out += _section_md(section)
    if outline.charts:
        out += ["## Charts", ""]
        for chart, path in zip(outline.charts, png_paths):
            out += [f"### {md(chart.title)}", "", f"![{chart.chart_id}]({path.as_posix()})", "", md(chart.caption), ""]
    return "\n".join(out).rstrip() + "\n"
