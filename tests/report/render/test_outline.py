"""The report's outline (report/outline.py): one list of sections that both documents draw."""

from __future__ import annotations

from pathlib import Path

from tokenbench.report.read.load import load_inputs
from tokenbench.report.render.markdown import render_markdown
from tokenbench.report.render.outline import SATURATION_RULE, build_outline
from tokenbench.report.sections.charts import build_charts
from tokenbench.report.sections.verdict import decide


def _outline(*dirs: Path):
    data = load_inputs(list(dirs))
    verdict = decide(data)
    charts = build_charts(data, verdict)
    return build_outline(data, verdict, charts)


def test_sections_in_order(rate_experiment: Path) -> None:
    outline = _outline(rate_experiment)
    assert [s.key for s in outline.sections] == [
        "inputs",
        "verdict",
        "headline",
        "load",
        "knobs",
        "tradeoff",
        "errors",
        "stability",
    ]
    verdict = next(s for s in outline.sections if s.key == "verdict")
    assert [b.heading for b in verdict.blocks] == ["", "Best at each load", "Service-level objectives", "Saturation"]
    saturation = verdict.blocks[-1]
    assert saturation.md_caption == SATURATION_RULE and "2x" in SATURATION_RULE and "90%" in SATURATION_RULE


def test_markdown_draws_the_outlines_md_sections(rate_experiment: Path) -> None:
    outline = _outline(rate_experiment)
    md = render_markdown(outline, [Path(f"charts/{c.chart_id}.png") for c in outline.charts])
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    assert headings == ["## " + (s.short_title or s.title) for s in outline.sections if s.in_md] + ["## Charts"]


def test_no_rows_no_headline_in_markdown(tmp_path: Path) -> None:
    exp = tmp_path / "e"
    exp.mkdir()
    (exp / "experiment.json").write_text('{"name": "e", "spec": {}, "servers": [], "cells": {}, "aggregates": []}')
    outline = _outline(exp)
    headline = next(s for s in outline.sections if s.key == "headline")
    assert not headline.in_md and headline.empty == "No load point finished."
    errors = next(s for s in outline.sections if s.key == "errors")
    assert errors.empty == "No requests were measured." and not errors.charts
