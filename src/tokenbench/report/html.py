"""`write_report`: run/experiment directories -> report.html (self-contained, offline),
charts/*.png and report.md.

For the CLI (``tokenbench report DIR... [--out D]``):

    files = write_report([Path(d) for d in dirs], out or dirs[0])
    print(files.html, files.markdown, *files.charts)

A directory that is neither a run nor an experiment raises ``load.ReportInputError`` whose
message names it (print it and exit non-zero).

The page inlines plotly.js once and draws every figure from a Chart spec (charts.py). Every
string that came from a file, a server or a dataset is escaped with html.escape before it reaches
the page, plotly titles, legends and hover texts included.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go
import plotly.offline
from plotly.subplots import make_subplots

from .charts import MAX_TIMESERIES_CHARTS, Chart, build_charts
from .fmt import esc
from .load import ReportData, load_inputs
from .markdown import render_markdown
from .png import write_pngs
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
from .verdict import Verdict, decide, slo_text

_PLOTLY_SYMBOLS = {"circle": "circle", "x": "x", "star": "star"}


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    markdown: Path
    charts: list[Path]


def write_report(dirs: list[Path], out_dir: Path) -> ReportFiles:
    """Read ``dirs`` (run or experiment directories, in this order) and write ``out_dir``/
    report.html, report.md and charts/<chart>.png (files of the same name are overwritten).
    Raises load.ReportInputError for a directory that is neither a run nor an experiment."""
    data = load_inputs([Path(d) for d in dirs])
    verdict = decide(data)
    charts = build_charts(data, verdict)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pngs = write_pngs(charts, out_dir / "charts")
    html_path = out_dir / "report.html"
    html_path.write_text(render_html(data, verdict, charts), encoding="utf-8")
    md_path = out_dir / "report.md"
    md_path.write_text(render_markdown(data, verdict, charts, [p.relative_to(out_dir) for p in pngs]), encoding="utf-8")
    return ReportFiles(html_path, md_path, pngs)


# ---------------------------------------------------------------------------------------------
# plotly


def plot_text(text: object) -> str:
    """Text for a plotly title, legend, axis or hover: HTML-escaped (plotly renders a subset of
    HTML tags and decodes &lt; &gt; &amp;, so escaped text shows literally). A string wrapped in
    "$" would be taken for LaTeX; a zero-width space in front keeps it text."""
    s = esc(text).replace("&quot;", '"').replace("&#x27;", "'")
    return "\u200b" + s if s.startswith("$") else s


def plotly_figure(chart: Chart) -> go.Figure:
    rows = len(chart.panels)
    fig = make_subplots(
        rows=rows, cols=1, shared_xaxes=not chart.x_categorical, vertical_spacing=0.06 if rows > 2 else 0.1
    )
    for row, panel in enumerate(chart.panels, start=1):
        for s in panel.series:
            name = plot_text(s.name)
            # Text from files goes through `text`, never into the template, where %{...} is code.
            hover = [plot_text(h) for h in s.hover] if s.hover else [name] * len(s.x)
            common = dict(
                name=name,
                legendgroup=name,
                showlegend=s.show_legend,
                text=hover,
                hovertemplate="%{text}<br>x=%{x}<br>y=%{y}<extra></extra>",
            )
            if s.kind == "bar":
                trace = go.Bar(
                    x=[plot_text(x) for x in s.x], y=s.y, marker_color=s.color, textposition="none", **common
                )
            else:
                mode = {"markers": "markers", "dash": "lines", "line": "lines+markers" if len(s.x) < 60 else "lines"}[
                    s.kind
                ]
                trace = go.Scatter(
                    x=s.x,
                    y=s.y,
                    mode=mode,
                    connectgaps=False,
                    line=dict(color=s.color, dash="dash" if s.kind == "dash" else "solid", width=1.5),
                    marker=dict(
                        color=s.color,
                        symbol=_PLOTLY_SYMBOLS.get(s.symbol, "circle"),
                        size=14 if s.symbol in ("x", "star") else 7,
                    ),
                    error_y=dict(type="data", array=s.error, visible=True, thickness=1) if s.error else None,
                    **common,
                )
            fig.add_trace(trace, row=row, col=1)
        if panel.log_y:
            fig.update_yaxes(title_text=plot_text(panel.y_label), row=row, col=1, type="log")
        else:
            fig.update_yaxes(title_text=plot_text(panel.y_label), row=row, col=1, rangemode="tozero")
        if panel.stacked:
            fig.update_layout(barmode="stack")
    fig.update_xaxes(title_text=plot_text(chart.x_label), row=rows, col=1)
    # Shapes as one list: plotly's add_vrect/add_vline(row="all") re-validate the whole layout on
    # every call (seconds for a timeline with a few dozen points).
    shapes, annotations = [], []
    for row in range(1, rows + 1):
        axis = "" if row == 1 else str(row)
        for span in chart.spans:
            shapes.append(
                dict(
                    type="rect",
                    xref=f"x{axis}",
                    yref=f"y{axis} domain",
                    x0=span.x0,
                    x1=span.x1,
                    y0=0,
                    y1=1,
                    line_width=0,
                    layer="below",
                    fillcolor="#888888" if span.kind == "ramp" else "#cccccc",
                    opacity=0.25 if span.kind == "ramp" else 0.2,
                )
            )
        for mark in chart.marks:
            shapes.append(
                dict(
                    type="line",
                    xref=f"x{axis}",
                    yref=f"y{axis} domain",
                    x0=mark.x,
                    x1=mark.x,
                    y0=0,
                    y1=1,
                    line=dict(width=1, dash="dot", color="#555555"),
                )
            )
    for mark in chart.marks:
        annotations.append(
            dict(
                x=mark.x,
                y=1.0,
                xref="x",
                yref="paper",
                text=plot_text(mark.label),
                showarrow=False,
                xanchor="left",
                yanchor="bottom",
                font=dict(size=10),
            )
        )
    if shapes or annotations:
        fig.update_layout(shapes=shapes, annotations=annotations)
    height_px = max(380, 200 * rows + 170)
    # Title, then legend, then the plot, placed in pixels from the top (container coordinates) so
    # that they never overlap, however tall the figure is.
    fig.update_layout(
        title=dict(text=plot_text(chart.title), yref="container", y=1 - 12 / height_px, yanchor="top"),
        template="plotly_white",
        height=height_px,
        margin=dict(l=70, r=20, t=110, b=60),
        legend=dict(orientation="h", yref="container", y=1 - 44 / height_px, yanchor="top", xanchor="left", x=0),
        hoverlabel=dict(namelength=-1),
    )
    return fig


def figure_html(chart: Chart) -> str:
    return plotly_figure(chart).to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=f"chart-{chart.chart_id}",
        config={"displaylogo": False, "responsive": True},
    )


# ---------------------------------------------------------------------------------------------
# page


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


def _charts_html(charts: list[Chart], section: str) -> str:
    parts = []
    for c in charts:
        if c.section != section:
            continue
        parts.append(
            f'<figure class="chart">{figure_html(c)}</figure><p class="caption">{esc(c.caption)} '
            f'<span class="muted">(charts/{esc(c.chart_id)}.png)</span></p>'
        )
    return "\n".join(parts)


def _inputs_html(data: ReportData) -> str:
    parts = ['<section id="inputs"><h2>What was benchmarked</h2>']
    if data.runs:
        parts.append("<h3>Runs</h3>" + table_html(runs_table(data)))
    for exp in data.experiments:
        facts = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in experiment_facts(exp))
        parts.append(f'<h3>Experiment {esc(exp.name)}</h3><dl class="facts">{facts}</dl>')
        parts.append("<h4>Server configurations</h4>" + table_html(servers_table(exp)))
        failed = failed_cells_table(exp)
        if failed is not None:
            parts.append("<h4>Cells that did not finish</h4>" + table_html(failed))
    parts.append("</section>")
    return "\n".join(parts)


def _verdict_html(data: ReportData, verdict: Verdict) -> str:
    items = "".join(f"<li>{esc(line)}</li>" for line in verdict_lines(verdict, data))
    slos = [t for t in (slo_text(s) for s in data.slos) if t]
    slo_line = f"<p>SLO: {esc('; '.join(slos))}.</p>" if slos else ""
    return (
        '<section id="verdict"><h2>Verdict</h2>'
        f'<ul class="verdict">{items}</ul>'
        + (
            "<h3>Best at each load</h3>"
            '<p class="caption">Best TTFT: lowest mean TTFT. Best throughput: highest output tokens/s. '
            "A lead is clear when the two 95% confidence intervals do not overlap. Most stable: lowest "
            "coefficient of variation of the steady-state windowed output tokens/s (mean over trials).</p>"
            + table_html(best_table(verdict))
            if verdict.loads
            else ""
        )
        + ("<h3>Service-level objectives</h3>" + slo_line + table_html(slo_table(verdict)) if verdict.slo else "")
        + (
            "<h3>Saturation</h3>" + table_html(saturation_table(verdict, data))
            if saturation_table(verdict, data)
            else ""
        )
        + "</section>"
    )


def render_html(data: ReportData, verdict: Verdict, charts: list[Chart]) -> str:
    sources = [h.name for h in data.runs] + [e.name for e in data.experiments]
    sections = [("inputs", "Inputs"), ("verdict", "Verdict"), ("headline", "Headline numbers")]
    chart_sections = [
        ("load", "Latency and throughput vs load"),
        ("knobs", "Engine settings"),
        ("tradeoff", "Latency–throughput trade-off"),
        ("errors", "Errors"),
    ]
    present = {c.section for c in charts}
    sections += [(k, t) for k, t in chart_sections if k in present or k == "errors"]
    sections.append(("stability", "Stability over time"))
    nav = "".join(f'<a href="#{k}">{esc(t)}</a>' for k, t in sections)

    body = [
        f'<header><h1>tokenbench report</h1><p class="muted">{esc(", ".join(sources))} · generated '
        f"{esc(_dt.datetime.now().astimezone().isoformat(timespec='seconds'))}</p><nav>{nav}</nav></header>",
        _inputs_html(data),
        _verdict_html(data, verdict),
        '<section id="headline"><h2>Headline numbers</h2><p class="caption">Per configuration and load: mean over '
        "trials ± 95% CI half-width (no CI with one trial). Latencies over successful requests in the "
        "measurement window; – means not measured.</p>"
        + (table_html(headline_table(data)) if data.rows else "<p>No load point finished.</p>")
        + "</section>",
    ]
    for key, title in chart_sections:
        if key in present:
            body.append(f'<section id="{key}"><h2>{esc(title)}</h2>{_charts_html(charts, key)}</section>')
        elif key == "errors":
            text = (
                "No failed requests: every request of every point ended ok."
                if data.rows
                else "No requests were measured."
            )
            body.append(f'<section id="errors"><h2>Errors</h2><p>{text}</p></section>')
    hidden = max(0, len(data.series) - MAX_TIMESERIES_CHARTS)
    body.append(
        '<section id="stability"><h2>Stability over time</h2><p class="caption">Steady state = windows after '
        "ramp-up and warm-up and before the load stopped. Head vs tail: the first and last minute with at least "
        "3 minutes of steady state, else the first and last third of the windows. Flagged when the tail's output "
        "rate is more than 5% below the head's.</p>"
        + table_html(stability_table(verdict))
        + (f'<p class="muted">{hidden} more run(s) are in the table but not drawn.</p>' if hidden else "")
        + _charts_html(charts, "timeseries")
        + "</section>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'  # no favicon request (a console error under file://)
        f"<title>tokenbench report: {esc(', '.join(sources))}</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script></head>\n<body>\n'
        + "\n".join(body)
        + "\n</body></html>\n"
    )
