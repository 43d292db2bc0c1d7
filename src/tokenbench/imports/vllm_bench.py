"""``vllm bench serve --save-result --save-detailed``: one JSON object, one benchmark (a point).

Fields read, as vLLM 0.32 writes them (vllm/benchmarks/serve.py: ``result_json``, the benchmark's
``result`` merged in): ``backend``, ``model_id``, ``request_rate`` (a number or "inf"),
``max_concurrency``, ``burstiness``, ``duration``, and per request, in send order, ``start_times``
(time.perf_counter() just before its POST), ``ttfts`` (to its first SSE event with ``choices``, 0
when it failed first), ``itls`` (each later ``choices`` event's gap to the one before), ``latencies``
(to its last ``choices`` event), ``input_lens`` (the prompt's tokens: the server's usage when it
sent one, else vLLM's own count), ``output_lens`` (the server's usage when it sent one, else
vLLM's tokenizer over the text) and ``errors`` ("" when it succeeded); the headline figures
``mean_/median_/p99_ttft_ms``, ``..._tpot_ms``, ``..._itl_ms``, ``mean_e2el_ms`` where
``--percentile-metrics`` included them, ``request_throughput`` and ``output_throughput``.

The file names no vLLM version: a file without the per-request fields (saved without
``--save-detailed``) is refused, naming them. vLLM bench times every event with ``choices`` as a
token: a chat stream's role-only opening chunk, and a closing chunk with only the finish reason
where the server sends one. A request with one timed event more than its output tokens had the
opening chunk; with two more, the closing one too (``ToolRequest.opening_chunk``,
``closing_chunk``): each is dropped from its record. The rule needs one token a content chunk; a
reply in fewer events than tokens keeps every event.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from tokenbench.config import Arrival, LoadPoint, RateLoad, UsersLoad
from tokenbench.errors import BadInput
from tokenbench.imports.definitions import tool_names
from tokenbench.imports.tool_run import ImportedRun, ToolPoint, ToolRequest, json_object
from tokenbench.records import Outcome, TokenSource

TOOL = "vllm-bench-serve"
PER_REQUEST = ("start_times", "ttfts", "itls", "latencies", "input_lens", "output_lens", "errors")
# vLLM bench's --backend -> tokenbench's API
APIS = {
    "openai-chat": "chat",
    "vllm-chat": "chat",
    "openai": "completions",
    "vllm": "completions",
    "openai-responses": "responses",
}
# Record keys vLLM bench keeps nothing of (beside the tokenbench-only ones: connection timing,
# server timing, spans)
NOT_RECORDED = ("scheduled_s", "finish_reason", "cached_prompt_tokens", "chunk_tokens", "response_id", "status")


def read(path: Path) -> ImportedRun | None:
    """``path`` read, or None when it is not a vLLM bench result."""
    data = json_object(path)
    if data is None or "request_throughput" not in data or "endpoint_type" not in data:
        return None
    missing = [k for k in PER_REQUEST if k not in data]
    if missing:
        raise BadInput(
            f"{path}: a vLLM bench result without its requests ({', '.join(missing)}): "
            f"run vllm bench serve with --save-result --save-detailed"
        )
    backend = str(data.get("backend") or data.get("endpoint_type"))
    if backend not in APIS:
        raise BadInput(f"{path}: vLLM bench --backend {backend}: tokenbench imports {', '.join(APIS)}")
    return ImportedRun(
        tool=TOOL,
        version=None,
        source=path,
        model=data.get("model_id"),
        url=None,
        api=APIS[backend],
        points=[_point(data)],
        not_recorded=NOT_RECORDED,
        started_unix_s=_started(data),
    )


def _started(data: dict[str, Any]) -> float | None:
    """The wall time of its first send: its ``date`` (when it saved the result, local time without
    a zone: read as this machine's) less its ``duration``; None without them."""
    try:
        saved = datetime.datetime.strptime(str(data["date"]), "%Y%m%d-%H%M%S").timestamp()
        return saved - float(data["duration"])
    except (KeyError, ValueError, TypeError):
        return None


def _point(data: dict[str, Any]) -> ToolPoint:
    """Its load in tokenbench's words: a finite rate is an open loop (burstiness 1 Poisson, else
    gamma); an infinite one sends every request at once, capped by --max-concurrency: as many
    users as the cap (every request when none), each sending its next when one ends."""
    requests = [_request(data, i) for i in range(len(data["start_times"]))]
    rate, cap = data.get("request_rate"), data.get("max_concurrency")
    load: LoadPoint
    if rate in (None, "inf") or float(rate) == float("inf"):
        load = UsersLoad(users=int(cap or len(requests) or 1))
    else:
        burstiness = float(data.get("burstiness") or 1.0)
        arrival: Arrival = "poisson" if burstiness == 1.0 else "gamma"
        load = RateLoad(rate_per_s=float(rate), arrival=arrival, burstiness=burstiness, max_concurrency=cap)
    return ToolPoint(load=load, requests=requests, figures=_figures(data), duration_s=data.get("duration"))


def _request(data: dict[str, Any], i: int) -> ToolRequest:
    error = data["errors"][i] or None
    gaps = tuple(float(g) for g in data["itls"][i] or ())
    output = data["output_lens"][i]
    ttft = float(data["ttfts"][i]) if not error and data["ttfts"][i] is not None else None
    # events timed beyond one a token: the opening chunk first, then a closing one (a reply in
    # fewer events than tokens, several tokens a chunk, keeps every event: none can be told apart)
    extra = len(gaps) + 1 - output if output else 0
    return ToolRequest(
        start_s=float(data["start_times"][i]),
        latency_s=float(data["latencies"][i]) if not error else None,
        ttft_s=ttft,
        chunk_gaps_s=gaps,
        prompt_tokens=data["input_lens"][i],
        output_tokens=output if not error else None,
        # vLLM bench takes the server's usage (include_usage) and counts the text only without one
        output_tokens_from=TokenSource.SERVER,
        error=error,
        failure=_failure(error) if error else Outcome.STREAM_ERROR,
        opening_chunk=ttft is not None and bool(output) and extra >= 1,
        closing_chunk=ttft is not None and bool(output) and extra >= 2,
    )


def _failure(error: str) -> Outcome:
    """How a request failed, from vLLM bench's error text (lib/endpoint_request_func.py): the
    HTTP reason phrase of a non-200 answer, a Python traceback of an exception, or its message
    for a stream without a single chunk."""
    if error.startswith("Never received a valid chunk"):
        return Outcome.NO_OUTPUT
    if "Traceback" not in error:
        return Outcome.HTTP_ERROR  # response.reason: "Internal Server Error", "Bad Request", ...
    if "TimeoutError" in error:
        return Outcome.TIMEOUT
    if "ClientConnectorError" in error or "ConnectionRefusedError" in error:
        return Outcome.CONNECT_ERROR
    return Outcome.STREAM_ERROR


def _figures(data: dict[str, Any]) -> dict[str, float]:
    """vLLM bench's headline figures by tokenbench metric key, in seconds and per second."""
    out = {}
    for key, name in tool_names(TOOL).items():
        value = data.get(name)
        if isinstance(value, (int, float)):
            out[key] = value / 1e3 if name.endswith("_ms") else float(value)
    return out
