"""The report's speculative-decoding section: per configuration and load, how much of the drafts
the server accepted, each rate by its weight (token-weighted: long replies weigh more; request-
weighted: each reply one), the server's own counters beside them, the tokens a verify step gave,
and the two latencies a multi-token chunk splits: ITL per chunk (what a reader of the stream waits)
and per token (per-chunk ITL over the chunk's tokens). Only when some point reported speculation
(the catalogue's optional acceptance figures)."""

from __future__ import annotations

from tokenbench.console import fmt
from tokenbench.metrics.catalogue import METRICS
from tokenbench.report.read.data import ReportData
from tokenbench.report.sections.tables import Table

ACCEPTANCE = METRICS["acceptance_rate_token_weighted"]
COLUMNS = (
    ACCEPTANCE,
    METRICS["acceptance_rate_request_weighted"],
    METRICS["server_acceptance_rate"],
    METRICS["acceptance_length_step_weighted"],
    METRICS["tokens_per_chunk_mean"],
    METRICS["itl_s_mean"],
    METRICS["itl_per_token_s_mean"],
    METRICS["tpot_s_mean"],
    METRICS["ttft_outside_server_s_p50"],
)

SPECULATION_CAPTION = (
    "Speculative decoding as the server reported it, per reply (its response) and by its own counters over the "
    "window (server draft acceptance). Token-weighted acceptance pools the draft tokens, so long replies weigh "
    "more; request-weighted averages each reply's own. Acceptance length: tokens a verify step gave, the bonus "
    "token included. A chunk carries a step's tokens: read ITL per chunk for the stream's stalls, per token "
    "(or TPOT) for generation speed. TTFT outside the server: the client's TTFT less the server's own from its "
    "queue (HTTP, the API server, delivery). Mean over trials."
)


def speculation_table(data: ReportData) -> Table | None:
    """One row per configuration and load when some row reported speculation; else None."""
    if not any(
        r.metrics.get(ACCEPTANCE.key) is not None and r.metrics[ACCEPTANCE.key].mean is not None for r in data.rows
    ):
        return None
    rows = []
    for r in data.rows:
        cells = [r.config, r.label]
        for m in COLUMNS:
            stat = r.metrics.get(m.key)
            cells.append(fmt.num(stat.mean if stat is not None else None, m.digits, m.scale))
        rows.append(cells)
    headers = ["configuration", "load", *(m.label for m in COLUMNS)]
    return Table(headers, rows, numeric=tuple(range(2, len(headers))))
