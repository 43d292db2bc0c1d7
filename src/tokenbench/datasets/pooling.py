"""A dataset's prompts as pooling requests (--api embeddings, rerank, score).

Each request carries ``batch_size`` inputs, taken in the dataset's order (each prompt's text,
chat messages flattened): ``embeddings`` embeds them; ``rerank`` and ``score`` take one text more
first, the query, and score the ``batch_size`` documents against it. Requests do not share texts
(prompts in a row, cycling only when the dataset has fewer than one request's worth), except for
a trace, whose rows keep their own times: row i's request starts with row i's text and takes the
next rows' texts after it. A request's expected prompt tokens are its texts' (the query once).
"""

from __future__ import annotations

from tokenbench.records import Request


def pooling_requests(requests: list[Request], api: str, batch_size: int) -> list[Request]:
    """The dataset's ``requests`` as requests of ``batch_size`` inputs each for ``api``."""
    group = group_size(api, batch_size)
    n = len(requests)
    if any(r.trace_time_s is not None for r in requests):
        starts = range(n)  # a trace: one request per row, at the row's time
    else:
        starts = range(0, max(n - group + 1, 1), group)
    return [pooled([requests[(start + i) % n] for i in range(group)], api) for start in starts]


def group_size(api: str, batch_size: int) -> int:
    """Requests' texts one pooling request takes: ``batch_size`` inputs (rerank/score: a query first)."""
    return batch_size + (0 if api == "embeddings" else 1)


def pooled(picked: list[Request], api: str) -> Request:
    """One pooling request of ``picked``'s texts, at the first one's trace row and time."""
    texts = tuple(r.as_prompt_text() for r in picked)
    counts = [r.expected_prompt_tokens for r in picked]
    expected = sum(c for c in counts if c is not None) if all(c is not None for c in counts) else None
    head = picked[0]
    query, inputs = (None, texts) if api == "embeddings" else (texts[0], texts[1:])
    return Request(
        prompt="\n\n".join(texts),
        expected_prompt_tokens=expected,
        trace_row=head.trace_row,
        trace_time_s=head.trace_time_s,
        inputs=inputs,
        query=query,
    )
