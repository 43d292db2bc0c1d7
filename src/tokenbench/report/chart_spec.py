"""A figure as plain data (Chart -> Panel -> Series), drawn by both renderers: plotly for
report.html (plotly_chart.py) and matplotlib for charts/*.png (png.py), so the PNGs and the page
never disagree. Text here is raw (unescaped); each renderer escapes for its medium. Numbers are
in shown units (ms, %, tok/s).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
OUTCOME_COLORS = {
    "http_error": "#d62728",
    "connect_error": "#9467bd",
    "timeout": "#ff7f0e",
    "stream_error": "#8c564b",
    "no_output": "#e377c2",
    "cancelled": "#7f7f7f",
}
# Time-series figures beyond this many runs are left out of the page (the stability table still
# lists every run): a 10-trial sweep would otherwise draw hundreds of near-identical panels.
MAX_TIMESERIES_CHARTS = 24


@dataclass(frozen=True)
class Series:
    name: str
    x: Sequence[float | None] | Sequence[str]  # numbers (a load, a time; None: none) or categories (labels)
    y: Sequence[float | None]  # None: not measured (a gap)
    error: Sequence[float | None] | None = None  # ± half-width (ci95) per point
    kind: str = "line"  # "line" | "markers" | "bar" | "dash" | "span"
    color: str | None = None
    symbol: str = "circle"  # "circle" | "x" | "star"
    hover: list[str] | None = None  # one text per point (raw, escaped by the renderer)
    show_legend: bool = True
    # kind "span" (a timeline): one horizontal bar per point, on row y (an index into the panel's
    # ``rows``) from x to x_end
    x_end: Sequence[float | None] | None = None


@dataclass(frozen=True)
class Panel:
    y_label: str
    series: list[Series]
    stacked: bool = False  # bars stacked
    log_y: bool = False  # for values spanning decades (TTFT across loads and engines)
    rows: tuple[str, ...] = ()  # a timeline's rows (its "span" series' y), the first on top


def is_timeline(panel: Panel) -> bool:
    """The panel is a timeline: its series are spans on named rows, not values on a y axis."""
    return any(s.kind == "span" for s in panel.series)


def span_bars(series: Series) -> list[tuple[int, float, float, float]]:
    """A span series' bars as (its point's index, row, start, length), one per point with a row
    and both ends (a missing one: no bar)."""
    ends = series.x_end if series.x_end is not None else [None] * len(series.x)
    out = []
    for i, (x, end, y) in enumerate(zip(series.x, ends, series.y)):
        if isinstance(x, int | float) and end is not None and y is not None:
            out.append((i, float(y), float(x), float(end) - float(x)))
    return out


def y_bounds(panel: Panel) -> tuple[float | None, float | None]:
    """The y-range rule, one for both renderers: a linear y axis reaches zero (bottom 0 for data
    that is never negative, top 0 for data never positive; the other end the data's own), so a
    change is drawn at its size against the whole value: 386 -> 388.5 tok/s (+0.6%) reads flat,
    not as a climb across the panel (matplotlib zoomed to the data's span). plotly_chart draws the
    same with ``rangemode="tozero"``. A log axis (values spanning decades) and a mixed-sign panel
    keep the data's own range: (None, None) leaves an end to the renderer. A timeline's rows are
    no values: (None, None)."""
    if panel.log_y or is_timeline(panel):
        return None, None
    values: list[float] = []
    for series in panel.series:
        errors = series.error if series.error is not None else [None] * len(series.y)
        for v, e in zip(series.y, errors):
            if v is not None:
                values += [v - (e or 0.0), v + (e or 0.0)]  # the error bars' ends too
    if not values:
        return None, None
    if min(values) >= 0:
        return 0.0, None
    if max(values) <= 0:
        return None, 0.0
    return None, None


@dataclass(frozen=True)
class Span:
    """A shaded stretch of the x axis (the ramp-up of a point, its drain)."""

    x0: float
    x1: float
    kind: str  # "ramp" | "drain"


@dataclass(frozen=True)
class Mark:
    """A labelled vertical line (where a point starts, a saturation rate)."""

    x: float
    label: str


@dataclass(frozen=True)
class Chart:
    chart_id: str  # a slug made here (file name of the PNG, id of the div); never file content
    title: str
    x_label: str
    panels: list[Panel]
    caption: str = ""
    spans: list[Span] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    x_categorical: bool = False
    section: str = ""  # which report section it belongs to
