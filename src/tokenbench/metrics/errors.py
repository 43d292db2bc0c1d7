"""What the server said when requests failed: a point's first distinct error texts
(results.failures.ErrorSeen), from its records, so a run and ``tokenbench recompute`` give the same.

Distinct by (outcome, HTTP status, text); the first ``ERRORS_SEEN`` in the order the records were
written (the order they ended), each text masked (redact) and cut to ``ERROR_TEXT_CHARS``, and the
count of the point's records with each. Requests the run itself cut (cancelled, not sent, worker
lost) are not failures of the server and are left out.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenbench.common.redact import mask_text
from tokenbench.records import RequestRecord, failed
from tokenbench.results.failures import ERROR_TEXT_CHARS, ERRORS_SEEN, ErrorSeen


def error_text(text: str | None) -> str:
    """An error as kept: masked, on one line, cut to ERROR_TEXT_CHARS (an ellipsis says it was)."""
    flat = " ".join(mask_text(text or "").split()) or "(no error text)"
    return flat if len(flat) <= ERROR_TEXT_CHARS else flat[: ERROR_TEXT_CHARS - 1] + "…"


def errors_seen(records: Iterable[RequestRecord], limit: int = ERRORS_SEEN) -> list[ErrorSeen]:
    """The first ``limit`` distinct failures of ``records`` with their counts (none: [])."""
    counts: dict[tuple[str, int | None, str], int] = {}
    for r in records:
        if not failed(r.outcome):
            continue
        key = (r.outcome.value, r.status, error_text(r.error))
        if key in counts:
            counts[key] += 1
        elif len(counts) < limit:
            counts[key] = 1
    return [ErrorSeen(outcome=o, status=s, text=t, count=n) for (o, s, t), n in counts.items()]
