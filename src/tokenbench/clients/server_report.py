"""What a server says of one request in its own response: its speculation figures and its own
timing, read from each engine's fields into the record's ``Speculation`` and ``ServerTiming``
(records.py). Pure: the stream keeps the objects as sent (``Stream.server_timings``, verbatim; the
vLLM ``metrics`` object in ``Stream.server_metrics``), this reads them once, when the record ends.

- vLLM (``--enable-per-request-metrics`` and/or ``--per-request-spec-decode-metrics summary|
  detailed``): a ``metrics`` object on the final usage chunk of a stream (only with
  ``stream_options.include_usage`` and n = 1; entrypoints/openai/chat_completion/serving.py,
  completion/serving.py), PerRequestMetrics (entrypoints/generate/base/protocol.py, built by
  generate/base/serving.py ``build_per_request_timing_metrics``), in ms:
  ``queue_time_ms`` = scheduled - queued (the engine core's queue), ``time_to_first_token_ms`` =
  first token - *scheduled* (so the prefill, not a TTFT: the server's TTFT from its queue is the
  two added), ``generation_time_ms`` = last token - first token, ``mean_itl_ms`` = that / (tokens
  - 1), ``tokens_per_second``. ``speculative_decoding`` (SpeculativeDecodingMetrics;
  v1/metrics/stats.py RequestSpecDecodeMetrics.to_dict): ``num_spec_steps``, ``num_draft_tokens``,
  ``num_accepted_draft_tokens`` (draft only), ``mean_acceptance_length`` (1 + accepted / steps:
  the bonus included), ``draft_acceptance_rate``, ``acceptance_histogram`` (dense, index j = steps
  that accepted exactly j), ``num_spec_tokens`` (the configured k), and at ``detailed``
  ``per_step_accepted`` / ``per_step_drafted``.
- llama.cpp: ``timings`` on the last chunk (tools/server/server-task.cpp ``result_timings``), ms:
  ``prompt_ms`` (the prompt's processing: from its slot starting it to the first token; a request
  waiting for a slot is not timed), ``predicted_ms`` (the generation after it),
  ``predicted_per_token_ms``, and with speculation ``draft_n`` (drafts proposed) and
  ``draft_n_accepted``. It gives no verify steps, so no acceptance length.
"""

from __future__ import annotations

from typing import Any

from tokenbench.records import ServerTiming, Speculation

VLLM = "vllm"
LLAMACPP = "llamacpp"


def _number(obj: dict[str, Any], key: str) -> float | None:
    value = obj.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _count(obj: dict[str, Any], key: str) -> int | None:
    value = obj.get(key)
    return value if type(value) is int else None


def _ints(obj: dict[str, Any], key: str) -> tuple[int, ...] | None:
    value = obj.get(key)
    if not isinstance(value, list) or not all(type(v) is int for v in value):
        return None
    return tuple(value)


def _seconds(ms: float | None) -> float | None:
    return ms / 1e3 if ms is not None else None


def vllm_speculation(spec: dict[str, Any]) -> Speculation:
    """vLLM's ``metrics.speculative_decoding`` (module doc)."""
    return Speculation(
        spec_steps=_count(spec, "num_spec_steps"),
        spec_draft_tokens=_count(spec, "num_draft_tokens"),
        spec_accepted_tokens=_count(spec, "num_accepted_draft_tokens"),
        spec_acceptance_length=_number(spec, "mean_acceptance_length"),
        spec_acceptance_rate=_number(spec, "draft_acceptance_rate"),
        spec_tokens=_count(spec, "num_spec_tokens"),
        spec_accepted_histogram=_ints(spec, "acceptance_histogram"),
        spec_step_accepted=_ints(spec, "per_step_accepted"),
        spec_step_drafted=_ints(spec, "per_step_drafted"),
        spec_from=VLLM,
    )


def vllm_timing(metrics: dict[str, Any]) -> ServerTiming | None:
    """vLLM's ``metrics`` timing fields (module doc); None when it carried none (speculation only)."""
    queue = _seconds(_number(metrics, "queue_time_ms"))
    prefill = _seconds(_number(metrics, "time_to_first_token_ms"))
    decode = _seconds(_number(metrics, "generation_time_ms"))
    itl = _seconds(_number(metrics, "mean_itl_ms"))
    if queue is None and prefill is None and decode is None and itl is None:
        return None
    return ServerTiming(
        reported_queue_s=queue,
        reported_prefill_s=prefill,
        reported_ttft_s=queue + prefill if queue is not None and prefill is not None else None,
        reported_decode_s=decode,
        reported_itl_s=itl,
        reported_timing_from=VLLM,
    )


def llamacpp_speculation(timings: dict[str, Any]) -> Speculation | None:
    """llama.cpp's ``timings.draft_n`` / ``draft_n_accepted``; None without drafts reported."""
    drafted, accepted = _count(timings, "draft_n"), _count(timings, "draft_n_accepted")
    if drafted is None:
        return None
    return Speculation(
        spec_draft_tokens=drafted,
        spec_accepted_tokens=accepted,
        spec_acceptance_rate=accepted / drafted if accepted is not None and drafted else None,
        spec_from=LLAMACPP,
    )


def llamacpp_timing(timings: dict[str, Any]) -> ServerTiming | None:
    """llama.cpp's ``timings`` (module doc): its prompt's processing is its TTFT from a slot."""
    prefill = _seconds(_number(timings, "prompt_ms"))
    decode = _seconds(_number(timings, "predicted_ms"))
    if prefill is None and decode is None:
        return None
    return ServerTiming(
        reported_prefill_s=prefill,
        reported_ttft_s=prefill,
        reported_decode_s=decode,
        reported_itl_s=_seconds(_number(timings, "predicted_per_token_ms")),
        reported_timing_from=LLAMACPP,
    )


def read_report(
    timings: dict[str, Any] | None, metrics: dict[str, Any] | None
) -> tuple[Speculation | None, ServerTiming | None]:
    """A record's speculation and server timing from what its stream kept: llama.cpp's
    ``timings`` and vLLM's ``metrics`` object (either may be None)."""
    speculation: Speculation | None = None
    timing: ServerTiming | None = None
    if metrics is not None:
        spec = metrics.get("speculative_decoding")
        if isinstance(spec, dict):
            speculation = vllm_speculation(spec)
        timing = vllm_timing(metrics)
    if timings is not None:
        if speculation is None:
            speculation = llamacpp_speculation(timings)
        if timing is None:
            timing = llamacpp_timing(timings)
    return speculation, timing
