"""charts/*.png (report/png.py): every kind of chart draws to a PNG file; a missing value is a gap."""

from __future__ import annotations

import math
from pathlib import Path

from tokenbench.report.chart_spec import Chart, Mark, Panel, Series, Span
from tokenbench.report.png import _nan, render_png, write_pngs

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
