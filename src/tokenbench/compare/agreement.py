"""`tokenbench agree A B`: the paired outputs of two run directories (metrics/agreement.py), as a
console table and agreement.json (results/layout.AGREEMENT; the report's paired-outputs section reads it)."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table as RichTable
from rich.text import Text

from tokenbench.errors import BadInput
from tokenbench.metrics.agreement import runs_agreement
from tokenbench.report.sections.agreement import AGREEMENT_CAPTION, AGREEMENT_HEADERS, agreement_rows
from tokenbench.results.agreement import Agreement
from tokenbench.rundir import read_records, write_json
from tokenbench.rundir.read import read_results


def agreement_of(a: Path, b: Path) -> Agreement:
    """Two run directories' replies twin by twin, point i against point i; BadInput when either
    kept no text (it needs --keep-text)."""
    records = {}
    for d in (a, b):
        kept = [r for r in read_records(d) if r.prompt_hash is not None]
        if not kept:
            raise BadInput(
                f"{d}: its records keep no replies with their prompt_hash; run both with --keep-text "
                "(tokenbench 0.3 or later), the same prompts, temperature 0"
            )
        records[d] = kept
    labels = {i: p.label for i, p in enumerate(read_results(a).points)}
    return runs_agreement(str(a), str(b), records[a], records[b], labels)


def write_agreement(agreement: Agreement, path: Path) -> None:
    write_json(path, agreement.model_dump(mode="json"))


def agreement_table(agreement: Agreement) -> RichTable:
    table = RichTable(
        title=Text(f"paired outputs: {agreement.a} vs {agreement.b}"),
        caption=Text(AGREEMENT_CAPTION),
    )
    for i, h in enumerate(AGREEMENT_HEADERS):
        table.add_column(h, justify="left" if i == 0 else "right")
    for row in agreement_rows(agreement):
        table.add_row(*(Text(c) for c in row))
    return table
