"""The report's tables (report/tables.py): a missing number is a dash, never 0."""

from __future__ import annotations

from pathlib import Path

from tokenbench.console.fmt import NULL_TEXT
from tokenbench.report import write_report
from tokenbench.report.read.load import load_inputs
from tokenbench.report.sections.tables import headline_table


def test_nulls_are_dashes_never_zero(evil_run: Path, tmp_path: Path) -> None:
    data = load_inputs([evil_run])
    table = headline_table(data)
    dead = next(row for row in table.rows if row[1] == "8 users")
    col = {h: i for i, h in enumerate(table.headers)}
    for header in (
        "output throughput (tok/s)",
        "TTFT mean (ms)",
        "TTFT p50 (ms)",
        "TPOT mean (ms)",
        "E2E mean (ms)",
        "goodput (req/s)",
        "server preemptions",
        "server KV usage max (%)",
    ):
        assert dead[col[header]] == NULL_TEXT, header
    assert dead[col["errors (%)"]] == "100.0"
    files = write_report([evil_run], tmp_path / "out")
    md = files.markdown.read_text()
    line = next(ln for ln in md.splitlines() if "| 8 users |" in ln)
    assert "| – |" in line and "| 0.0 |" not in line
    # the all-null series (output rate, TTFT, server gauges of the dead point) draw no zero line
    data_json = files.html.read_text()
    assert "GPU util" not in data_json  # never available: series left out
