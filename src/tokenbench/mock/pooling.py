"""The mock's pooling answers: ``/v1/embeddings``, ``/v1/rerank`` and
``/v1/score`` in vLLM's shapes (clients/embeddings.py cites them), on a scripted cost.

An answer with N inputs is written whole at ``admitted + ttft_ms + N * input_ms`` (the same
capacity, ``max_streams``, as generation): so U closed-loop users sending B inputs a request get
inputs/s = U * B / (ttft + B * input) exactly. Prompt tokens are words (as the mock's /tokenize):
embeddings, each input's; rerank and score, each (query, document) pair's.
"""

from __future__ import annotations

from typing import Any

PATHS = {"/v1/embeddings": "embeddings", "/v1/rerank": "rerank", "/v1/score": "score"}
DIMENSIONS = 4  # each mock embedding's length

Body = dict[str, Any]  # a request's JSON body as the client sent it (a true edge, any shape)


def _words(text: object) -> int:
    return len(str(text).split())


def pooling_inputs(api: str, body: Body) -> tuple[str | None, list[str]] | None:
    """The query (None for embeddings) and the inputs of a request, or None if it has none."""
    if api == "embeddings":
        raw = body.get("input")
        query = None
    elif api == "rerank":
        raw, query = body.get("documents"), body.get("query")
    else:
        raw, query = body.get("text_2"), body.get("text_1")
    inputs = [raw] if isinstance(raw, str) else raw
    if not isinstance(inputs, list) or not inputs or (api != "embeddings" and not isinstance(query, str)):
        return None
    return query, [str(x) for x in inputs]


def pooling_answer(api: str, query: str | None, inputs: list[str], rid: str, model: str) -> Body:
    """The answer's body: one result per input, usage in words."""
    if api == "embeddings":
        tokens = sum(_words(x) for x in inputs)
        data = [
            {"index": i, "object": "embedding", "embedding": [float(_words(x))] + [0.5] * (DIMENSIONS - 1)}
            for i, x in enumerate(inputs)
        ]
        return {"id": rid, "object": "list", "model": model, "data": data, "usage": _usage(tokens)}
    tokens = sum(_words(query) + _words(x) for x in inputs)
    scores = [1.0 / (1 + i) for i in range(len(inputs))]
    if api == "rerank":
        results = [
            {"index": i, "document": {"text": x}, "relevance_score": s} for i, (x, s) in enumerate(zip(inputs, scores))
        ]
        return {"id": rid, "model": model, "results": results, "usage": _usage(tokens)}
    data = [{"index": i, "object": "score", "score": s} for i, s in enumerate(scores)]
    return {"id": rid, "object": "list", "model": model, "data": data, "usage": _usage(tokens)}


def _usage(tokens: int) -> Body:
    return {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0}
