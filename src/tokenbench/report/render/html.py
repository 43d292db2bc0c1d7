"""report.html: the outline (outline.py) as one self-contained page (offline: plotly.js inlined
once), every figure drawn from its Chart spec (plotly_chart.py).

Every string that came from a file, a server or a dataset is escaped with html.escape before it
reaches the page.
"""

from __future__ import annotations

import datetime as _dt

import plotly.offline  # type: ignore[import-untyped]  # plotly ships no type hints

from tokenbench.console.fmt import esc
from tokenbench.report.render.outline import Block, ReportOutline, Section
from tokenbench.report.render.plotly_chart import figure_html
from tokenbench.report.sections.tables import Table

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1200px;
       padding: 0 1.5rem 3rem; color: #222; line-height: 1.45; }
h1 { margin-top: 1.5rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2rem; margin-top: 2.2rem; }
table { border-collapse: collapse; font-size: .85rem; margin: .6rem 0 1rem; }
th, td { border: 1px solid #ddd; padding: .25rem .5rem; vertical-align: top; }
th { background: #f4f4f4; text-align: left; } td.num { text-align: right; white-space: nowrap; }
.scroll { overflow-x: auto; } .caption { color: #555; font-size: .85rem; margin: .2rem 0 1.4rem; }
.chart { border: 1px solid #eee; margin-top: 1rem; } .verdict li { margin: .25rem 0; }
nav a { margin-right: 1rem; } .muted { color: #777; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; }
.flag { color: #b00; font-weight: 600; }
"""


def table_html(table: Table | None) -> str:
    if table is None:
        return ""
    head = "".join(f"<th>{esc(h)}</th>" for h in table.headers)
    body = []
    for row in table.rows:
        cells = []
        for i, cell in enumerate(row):
            cls = ' class="num"' if i in table.numeric else ""
            text = esc(cell)
            if cell == "missed" or cell.startswith("DEGRADED"):
                text = f'<span class="flag">{text}</span>'
            cells.append(f"<td{cls}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _block_html(block: Block) -> str:
    parts = []
    if block.heading:
        parts.append(f"<h{block.level}>{esc(block.heading)}</h{block.level}>")
    if block.caption:
        parts.append(f'<p class="caption">{esc(block.caption)}</p>')
    if block.facts:
        facts = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in block.facts)
        parts.append(f'<dl class="facts">{facts}</dl>')
    if block.lines:
        parts.append('<ul class="verdict">' + "".join(f"<li>{esc(line)}</li>" for line in block.lines) + "</ul>")
    if block.text:
        parts.append(f"<p>{esc(block.text)}</p>")
    parts.append(table_html(block.table))
    return "".join(parts)


def _section_html(section: Section) -> str:
    parts = [f'<section id="{section.key}"><h2>{esc(section.title)}</h2>']
    if section.caption:
        parts.append(f'<p class="caption">{esc(section.caption)}</p>')
    parts += [_block_html(b) for b in section.blocks]
    if section.empty and not section.charts and not any(b.table for b in section.blocks):
        parts.append(f"<p>{esc(section.empty)}</p>")
    if section.note:
        parts.append(f'<p class="muted">{esc(section.note)}</p>')
    parts += [
        f'<figure class="chart">{figure_html(c)}</figure><p class="caption">{esc(c.caption)} '
        f'<span class="muted">(charts/{esc(c.chart_id)}.png)</span></p>'
        for c in section.charts
    ]
    return "\n".join(parts) + "</section>"


def render_html(outline: ReportOutline) -> str:
    sources = ", ".join(outline.sources)
    nav = "".join(f'<a href="#{s.key}">{esc(s.short_title or s.title)}</a>' for s in outline.sections)
    generated = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    header = (
        f'<header><h1>tokenbench report</h1><p class="muted">{esc(sources)} · generated '
        f"{esc(generated)}</p><nav>{nav}</nav></header>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'  # no favicon request (a console error under file://)
        f"<title>tokenbench report: {esc(sources)}</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script></head>\n<body>\n'
        + "\n".join([header] + [_section_html(s) for s in outline.sections])
        + "\n</body></html>\n"
    )
