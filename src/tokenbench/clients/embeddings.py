"""The pooling APIs: one JSON answer per request, never streamed.

- ``embeddings``: OpenAI ``POST /v1/embeddings`` ``{"model", "input": [str, ...]}`` ->
  ``{"data": [{"index", "embedding"}, ...], "usage": {"prompt_tokens", "total_tokens"}}``
  (vLLM vllm/entrypoints/pooling/embed/protocol.py EmbeddingCompletionRequest/EmbeddingResponse;
  llama.cpp tools/server: ``/v1/embeddings`` with ``--embedding``; TEI and SGLang the same shape).
- ``rerank``: the Cohere/Jina shape ``POST /v1/rerank`` ``{"model", "query", "documents": [str, ...]}``
  -> ``{"results": [{"index", "relevance_score"}, ...], "usage": {"prompt_tokens", ...}}`` (vLLM
  pooling/scoring/protocol.py RerankRequest/RerankResponse, served with an embedding or a
  one-label classification model; llama.cpp ``--reranking``; SGLang). TEI's ``/rerank`` answers a
  bare list of ``{"index", "score"}``: read as the results, without usage.
- ``score``: vLLM's ``POST /v1/score`` ``{"model", "text_1": str, "text_2": [str, ...]}`` ->
  ``{"data": [{"index", "score"}, ...], "usage": {...}}`` (ScoreTextRequest/ScoreResponse).

A request's inputs are ``Request.inputs`` (the strings embedded, or the documents scored against
``Request.query``). The answer is complete when its body is: the record's end is that time and it
has no chunks (clients/stream.py); it is ok only when it holds one result per input. The usage's
``prompt_tokens`` is the record's; no output tokens (a completion_tokens of 0 is not read).
"""

from __future__ import annotations

from orjson import loads as _loads

from tokenbench.clients.wire import ERROR_BODY_CHARS, Body, Framing, Payload, Stream
from tokenbench.config import PoolingApi
from tokenbench.config.target import ResolvedTarget
from tokenbench.records import Request

PATHS: dict[PoolingApi, str] = {"embeddings": "/v1/embeddings", "rerank": "/v1/rerank", "score": "/v1/score"}
# where each answer lists its results, one per input
RESULTS_KEY: dict[PoolingApi, str] = {"embeddings": "data", "rerank": "results", "score": "data"}


def inputs_of(request: Request) -> tuple[str, tuple[str, ...]]:
    """The query and the inputs a request sends: its own, else its prompt text as one input (and
    as the query of rerank and score)."""
    inputs = request.inputs if request.inputs is not None else (request.as_prompt_text(),)
    query = request.query if request.query is not None else inputs[0]
    return query, inputs


class PoolingWire:
    framing: Framing = "json"
    probe_path = "/v1/models"

    def __init__(self, api: PoolingApi) -> None:
        self.api = api

    def url(self, target: ResolvedTarget) -> str:
        return f"{target.url}{PATHS[self.api]}"

    def payload(self, request: Request, target: ResolvedTarget) -> Body:
        query, inputs = inputs_of(request)
        body: Body = {"model": target.model}
        if self.api == "embeddings":
            body["input"] = list(inputs)
        elif self.api == "rerank":
            body["query"] = query
            body["documents"] = list(inputs)
        else:
            body["text_1"] = query
            body["text_2"] = list(inputs)
        body.update(target.extra_body)
        return body

    def new_stream(self) -> Stream:
        return PoolingAnswer(self.api)

    def model_ids(self, probe_json: object) -> list[str]:
        data = probe_json.get("data", []) if isinstance(probe_json, dict) else []
        return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]


class PoolingAnswer(Stream):
    """One whole JSON answer (the ``json`` framing hands over the body once, at its end)."""

    __slots__ = ("api", "expected", "results")
    chunked = False

    def __init__(self, api: PoolingApi) -> None:
        super().__init__()
        self.api = api
        self.expected: int | None = None
        self.results: int | None = None

    def for_request(self, request: Request) -> None:
        self.expected = len(inputs_of(request)[1])

    def handle(self, data: Payload) -> bool:
        if self.failed or not data:
            return False
        try:
            obj = _loads(data)
        except ValueError:
            self.fail(f"malformed answer (not JSON): {bytes(data[:200])!r}")
            return False
        if isinstance(obj, list):  # TEI's /rerank: a bare list of results
            obj = {RESULTS_KEY[self.api]: obj}
        if not isinstance(obj, dict):
            self.fail(f"malformed answer (not an object): {bytes(data[:200])!r}")
            return False
        if "error" in obj:
            self.fail(f"error answer: {str(obj['error'])[:ERROR_BODY_CHARS]}")
            return False
        results = obj.get(RESULTS_KEY[self.api])
        if not isinstance(results, list):
            self.fail(f"answer without {RESULTS_KEY[self.api]!r}: {bytes(data[:200])!r}")
            return False
        self.results = len(results)
        if self.expected is not None and self.results != self.expected:
            self.fail(f"{self.results} results for {self.expected} inputs")
            return False
        rid = obj.get("id")
        self.response_id = rid if isinstance(rid, str) else None
        usage = obj.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            self.prompt_tokens = usage["prompt_tokens"]
        self.done = True
        return False  # an answer is not a chunk: the record's end is when it completed
