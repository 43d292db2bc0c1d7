"""Paired outputs (agreement.json: `tokenbench agree`, the determinism study): per pair of
points, how many greedy answers were identical, with the Wilson 95% interval of the share, where
the others first differ and how alike their rest is. Pure: agreements in, tables out."""

from __future__ import annotations

from tokenbench.console.fmt import NULL_TEXT
from tokenbench.report.sections.tables import Table
from tokenbench.results.agreement import Agreement, PointAgreement

AGREEMENT_CAPTION = (
    "Each request matched to its twin by its prompt (prompt_hash, --keep-text), ok replies only. "
    "Identical: the same text. First differing word: of the whitespace-split replies (records keep no "
    "token ids), median over the pairs that differ; rest similarity: difflib's ratio over the words from "
    "there on, mean over those pairs. Share identical: over the pairs, with its Wilson 95% interval."
)
AGREEMENT_HEADERS = [
    "point",
    "pairs",
    "identical",
    "share identical",
    "95% CI (Wilson)",
    "first differing word (median)",
    "rest similarity (mean)",
    "unpaired A / B",
]


def _pct(share: float | None) -> str:
    return NULL_TEXT if share is None else f"{share:.0%}"


def _ci(p: PointAgreement) -> str:
    return NULL_TEXT if p.share_ci95 is None else f"{p.share_ci95[0]:.0%}–{p.share_ci95[1]:.0%}"


def agreement_rows(agreement: Agreement) -> list[list[str]]:
    """One row per point, the cells of AGREEMENT_HEADERS."""
    return [
        [
            p.label,
            str(p.pairs),
            str(p.identical),
            _pct(p.share_identical),
            _ci(p),
            NULL_TEXT if p.first_diff_word_median is None else f"{p.first_diff_word_median:g}",
            NULL_TEXT if p.rest_similarity_mean is None else f"{p.rest_similarity_mean:.2f}",
            f"{p.unpaired_a} / {p.unpaired_b}",
        ]
        for p in agreement.points
    ]


def agreements_table(agreements: tuple[Agreement, ...]) -> Table | None:
    """Every agreement's points, the pair named first (None: no agreement read)."""
    if not agreements:
        return None
    rows = [[f"{a.a} vs {a.b}", *row] for a in agreements for row in agreement_rows(a)]
    return Table(["pair", *AGREEMENT_HEADERS], rows, numeric=tuple(range(2, len(AGREEMENT_HEADERS) + 1)))
