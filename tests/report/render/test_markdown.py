"""report.md's tables (report/markdown.py): numeric columns right-aligned, a cell cannot break its row."""

from __future__ import annotations

from tokenbench.report.render.markdown import table_md
from tokenbench.report.sections.tables import Table


def test_a_table_in_markdown():
    table = Table(headers=["config", "TTFT (ms)"], rows=[["vllm", "12.5"], ["a|b\nc", "–"]], numeric=(1,))
    assert table_md(table) == ("| config | TTFT (ms) |\n| --- | ---: |\n| vllm | 12.5 |\n| a\\|b c | – |\n")


def test_no_table_is_no_text():
    assert table_md(None) == ""
