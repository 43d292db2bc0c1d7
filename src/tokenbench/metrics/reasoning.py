"""Reasoning models: time to first output (TTFO) and reasoning content over a point's population.

A reasoning model streams its reasoning (OpenAI chat ``delta.reasoning`` / ``reasoning_content``,
Ollama ``thinking``) before its answer. TTFT stays the first chunk of either kind (METRICS.md);
TTFO is the first chunk that is not reasoning:

    ttfo_s = first_output_s - sent_s   (RequestRecord.ttfo_s)

over the successful requests of the point's population that had an output chunk (a request whose
whole reply was reasoning has no TTFO: counted in ``reasoning.reasoning_only``, never a 0). A
request that streamed no reasoning has TTFO = TTFT, so the distribution covers the same
requests as TTFT, less the reasoning-only ones. Both are added to a point only when some request
of its population streamed reasoning: a run without keeps its results.json shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokenbench.metrics.stats import distribution
from tokenbench.records import Outcome, RequestRecord
from tokenbench.results import Reasoning


def reasoning_metrics(population: Sequence[RequestRecord]) -> dict[str, Any]:
    """``ttfo_s`` and ``reasoning`` of a point (PointMetrics' fields), or nothing when no request
    of the population streamed reasoning."""
    streamed = [p for r in population if (p := r.reasoning) is not None and p.reasoning_chunks]
    if not streamed:
        return {}
    ok = [r for r in population if r.outcome is Outcome.OK]
    thought = [p for r in ok if (p := r.reasoning) is not None]
    reported = [p.reasoning_tokens for p in thought if p.reasoning_tokens is not None]
    return {
        "ttfo_s": distribution(t for t in (r.ttfo_s for r in ok) if t is not None),
        "reasoning": Reasoning(
            requests=len(streamed),
            chunks=sum(p.reasoning_chunks for p in streamed),
            reasoning_only=sum(1 for p in thought if p.reasoning_chunks and p.first_output_s is None),
            reasoning_tokens=sum(reported) if reported else None,
            reasoning_tokens_reported=len(reported),
        ),
    }
