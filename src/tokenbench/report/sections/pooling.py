"""The report's section for pooling points (--api embeddings, rerank, score):
per configuration and load, the inputs per request, inputs/s and prompt tokens/s beside the
request rate and the latency (sent -> the answer complete). Built from the catalogue's aggregates
of every row (a run's points, an experiment's cells): shown only when some row has inputs/s."""

from __future__ import annotations

from tokenbench.console import fmt
from tokenbench.metrics.catalogue import METRICS, Metric
from tokenbench.report.read.data import ReportData
from tokenbench.report.sections.tables import Table

POOLING_CAPTION = (
    "Pooling requests (embeddings, rerank, score) are answered whole, not streamed: latency is E2E, from "
    "send to the answer complete; there is no TTFT, TPOT or output throughput. Inputs/s and prompt tokens/s "
    "count the same requests as the request rate (closed loop: each by its share of life in the window; open "
    "loop: those scheduled in it) over the same period. Mean over trials ± 95% CI half-width."
)

COLUMNS: tuple[Metric, ...] = tuple(
    METRICS[k]
    for k in ("inputs_per_s", "prompt_tokens_per_s", "requests_per_s", "e2e_s_mean", "e2e_s_p50", "e2e_s_p99")
)


def pooling_table(data: ReportData) -> Table | None:
    """One row per configuration and load with inputs/s; None when no row has it."""
    rows = [r for r in data.rows if r.mean("inputs_per_s") is not None]
    if not rows:
        return None
    body = []
    for r in rows:
        per_request = r.mean("inputs_per_s"), r.mean("requests_per_s")
        batch = per_request[0] / per_request[1] if per_request[0] is not None and per_request[1] else None
        body.append(
            [r.config, r.label, fmt.num(batch, digits=1)]
            + [fmt.stat(r.metrics.get(m.key), m, unit=False) for m in COLUMNS]
        )
    headers = ["configuration", "load", "inputs per request"] + [m.label for m in COLUMNS]
    return Table(headers, body, numeric=tuple(range(2, 3 + len(COLUMNS))))
