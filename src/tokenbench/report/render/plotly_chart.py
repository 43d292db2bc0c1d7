"""A Chart spec (charts.py) drawn as a plotly figure for report.html.

Every string that came from a file, a server or a dataset is escaped (``plot_text``) before it
reaches plotly: titles, legends and hover texts included.
"""

from __future__ import annotations

import plotly.graph_objects as go  # type: ignore[import-untyped]  # plotly ships no type hints
from plotly.subplots import make_subplots  # type: ignore[import-untyped]

from tokenbench.console.fmt import esc
from tokenbench.report.chart_spec import Chart, Panel, Series, is_timeline, span_bars

_PLOTLY_SYMBOLS = {"circle": "circle", "x": "x", "star": "star"}


def plot_text(text: object) -> str:
    """Text for a plotly title, legend, axis or hover: HTML-escaped (plotly renders a subset of
    HTML tags and decodes &lt; &gt; &amp;, so escaped text shows literally). A string wrapped in
    "$" would be taken for LaTeX; a zero-width space in front keeps it text."""
    s = esc(text).replace("&quot;", '"').replace("&#x27;", "'")
    return "\u200b" + s if s.startswith("$") else s


def _span_trace(s: Series) -> go.Bar:
    """A timeline's bars: horizontal, each from its start (``base``) for its length, on its row."""
    name = plot_text(s.name)
    bars = span_bars(s)
    hover = [plot_text(s.hover[i] if s.hover else s.name) for i, _, _, _ in bars]
    return go.Bar(
        orientation="h",
        y=[row for _, row, _, _ in bars],
        base=[start for _, _, start, _ in bars],
        x=[length for _, _, _, length in bars],
        width=0.7,
        marker_color=s.color,
        name=name,
        legendgroup=name,
        showlegend=s.show_legend,
        text=hover,
        textposition="none",
        hovertemplate="%{text}<extra></extra>",
    )


def _trace(s: Series) -> go.Bar | go.Scatter:
    if s.kind == "span":
        return _span_trace(s)
    name = plot_text(s.name)
    # Text from files goes through `text`, never into the template, where %{...} is code.
    hover = [plot_text(h) for h in s.hover] if s.hover else [name] * len(s.x)
    common: dict[str, object] = dict(
        name=name,
        legendgroup=name,
        showlegend=s.show_legend,
        text=hover,
        hovertemplate="%{text}<br>x=%{x}<br>y=%{y}<extra></extra>",
    )
    if s.kind == "bar":
        return go.Bar(x=[plot_text(x) for x in s.x], y=s.y, marker_color=s.color, textposition="none", **common)
    mode = {"markers": "markers", "dash": "lines", "line": "lines+markers" if len(s.x) < 60 else "lines"}[s.kind]
    return go.Scatter(
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


def _add_panel(fig: go.Figure, panel: Panel, row: int) -> None:
    for s in panel.series:
        fig.add_trace(_trace(s), row=row, col=1)
    if is_timeline(panel):  # rows named top down; a row's spans overlap, never side by side
        fig.update_yaxes(
            title_text=plot_text(panel.y_label),
            tickmode="array",
            tickvals=list(range(len(panel.rows))),
            ticktext=[plot_text(r) for r in panel.rows],
            autorange="reversed",
            row=row,
            col=1,
        )
        fig.update_layout(barmode="overlay")
        return
    if panel.log_y:
        fig.update_yaxes(title_text=plot_text(panel.y_label), row=row, col=1, type="log")
    else:
        # the y-range rule of both renderers (chart_spec.y_bounds): a linear axis reaches zero
        fig.update_yaxes(title_text=plot_text(panel.y_label), row=row, col=1, rangemode="tozero")
    if panel.stacked:
        fig.update_layout(barmode="stack")


def _shapes(chart: Chart, rows: int) -> list[dict[str, object]]:
    """Ramp/drain spans and point marks on every panel, as one list: plotly's
    add_vrect/add_vline(row="all") re-validate the whole layout on every call (seconds for a
    timeline with a few dozen points)."""
    shapes: list[dict[str, object]] = []
    for row in range(1, rows + 1):
        axis = "" if row == 1 else str(row)
        refs = dict(xref=f"x{axis}", yref=f"y{axis} domain", y0=0, y1=1)
        for span in chart.spans:
            ramp = span.kind == "ramp"
            fill = dict(fillcolor="#888888" if ramp else "#cccccc", opacity=0.25 if ramp else 0.2)
            shapes.append(dict(type="rect", x0=span.x0, x1=span.x1, line_width=0, layer="below", **refs, **fill))
        for mark in chart.marks:
            line = dict(width=1, dash="dot", color="#555555")
            shapes.append(dict(type="line", x0=mark.x, x1=mark.x, line=line, **refs))
    return shapes


def _annotations(chart: Chart) -> list[dict[str, object]]:
    return [
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
        for mark in chart.marks
    ]


def plotly_figure(chart: Chart) -> go.Figure:
    rows = len(chart.panels)
    spacing = 0.06 if rows > 2 else 0.1
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=not chart.x_categorical, vertical_spacing=spacing)
    for row, panel in enumerate(chart.panels, start=1):
        _add_panel(fig, panel, row)
    fig.update_xaxes(title_text=plot_text(chart.x_label), row=rows, col=1)
    shapes, annotations = _shapes(chart, rows), _annotations(chart)
    if shapes or annotations:
        fig.update_layout(shapes=shapes, annotations=annotations)
    timeline_rows = sum(len(p.rows) for p in chart.panels if is_timeline(p))
    height_px = max(380, 200 * rows + 170, 18 * timeline_rows + 200)
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
    return str(
        plotly_figure(chart).to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"chart-{chart.chart_id}",
            config={"displaylogo": False, "responsive": True},
        )
    )
