"""Pooling points (--api embeddings, rerank, score): inputs and prompt tokens
per second.

A pooling request sends ``inputs`` strings (embedded, or documents scored against a query) and
gets one answer, not a stream: its latency is ``e2e_s`` (sent -> the answer complete) and it has
no TTFT, TPOT, ITL or output tokens (those distributions are empty and the token rates None, never
0). Over the point, counted like ``requests_per_s`` (populations.rates: closed loop, each
successful request by the share of its life in the window; open loop, the successful requests
scheduled in it) and over the same period (``rate_period_s``):

    inputs_per_s        = sum(weight * inputs) / period
    prompt_tokens_per_s = sum(weight * prompt tokens) / period   (the server's usage, else the dataset's)

So inputs_per_s = requests_per_s * inputs per request, and a server answering B inputs in L s to
U users gives U * B / L. Added only to a point whose records are pooling requests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tokenbench.records import Outcome, RequestRecord
from tokenbench.results import Pooling

POPULATION = (
    "successful requests as request rate counts them (closed loop: each by its share of life in the window; "
    "open loop: those scheduled in it), over rate_period_s"
)


def _inputs(record: RequestRecord) -> int | None:
    """A pooling request's inputs; None for a generative request."""
    return record.pooling.inputs if record.pooling is not None else None


def is_pooling(records: Sequence[RequestRecord]) -> bool:
    """The point's requests were pooling requests (their records count inputs)."""
    return any(_inputs(r) is not None for r in records)


def pooling_metrics(
    rated: Sequence[RequestRecord],
    weight: Callable[[RequestRecord], float],
    period_s: float,
    prompt_tokens: Callable[[RequestRecord], tuple[int | None, str]],
) -> dict[str, Any]:
    """``pooling`` of a point (PointMetrics' field): ``rated`` and ``weight`` as requests/s counts
    them, over ``period_s``; ``prompt_tokens``: a record's count and its source."""
    ok = [r for r in rated if r.outcome is Outcome.OK and _inputs(r) is not None]
    sources: dict[str, int] = {}
    inputs = tokens = 0.0
    for r in ok:
        n, source = prompt_tokens(r)
        sources[source] = sources.get(source, 0) + 1
        w = weight(r)
        inputs += (_inputs(r) or 0) * w
        tokens += (n or 0) * w
    total = sum(_inputs(r) or 0 for r in ok)
    per = period_s if period_s > 0 else None
    return {
        "pooling": Pooling(
            population=POPULATION,
            requests=len(ok),
            inputs=total,
            inputs_per_request=total / len(ok) if ok else None,
            inputs_per_s=inputs / per if per else None,
            prompt_tokens_per_s=tokens / per if per and "unknown" not in sources else None,
            prompt_tokens_source=sources,
        )
    }
