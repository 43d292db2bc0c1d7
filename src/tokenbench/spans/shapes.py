"""What one engine span says about its request: each engine's span shape read into the
same seconds (pure). phases.py combines the parts of one request's trace into its ServerSpan.

A part is the request's own span (``request``: its start is the server's arrival, its attributes
the phases) or a helper span of the same trace that times one phase by its own start and end
(SGLang's scheduler slices). Any other span of the trace (a serving layer's, an HTTP middleware's,
an engine's per-step spans) says nothing the join reads: not a request part, its attributes not
counted as unknown.

Shapes, by source (the engines' own code; none of these engines runs where tokenbench's tests do):

- ``gen_ai``: vLLM's ``llm_request`` (vllm/tracing/utils.py SpanAttributes, set in
  vllm/v1/engine/output_processor.py ``do_tracing``; started at the request's arrival, seconds):
  queue, prefill (first token - scheduled), decode, TTFT, E2E; frontend = TTFT - queue - prefill.
  TensorRT-LLM's request span has the same names (tensorrt_llm/llmapi/tracing.py SpanAttributes:
  TTFT, E2E, ``time_in_queue``, usage tokens, ``kv_cache_transfer_time``, finish reasons) but no
  prefill or decode: its queue counts from arrival to first scheduled (tensorrt_llm/executor/
  result.py ``_process_req_perf_metrics``: FIRST_SCHEDULED_TIME - ARRIVAL_TIME), so prefill is
  TTFT - queue and decode E2E - TTFT (its E2E ends at the last token), and the frontend is not
  separable (inside its queue): null. The mock sends vLLM's shape (mock/otlp.py).
- ``sglang``: the request's root span ``"{role} Req {rid[:8]}"`` in the incoming traceparent's
  trace (python/sglang/srt/observability/trace.py TraceReqContext.trace_req_start; attributes
  ``rid``, ``module`` = "sglang::request", and at finish observability's make_span_attrs: usage
  tokens with ``gen_ai.usage.cached_tokens``, and req_time_stats.py
  APIServerReqTimeStats.convert_to_gen_ai_span_attrs: TTFT, E2E, decode (finished - first token),
  inference and ``time_in_model_prefill`` = first token - the API server's dispatch, which holds
  the scheduler's queue: not vLLM's prefill, so not read as one). The queue and prefill come from
  the scheduler's slices of the same trace (req_time_stats.py RequestStage, SchedulerReqTimeStats):
  ``prefill_waiting`` (wait-queue entry -> forward entry: the queue) and ``prefill_forward``
  (forward entry -> prefill finished); the first of each (a retracted request is prefilled again).
  Frontend = TTFT - queue - prefill (tokenize, dispatch, the scheduler's receive).
- ``tgi``: TGI's router handler span, named for its function by ``#[instrument]``
  (router/src/server.rs: ``generate``, ``generate_stream``, ``completions``, ``chat_completions``;
  its parent set to the incoming traceparent's context by logging.rs trace_context_middleware).
  Its fields are Rust ``Duration`` Debug strings ("1.234567ms", "850µs", "2.5s"): ``validation_time``
  (queued - start: the frontend), ``queue_time`` (batch start - queued), ``inference_time``
  (prefill and decode together: not split), ``total_time`` (E2E), ``time_per_token``. No TTFT:
  prefill, decode, delivery and client - server TTFT stay null for TGI.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

QUEUE = "gen_ai.latency.time_in_queue"
PREFILL = "gen_ai.latency.time_in_model_prefill"
DECODE = "gen_ai.latency.time_in_model_decode"
TTFT = "gen_ai.latency.time_to_first_token"
E2E = "gen_ai.latency.e2e"
GEN_AI_LATENCY = "gen_ai.latency."
# every attribute vLLM 0.32 sets on llm_request (vllm/tracing/utils.py SpanAttributes), with
# TensorRT-LLM's own (tensorrt_llm/llmapi/tracing.py SpanAttributes)
KNOWN_ATTRIBUTES = frozenset(
    {
        "gen_ai.usage.completion_tokens",
        "gen_ai.usage.prompt_tokens",
        "gen_ai.request.max_tokens",
        "gen_ai.request.top_p",
        "gen_ai.request.temperature",
        "gen_ai.response.model",
        "gen_ai.request.id",
        "gen_ai.request.n",
        "gen_ai.usage.num_sequences",
        QUEUE,
        TTFT,
        E2E,
        "gen_ai.latency.time_in_scheduler",
        "gen_ai.latency.time_in_model_forward",
        "gen_ai.latency.time_in_model_execute",
        PREFILL,
        DECODE,
        "gen_ai.latency.time_in_model_inference",
        "gen_ai.request.top_k",
        "gen_ai.latency.kv_cache_transfer_time",
        "gen_ai.response.finish_reasons",
    }
)

GEN_AI, SGLANG, TGI = "gen_ai", "sglang", "tgi"

# SGLang: the root span's own attributes (trace.py trace_req_start) and the finish attributes
# (observability SpanAttributes: vLLM's names plus cached tokens and finish reasons)
SGLANG_ROOT = re.compile(r"(^|\s)Req \S{1,8}$")
SGLANG_MODULE = "sglang::"
SGLANG_QUEUE_SLICE = "prefill_waiting"
SGLANG_PREFILL_SLICE = "prefill_forward"
SGLANG_KNOWN = KNOWN_ATTRIBUTES | {"rid", "module", "bootstrap_room", "gen_ai.usage.cached_tokens"}

# TGI: router/src/server.rs, the #[instrument] fields of its request handlers
TGI_HANDLERS = frozenset({"generate", "generate_stream", "completions", "chat_completions"})
TGI_VALIDATION, TGI_QUEUE, TGI_INFERENCE, TGI_TOTAL = "validation_time", "queue_time", "inference_time", "total_time"
TGI_TIMES = frozenset({TGI_VALIDATION, TGI_QUEUE, TGI_INFERENCE, TGI_TOTAL, "time_per_token"})
# the handler's other fields, and what tracing-opentelemetry adds to every span (code location,
# thread, busy/idle nanoseconds)
TGI_KNOWN = TGI_TIMES | {
    "parameters",
    "seed",
    "code.filepath",
    "code.namespace",
    "code.lineno",
    "thread.id",
    "thread.name",
    "busy_ns",
    "idle_ns",
}
_RUST_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ns|µs|μs|us|ms|s)\s*$")
_RUST_UNITS = {"ns": 1e-9, "µs": 1e-6, "μs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


@dataclass(frozen=True, slots=True)
class SpanPart:
    """What one span of a request's trace says (seconds; None: it does not say)."""

    request: bool
    shape: str
    start_unix_s: float
    received_s: float
    queue_s: float | None = None
    prefill_s: float | None = None
    ttft_s: float | None = None
    decode_s: float | None = None
    e2e_s: float | None = None
    frontend_s: float | None = None
    unknown: tuple[str, ...] = ()
    instance: str | None = None  # the resource's service.instance.id: a fleet's replica


# A request's span as the join reads it: its request span's part with what the trace's helper
# spans time filled in (``combine``), or one span line read alone (``phases.server_span``).
ServerSpan = SpanPart


def seconds(attrs: dict[str, Any], key: str) -> float | None:
    value = attrs.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def rust_duration(value: Any) -> float | None:
    """A Rust ``Duration``'s Debug text ("1.5ms", "850µs", "2s") in seconds; None for anything else."""
    if not isinstance(value, str):
        return None
    match = _RUST_DURATION.match(value)
    return float(match.group(1)) * _RUST_UNITS[match.group(2)] if match else None


def _minus(a: float | None, b: float | None) -> float | None:
    return a - b if a is not None and b is not None else None


def _unknown(attrs: dict[str, Any], known: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted(k for k in attrs if k not in known))


def read_part(span: dict[str, Any]) -> SpanPart:
    """One span line of server_spans.jsonl as a part of its request, with the replica its
    resource names (a fleet's)."""
    part = _read_part(span)
    instance = span.get("instance")
    return replace(part, instance=str(instance)) if instance else part


def _read_part(span: dict[str, Any]) -> SpanPart:
    attrs: dict[str, Any] = span.get("attributes") or {}
    name = str(span.get("name") or "")
    start_ns, end_ns = int(span.get("start_unix_ns") or 0), int(span.get("end_unix_ns") or 0)
    start, received = start_ns / 1e9, float(span.get("received_s", 0.0))
    if name in (SGLANG_QUEUE_SLICE, SGLANG_PREFILL_SLICE):
        took = (end_ns - start_ns) / 1e9 if end_ns >= start_ns > 0 else None
        queue = took if name == SGLANG_QUEUE_SLICE else None
        prefill = took if name == SGLANG_PREFILL_SLICE else None
        return SpanPart(False, SGLANG, start, received, queue_s=queue, prefill_s=prefill)
    if str(attrs.get("module", "")).startswith(SGLANG_MODULE) or (
        SGLANG_ROOT.search(name) and any(k.startswith(GEN_AI_LATENCY) for k in attrs)
    ):
        return SpanPart(
            True,
            SGLANG,
            start,
            received,
            ttft_s=seconds(attrs, TTFT),
            decode_s=seconds(attrs, DECODE),
            e2e_s=seconds(attrs, E2E),
            unknown=_unknown(attrs, SGLANG_KNOWN),
        )
    if name in TGI_HANDLERS and any(k in attrs for k in TGI_TIMES):
        return SpanPart(
            True,
            TGI,
            start,
            received,
            queue_s=rust_duration(attrs.get(TGI_QUEUE)),
            frontend_s=rust_duration(attrs.get(TGI_VALIDATION)),
            e2e_s=rust_duration(attrs.get(TGI_TOTAL)),
            unknown=_unknown(attrs, TGI_KNOWN),
        )
    if any(k.startswith(GEN_AI_LATENCY) for k in attrs):
        queue, prefill, ttft, e2e = (seconds(attrs, k) for k in (QUEUE, PREFILL, TTFT, E2E))
        decode = seconds(attrs, DECODE)
        # vLLM: prefill given, the frontend is what TTFT holds beyond queue and prefill;
        # TensorRT-LLM: no prefill, its queue counts from arrival (see the module's docstring)
        frontend = _minus(_minus(ttft, queue), prefill) if prefill is not None else None
        return SpanPart(
            True,
            GEN_AI,
            start,
            received,
            queue_s=queue,
            prefill_s=prefill if prefill is not None else _minus(ttft, queue),
            ttft_s=ttft,
            decode_s=decode if decode is not None else _minus(e2e, ttft),
            e2e_s=e2e,
            frontend_s=frontend,
            unknown=_unknown(attrs, KNOWN_ATTRIBUTES),
        )
    return SpanPart(False, "", start, received)


def combine(parts: list[SpanPart]) -> tuple[SpanPart | None, int]:
    """One request's parts as one: its request span (the first with a TTFT, else the first; None
    when none came) with what its helper spans time filled in; and how many request spans beyond
    the one kept (a layer's second ``gen_ai`` span, a resent one)."""
    requests = [p for p in parts if p.request]
    if not requests:
        return None, 0
    base = next((p for p in requests if p.ttft_s is not None), requests[0])
    fill: dict[str, Any] = {}
    for field in ("queue_s", "prefill_s", "ttft_s", "decode_s", "e2e_s"):
        if getattr(base, field) is None:
            fill[field] = next(
                (v for p in parts if p.shape == base.shape and (v := getattr(p, field)) is not None), None
            )
    if base.instance is None:
        fill["instance"] = next((p.instance for p in parts if p.instance is not None), None)
    merged = replace(base, **fill)
    if merged.shape == SGLANG and merged.frontend_s is None:
        merged = replace(merged, frontend_s=_minus(_minus(merged.ttft_s, merged.queue_s), merged.prefill_s))
    return merged, len(requests) - 1
