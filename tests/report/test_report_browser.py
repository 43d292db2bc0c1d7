"""report.html in a real browser: headless Chromium (Debian's, via scripts/ensure_chromium.sh)
opens the file offline and every chart must draw, with no console error and no script injected.

Skipped when Chromium or playwright is missing, except under CI (CI set), where that fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from browser_check import check_in_chromium, require_browser
from report_synthetic import EVIL

from tokenbench.report import write_report


@pytest.mark.browser  # 40 s of Chromium: in make test's unit tier (beside the engines' installs), not make check's
def test_report_renders_in_chromium(
    rate_experiment: Path, users_experiments: tuple[Path, Path], evil_run: Path, tmp_path: Path
) -> None:
    require_browser()
    files = write_report([rate_experiment, users_experiments[0], evil_run], tmp_path / "out")
    assert len(files.charts) >= 8
    check = check_in_chromium(files.html)

    assert check.errors == [] and check.dialogs == []
    assert {c["id"] for c in check.charts} == {f"chart-{png.stem}" for png in files.charts}
    for chart in check.charts:
        assert chart["svgs"] >= 1 and chart["marks"] > 0, chart
        assert chart["colors"] > 20, chart  # not blank
    assert check.distinct_colors > 200
    # Injected text is shown as text: in the page and in plotly's titles.
    assert EVIL in check.body_text
    assert any("<b>evil</b>" in t for t in check.titles), check.titles
    assert check.bold_elements == 0
