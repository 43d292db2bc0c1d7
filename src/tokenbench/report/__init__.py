"""After the fact: run and experiment directories -> report.html (self-contained, offline),
charts/*.png and report.md.

    files = write_report([Path(d) for d in dirs], out or dirs[0])
    print(files.html, files.markdown, *files.charts)

The hops: load (files.py, load.py: directories -> ReportData), decide (verdict.py, stability.py),
chart (charts.py: Chart specs), outline (outline.py: the sections every document shows), render
(html.py + plotly_chart.py, markdown.py, png.py). A directory that is neither a run nor an
experiment raises ``ReportInputError`` whose message names it (print it and exit non-zero).

report/ reads results and run directories; it imports no experiments, loadgen or clients.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenbench.rundir.read import ReportInputError

__all__ = ["ReportFiles", "ReportInputError", "write_report"]


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    markdown: Path
    charts: list[Path]


def write_report(dirs: list[Path], out_dir: Path) -> ReportFiles:
    """Read ``dirs`` (run or experiment directories, in this order) and write ``out_dir``/
    report.html, report.md and charts/<chart>.png (files of the same name are overwritten)."""
    # Imported here: `tokenbench run` imports report.console, and need not load plotly or matplotlib.
    from tokenbench.report.read.load import load_inputs
    from tokenbench.report.render.html import render_html
    from tokenbench.report.render.markdown import render_markdown
    from tokenbench.report.render.outline import build_outline
    from tokenbench.report.render.png import write_pngs
    from tokenbench.report.sections.charts import build_charts
    from tokenbench.report.sections.verdict import decide

    data = load_inputs([Path(d) for d in dirs])
    verdict = decide(data)
    charts = build_charts(data, verdict)
    outline = build_outline(data, verdict, charts)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    pngs = write_pngs(charts, out_dir / "charts")
    html_path = out_dir / "report.html"
    html_path.write_text(render_html(outline), encoding="utf-8")
    md_path = out_dir / "report.md"
    md_path.write_text(render_markdown(outline, [p.relative_to(out_dir) for p in pngs]), encoding="utf-8")
    return ReportFiles(html_path, md_path, pngs)
