"""The trend page (history.html): each headline metric over time, one line per configuration
(engine, model, knobs, dataset, load; its versions change along the line), one value per run (the
mean over the run's trials at that load), the change points (changepoints.py) marked with a
dotted line and the change, and a table of them. Self-contained (plotly.js inlined, as
report.html); every string from a file is escaped.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go  # type: ignore[import-untyped]  # plotly ships no type hints
import plotly.offline  # type: ignore[import-untyped]

from tokenbench.common.slug import slug
from tokenbench.console.fmt import esc
from tokenbench.history.changepoints import ChangePoint, change_points
from tokenbench.history.table import CONFIG_COLUMNS, Row
from tokenbench.metrics.catalogue import Metric, shown_in
from tokenbench.report.render.plotly_chart import plot_text

TREND_METRICS: tuple[Metric, ...] = shown_in("compare")
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


@dataclass(frozen=True)
class RunValue:
    """One run's value of a metric for one configuration."""

    date: dt.datetime
    source: str
    version: str | None
    value: float


@dataclass(frozen=True)
class Change:
    """A change point of one metric of one configuration, at the first run after it."""

    metric: Metric
    config: str
    at: RunValue
    previous_version: str | None
    point: ChangePoint

    def text(self) -> str:
        pct = self.point.change
        m = self.metric
        size = "" if pct is None else f"{pct:+.1%}: "
        return (
            f"{m.title}: {size}{self.point.before * m.scale:,.{m.digits}f} -> {self.point.after * m.scale:,.{m.digits}f}"
            f"{' ' + m.unit if m.unit else ''}"
        )


def config_label(row: Row) -> str:
    knobs = "" if row["knobs"] in ("{}", None) else f" {row['knobs']}"
    return f"{row['engine']} · {row['model'] or 'model ?'}{knobs} · {row['dataset'] or '?'} · {row['load']}"


def series(rows: Sequence[Row], metric: Metric) -> dict[str, list[RunValue]]:
    """Each configuration's runs in date order, the metric's mean over a run's trials."""
    groups: dict[tuple[object, ...], dict[str, list[Row]]] = {}
    for r in rows:
        if r.get(metric.key) is None:
            continue
        key = tuple(r[c] for c in CONFIG_COLUMNS)
        groups.setdefault(key, {}).setdefault(r["source"], []).append(r)
    out: dict[str, list[RunValue]] = {}
    for runs in groups.values():
        values = [
            RunValue(rs[0]["date"], src, rs[0]["version"], sum(r[metric.key] for r in rs) / len(rs))
            for src, rs in runs.items()
        ]
        values.sort(key=lambda v: (v.date, v.source))
        out[config_label(next(iter(runs.values()))[0])] = values
    return out


def changes(rows: Sequence[Row], metrics: Sequence[Metric] = TREND_METRICS) -> list[Change]:
    """Every change point of every metric of every configuration."""
    found: list[Change] = []
    for m in metrics:
        for config, values in series(rows, m).items():
            for cp in change_points([v.value for v in values]):
                found.append(Change(m, config, values[cp.index], values[cp.index - 1].version, cp))
    return found


def _figure(metric: Metric, by_config: dict[str, list[RunValue]], found: list[Change]) -> str:
    fig = go.Figure()
    for i, (config, values) in enumerate(by_config.items()):
        color = COLORS[i % len(COLORS)]
        hover = [plot_text(f"{config}<br>{v.source}<br>version {v.version or '?'}") for v in values]
        fig.add_trace(
            go.Scatter(
                x=[v.date for v in values],
                y=[v.value * metric.scale for v in values],
                mode="lines+markers",
                name=plot_text(config),
                text=hover,
                hovertemplate="%{text}<br>%{x}<br>%{y}<extra></extra>",
                line=dict(color=color, width=1.5),
            )
        )
    shapes, notes = [], []
    for c in found:
        shapes.append(
            dict(
                type="line",
                x0=c.at.date,
                x1=c.at.date,
                xref="x",
                yref="paper",
                y0=0,
                y1=1,
                line=dict(dash="dot", color="#c00", width=1),
            )
        )
        notes.append(
            dict(
                x=c.at.date,
                y=1.0,
                xref="x",
                yref="paper",
                text=plot_text(f"{c.point.change:+.1%}" if c.point.change is not None else "change"),
                showarrow=False,
                xanchor="left",
                yanchor="bottom",
                font=dict(size=10, color="#c00"),
            )
        )
    fig.update_layout(
        title=plot_text(metric.label),
        template="plotly_white",
        height=380,
        margin=dict(l=70, r=20, t=70, b=50),
        shapes=shapes,
        annotations=notes,
        yaxis=dict(rangemode="tozero", title=plot_text(metric.label)),
        legend=dict(orientation="h", y=-0.2),
    )
    return str(
        fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"trend-{slug(metric.key)}",
            config={"displaylogo": False, "responsive": True},
        )
    )


_CSS = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}.muted{color:#666}"
)


def render(rows: Sequence[Row], sources: Sequence[str]) -> str:
    """history.html: a figure per headline metric that has values, then the change points."""
    found = changes(rows)
    parts = []
    for m in TREND_METRICS:
        by_config = series(rows, m)
        if by_config:
            parts.append(_figure(m, by_config, [c for c in found if c.metric.key == m.key]))
    table_rows = "".join(
        f"<tr><td>{esc(c.metric.label)}</td><td>{esc(c.config)}</td><td>{esc(c.at.date.isoformat(timespec='seconds'))}</td>"
        f"<td>{esc(c.at.source)}</td><td>{esc(c.previous_version or '?')} → {esc(c.at.version or '?')}</td>"
        f"<td>{esc(c.text())}</td></tr>"
        for c in found
    )
    change_table = (
        '<table id="change-points"><tr><th>metric</th><th>configuration</th><th>first run after</th><th>run</th>'
        f"<th>version</th><th>change</th></tr>{table_rows}</table>"
        if found
        else '<p id="change-points">No change points.</p>'
    )
    runs = len({r["source"] for r in rows})
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">'
        f"<title>tokenbench history</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script></head>\n<body>\n'
        f'<h1>tokenbench history</h1><p class="muted">{runs} runs from {esc(", ".join(sources))}. '
        "Change points: binary segmentation on the mean (Gaussian, one unknown variance), kept when "
        "n ln(SSE before / SSE after) &gt; 4 ln n, each segment at least 2 runs "
        "(src/tokenbench/history/changepoints.py).</p>\n"
        f"<h2>Change points</h2>{change_table}\n<h2>Trends</h2>\n" + "\n".join(parts) + "\n</body></html>\n"
    )
