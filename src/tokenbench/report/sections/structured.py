"""The report's structured-output section: per configuration and load, the share of
replies that met --response-format beside TTFT and TPOT, so a constrained point reads against an
unconstrained one (preset ``structured-output`` runs both as variants). Only when some point asked
for structure (the catalogue's optional ``valid_fraction``)."""

from __future__ import annotations

from tokenbench.console import fmt
from tokenbench.metrics.catalogue import METRICS
from tokenbench.report.read.data import ReportData
from tokenbench.report.sections.tables import Table

VALID = METRICS["valid_fraction"]
COLUMNS = (METRICS["ttft_s_mean"], METRICS["ttft_s_p99"], METRICS["tpot_s_mean"], METRICS["output_tokens_per_s"])

STRUCTURED_CAPTION = (
    "Replies under --response-format checked on the client when they ended (a JSON schema with jsonschema): "
    "valid is the share of the successful requests that asked for a checkable constraint; – for an "
    "unconstrained configuration. TTFT, TPOT and output tok/s of every configuration beside it show what the "
    "constraint costs (mean over trials)."
)


def structured_table(data: ReportData) -> Table | None:
    """One row per configuration and load when some row measured validity; else None."""
    if not any(r.metrics.get(VALID.key) is not None and r.metrics[VALID.key].mean is not None for r in data.rows):
        return None
    rows = []
    for r in data.rows:
        cells = [r.config, r.label]
        for m in (VALID, *COLUMNS):
            stat = r.metrics.get(m.key)
            cells.append(fmt.num(stat.mean if stat is not None else None, m.digits, m.scale))
        rows.append(cells)
    headers = ["configuration", "load", VALID.label, *(m.label for m in COLUMNS)]
    return Table(headers, rows, numeric=tuple(range(2, len(headers))))
