"""charts/*.png (report/png.py): every kind of chart draws to a PNG file; a missing value is a gap."""

from __future__ import annotations

import math
from pathlib import Path

from tokenbench.report.chart_spec import Chart, Mark, Panel, Series, Span
from tokenbench.report.render.png import _nan, render_png, write_pngs

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_a_missing_value_is_nan_so_the_line_breaks():
    got = _nan([1, None, 2.5])
    assert got[0] == 1.0 and math.isnan(got[1]) and got[2] == 2.5


def test_lines_markers_and_stacked_bars_draw_to_pngs(tmp_path: Path):
    lines = Chart(
        "throughput-vs-users",
        "Output token rate vs concurrent users",
        "concurrent users",
        [
            Panel(
                "output tokens/s",
                [
                    Series("vllm", [1, 4, 16], [100.0, None, 900.0], error=[5.0, None, 20.0]),
                    Series("saturation", [16], [900.0], kind="markers", symbol="x"),
                ],
            ),
            Panel("TTFT (ms)", [Series("vllm", [1, 4, 16], [20.0, 40.0, 400.0])], log_y=True),
        ],
        spans=[Span(0.0, 2.0, "ramp")],
        marks=[Mark(8.0, "8 users")],
    )
    bars = Chart(
        "errors",
        "Failed requests by outcome",
        "configuration · load",
        [
            Panel(
                "% of requests",
                [
                    Series("timeout", ["a · 1", "b · 1"], [1.0, None], kind="bar"),
                    Series("http_error", ["a · 1", "b · 1"], [2.0, 3.0], kind="bar"),
                ],
                stacked=True,
            )
        ],
        x_categorical=True,
    )
    paths = write_pngs([lines, bars], tmp_path / "charts")
    assert [p.name for p in paths] == ["throughput-vs-users.png", "errors.png"]
    for p in paths:
        assert p.read_bytes()[:8] == PNG_MAGIC
    assert render_png(lines, tmp_path / "one.png") == tmp_path / "one.png"


def _tick_texts(chart: Chart) -> list[str]:
    from tokenbench.report.render.png import drawn

    with drawn(chart) as fig:
        fig.canvas.draw()
        ax = fig.axes[0]
        return [t.get_text() for t in ax.get_yticklabels() + ax.get_yticklabels(minor=True) if t.get_text()]


def test_log_ticks_are_plain_numbers_not_raw_tex():
    """A new user's report: with text.parse_math off, log ticks printed '$\\mathdefault{8\\times10^{1}}$'."""
    chart = Chart(
        "t", "TTFT", "users", [Panel("TTFT p99 (ms)", [Series("a", [1, 2, 4], [80.0, 120.0, 290.0])], log_y=True)]
    )
    texts = _tick_texts(chart)
    assert texts and not any("$" in t or "mathdefault" in t for t in texts)
    assert {"80", "100", "200"} <= set(texts)


def test_a_flat_series_is_drawn_flat_on_a_zero_based_axis():
    """A new user's report: 386 -> 388.5 tok/s (+0.6%) filled the panel's height; the axis now starts at 0."""
    from tokenbench.report.chart_spec import y_bounds
    from tokenbench.report.render.png import drawn

    panel = Panel("output tok/s", [Series("tok/s", [0.0, 10.0, 20.0], [386.0, 387.2, 388.5])])
    assert y_bounds(panel) == (0.0, None)
    with drawn(Chart("f", "flat", "time (s)", [panel])) as fig:
        low, high = fig.axes[0].get_ylim()
    assert low == 0.0 and 388.5 < high < 420.0  # the change is 0.6% of the axis, as of the value
    negative = Panel("Δ ms", [Series("d", [1, 2], [-5.0, -3.0])])
    mixed = Panel("Δ ms", [Series("d", [1, 2], [-5.0, 3.0])])
    log = Panel("ms", [Series("d", [1, 2], [5.0, 3.0])], log_y=True)
    assert (y_bounds(negative), y_bounds(mixed), y_bounds(log)) == ((None, 0.0), (None, None), (None, None))
