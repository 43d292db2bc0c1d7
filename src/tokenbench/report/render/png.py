"""Draw Chart specs as PNG files with matplotlib (Agg: no display needed)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless; must precede pyplot's import
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter, ScalarFormatter

from tokenbench.report.chart_spec import Chart, Panel, is_timeline, span_bars, y_bounds

TIMELINE_MAX_IN = 40.0  # a timeline's height: a row a line, up to this many inches
Y_MARGIN = 0.05  # room above the highest point of a zero-based axis (matplotlib's own margin)
_MARKERS = {"circle": "o", "x": "X", "star": "*"}


def _nan(values: Sequence[float | None]) -> list[float]:
    # matplotlib breaks a line at NaN: a null window is a gap, never a dip to 0.
    return [math.nan if v is None else float(v) for v in values]


def _xs(values: Sequence[float | None] | Sequence[str]) -> list[float] | list[str]:
    """x values as matplotlib takes them: labels as they are; numbers, a missing one as NaN (a gap)."""
    labels = [v for v in values if isinstance(v, str)]
    if len(labels) == len(values):
        return labels
    return [math.nan if v is None or isinstance(v, str) else float(v) for v in values]


def _draw_bars(ax: Axes, panel: Panel) -> None:
    """Bars per category (stacked when the panel says so), categories labelled below."""
    categories = list(dict.fromkeys(x for s in panel.series for x in s.x))
    bottom = [0.0] * len(categories)
    for s in panel.series:
        heights = [0.0] * len(categories)
        xs: Sequence[float | str | None] = s.x
        for x, y in zip(xs, s.y):
            heights[categories.index(x)] = y or 0.0
        ax.bar(range(len(categories)), heights, bottom=bottom if panel.stacked else None, label=s.name, color=s.color)
        if panel.stacked:
            bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_xticks(range(len(categories)))
    ax.set_xticklabels([str(c) for c in categories], rotation=30, ha="right", fontsize=7)


def _draw_timeline(ax: Axes, panel: Panel) -> None:
    """Spans on named rows, the first on top: each series' bars overlap its row's others."""
    for s in panel.series:
        bars = span_bars(s)
        ax.barh(
            [row for _, row, _, _ in bars],
            [length for _, _, _, length in bars],
            left=[start for _, _, start, _ in bars],
            height=0.7,
            color=s.color,
            label=s.name if s.show_legend else None,
        )
    ax.set_yticks(range(len(panel.rows)))
    ax.set_yticklabels(list(panel.rows), fontsize=6)
    ax.set_ylim(len(panel.rows) - 0.5, -0.5)  # the first row on top
    ax.set_axisbelow(True)  # the grid behind the bars


def _draw_panel(ax: Axes, panel: Panel) -> None:
    if is_timeline(panel):
        _draw_timeline(ax, panel)
        return
    if any(s.kind == "bar" for s in panel.series):
        _draw_bars(ax, panel)
        return
    for s in panel.series:
        x, y = _xs(s.x), _nan(s.y)
        if s.kind == "markers":
            ax.scatter(
                x,
                y,
                label=s.name if s.show_legend else None,
                color=s.color,
                marker=_MARKERS.get(s.symbol, "o"),
                s=90 if s.symbol != "circle" else 30,
                zorder=3,
            )
        elif s.kind == "dash":
            ax.plot(x, y, "--", label=s.name, color=s.color, linewidth=1)
        else:
            marker = _MARKERS.get(s.symbol, "o") if len(s.x) < 60 else None
            ax.plot(
                x,
                y,
                label=s.name if s.show_legend else None,
                color=s.color,
                marker=marker,
                markersize=12 if s.symbol == "star" else 4,
                linewidth=1.5,
            )
        if s.error is not None:
            ax.errorbar(
                x,
                y,
                yerr=_nan([e if e is not None else math.nan for e in s.error]),
                fmt="none",
                ecolor=s.color,
                capsize=3,
                linewidth=1,
            )


def _y_axis(ax: Axes, panel: Panel) -> None:
    """The y axis by the charts' one rule (chart_spec.y_bounds), its ticks as plain numbers: with
    ``text.parse_math`` off (a "$" in a model name is text), matplotlib's default log labels print
    as raw TeX ("$\\mathdefault{8\\times10^{1}}$"), so a log axis gets plain ones ("80", "100",
    "200") and a linear one no offset ("+3.86e2") or TeX exponents."""
    if is_timeline(panel):
        return  # rows, not values
    if panel.log_y:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
        ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 1)))
        return
    if not any(s.kind == "bar" for s in panel.series):
        ax.yaxis.set_major_formatter(ScalarFormatter(useOffset=False, useMathText=False))
    bottom, top = y_bounds(panel)
    low, high = float(ax.dataLim.y0), float(ax.dataLim.y1)  # what was drawn, error bars included
    if bottom is not None and math.isfinite(high):
        ax.set_ylim(bottom, high + Y_MARGIN * (high - bottom) if high > bottom else None)
    elif top is not None and math.isfinite(low):
        ax.set_ylim(low - Y_MARGIN * (top - low) if low < top else None, top)


@contextlib.contextmanager
def drawn(chart: Chart) -> Iterator[Figure]:
    """The chart drawn on a matplotlib figure (closed on exit), with ``text.parse_math`` off for
    the whole of its life: a "$" in a model name is text, not TeX."""
    rows = len(chart.panels)
    height = 2.4 * rows + 1.2 if rows > 1 else 4.5
    timeline_rows = sum(len(p.rows) for p in chart.panels if is_timeline(p))
    height = max(height, min(TIMELINE_MAX_IN, 0.16 * timeline_rows + 1.5))
    with plt.rc_context({"text.parse_math": False}):
        fig, axes = plt.subplots(rows, 1, figsize=(10, height), sharex=not chart.x_categorical, squeeze=False)
        try:
            for ax, panel in zip(axes[:, 0], chart.panels):
                _draw_panel(ax, panel)
                ax.set_ylabel(panel.y_label)
                _y_axis(ax, panel)
                ax.grid(True, alpha=0.3)
                for span in chart.spans:
                    ax.axvspan(
                        span.x0,
                        span.x1,
                        color="#888888" if span.kind == "ramp" else "#cccccc",
                        alpha=0.25 if span.kind == "ramp" else 0.2,
                        linewidth=0,
                    )
                for mark in chart.marks:
                    ax.axvline(mark.x, color="#555555", linewidth=0.8, linestyle=":")
                if any(s.show_legend for s in panel.series):
                    ax.legend(fontsize=7, loc="best")
            top = axes[0, 0]
            for mark in chart.marks:
                top.annotate(
                    mark.label,
                    (mark.x, 1.0),
                    xycoords=("data", "axes fraction"),
                    fontsize=7,
                    xytext=(2, 2),
                    textcoords="offset points",
                    va="bottom",
                )
            axes[-1, 0].set_xlabel(chart.x_label)
            fig.suptitle(chart.title)
            fig.tight_layout()
            yield fig
        finally:
            plt.close(fig)


def render_png(chart: Chart, path: Path) -> Path:
    with drawn(chart) as fig:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
    return path


def write_pngs(charts: list[Chart], charts_dir: Path) -> list[Path]:
    return [render_png(c, charts_dir / f"{c.chart_id}.png") for c in charts]
