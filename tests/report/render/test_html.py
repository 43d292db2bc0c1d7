"""report.html (report/html.py, plotly_chart.py): everything from a file is escaped."""

from __future__ import annotations

from pathlib import Path

from report_synthetic import EVIL

from tokenbench.report import write_report
from tokenbench.report.render.plotly_chart import plot_text


def test_escaping(evil_run: Path, tmp_path: Path) -> None:
    files = write_report([evil_run], tmp_path / "out")
    html = files.html.read_text()
    assert EVIL not in html
    assert "<b>evil</b>" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;evil&lt;/b&gt;" in html
    # plotly titles/legends get the escaped text too (inside JSON, "/" and "<" are \u-escaped)
    assert "&lt;b&gt;evil&lt;\\u002fb&gt;" in html
    md = files.markdown.read_text()
    assert EVIL not in md and "&lt;script&gt;" in md
    assert plot_text("$x$").startswith("\u200b")  # not read as LaTeX
