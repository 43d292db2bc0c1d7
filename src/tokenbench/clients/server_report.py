"""What a server says of one request in its own response: its speculation figures and its own
timing, read from each engine's fields into the record's ``Speculation`` and ``ServerTiming``
(records.py). Pure: the stream keeps the objects as sent (``Stream.server_timings``, verbatim; the
vLLM ``metrics`` object in ``Stream.server_metrics``, SGLang's ``sglext`` in ``Stream.sglext``,
TensorRT-LLM's last ``avg_decoded_tokens_per_iter`` in ``Stream.decoded_per_iter``), this reads
them once, when the record ends.

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
- SGLang: a finished request's ``meta_info`` carries its speculation (managers/
  tokenizer_manager_components/spec_decoding_meta.py ``fill_spec_decoding_meta``, once managers/
  tokenizer_manager.py ``_calculate_spec_decoding_metrics``): ``spec_verify_ct`` (verify steps),
  ``spec_num_proposed_drafts`` (= steps x (``speculative_num_draft_tokens`` - 1): computed, not
  counted; read as ``spec_tokens`` = that draft length, with ``--speculative-eagle-topk`` > 1 a
  tree's tokens, more than a step can accept), ``spec_num_correct_drafts`` (draft only, no bonus), ``spec_accept_rate`` (correct /
  proposed), ``spec_accept_length`` (completion tokens / steps: the bonus and the prefill's token
  in), ``spec_correct_drafts_histogram`` (index j = steps that accepted exactly j, grown to the most
  one accepted: managers/schedule_batch.py ``Req.update_spec_correct_drafts_histogram``); older
  releases named the counts ``spec_accepted_drafts`` / ``spec_proposed_drafts``, before that
  ``spec_accept_token_num`` / ``spec_draft_token_num``, and the histogram
  ``spec_accept_histogram`` (sent beside the new names for a release). Its OpenAI endpoints repeat
  them when the request sets ``return_spec_tokens_details`` (entrypoints/openai/protocol.py): a
  chunk of their own with empty ``choices`` after the content and before the usage chunk,
  ``sglext.spec_tokens_details`` (serving_chat.py, serving_completions.py; utils.py
  ``spec_tokens_details_from_meta_info``: an absent key is sent as 0 or [], so 0 and [] read as
  not given). Its timing (``e2e_latency``, s from the API server's receipt to the finish; with
  ``--enable-metrics`` wall-clock ``*_ts`` and ``decode_throughput``) is in ``meta_info`` only, which
  its streamed OpenAI replies never carry (``return_meta_info`` is refused with ``stream``): no
  timing read.
- TensorRT-LLM (trtllm-serve): each streamed choice carries ``avg_decoded_tokens_per_iter``
  (serve/postprocess_handlers.py; the executor's result, cpp/include/tensorrt_llm/batch_manager/
  llmRequest.h ``getAvgDecodedTokensPerIter``: generated tokens / decoding iterations, 1 without
  speculation, accepted drafts per step + 1 with it), the finishing choice's the request's. Its
  counts and timing are not in the reply: ``GET /perf_metrics`` (serve/openai_server.py
  ``get_perf_metrics``, with ``return_perf_metrics: true`` and ``perf_metrics_max_requests`` in the
  LLM API options; each GET drains it) lists finished requests by ``request_id``, the number in the
  reply's id (``chatcmpl-<id>``, ``cmpl-<id>``), each with ``perf_metrics``: ``timing_metrics``
  (``arrival_time``, ``first_scheduled_time``, ``first_token_time``, ``last_token_time``: s on the
  server's steady clock; cpp/include/tensorrt_llm/executor/types.h ``RequestPerfMetrics``) and, when
  it drafted, ``speculative_decoding`` (``acceptance_rate``, ``total_accepted_draft_tokens``,
  ``total_draft_tokens``; serve/_perf_metrics_schema.py). ``trtllm_perf_speculation`` and
  ``trtllm_perf_timing`` read one entry's ``perf_metrics``.
"""

from __future__ import annotations

from typing import Any

from tokenbench.records import ServerTiming, Speculation

VLLM = "vllm"
LLAMACPP = "llamacpp"
SGLANG = "sglang"
TRTLLM = "trtllm"


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _number(obj: dict[str, Any], key: str) -> float | None:
    return _float(obj.get(key))


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


def _first(obj: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    """The count under the first of ``keys`` present (a field's names over SGLang's releases)."""
    for key in keys:
        if key in obj:
            return _count(obj, key)
    return None


_PROPOSED = ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")
_CORRECT = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
_HISTOGRAM = ("spec_correct_drafts_histogram", "spec_accept_histogram")


def sglang_speculation(details: dict[str, Any]) -> Speculation | None:
    """SGLang's ``meta_info`` speculation keys, or ``sglext.spec_tokens_details`` (the same keys;
    module doc); None without a verify step. Proposed drafts of 0 mean none were computed (an
    absent key is sent as 0), so neither they, the accepted ones nor the rate are given."""
    steps = _count(details, "spec_verify_ct")
    if not steps:
        return None
    drafted = _first(details, _PROPOSED) or None
    length = _number(details, "spec_accept_length")
    histogram = next((h for h in (_ints(details, k) for k in _HISTOGRAM) if h), None)
    return Speculation(
        spec_steps=steps,
        spec_draft_tokens=drafted,
        spec_accepted_tokens=_first(details, _CORRECT) if drafted else None,
        spec_acceptance_length=length if length else None,
        spec_acceptance_rate=_number(details, "spec_accept_rate") if drafted else None,
        spec_tokens=drafted // steps if drafted and drafted % steps == 0 else None,
        spec_accepted_histogram=histogram,
        spec_from=SGLANG,
    )


def sglang_details(sglext: dict[str, Any]) -> dict[str, Any] | None:
    """The ``spec_tokens_details`` of an ``sglext`` object (a list, one per choice, when n > 1:
    the first)."""
    details = sglext.get("spec_tokens_details")
    if isinstance(details, list):
        details = details[0] if details else None
    return details if isinstance(details, dict) else None


def trtllm_speculation(avg_decoded_tokens_per_iter: object) -> Speculation | None:
    """TensorRT-LLM's ``avg_decoded_tokens_per_iter`` (module doc) as the acceptance length; None
    at 1 or less, what a model without speculation sends (a speculating one whose drafts all failed
    reads the same)."""
    length = _float(avg_decoded_tokens_per_iter)
    if length is None or length <= 1.0:
        return None
    return Speculation(spec_acceptance_length=length, spec_from=TRTLLM)


def trtllm_perf_speculation(perf_metrics: dict[str, Any]) -> Speculation | None:
    """The ``speculative_decoding`` of one ``/perf_metrics`` entry's ``perf_metrics`` (module doc);
    None when it has none (the server drafted nothing for it)."""
    spec = perf_metrics.get("speculative_decoding")
    if not isinstance(spec, dict) or _count(spec, "total_draft_tokens") is None:
        return None
    return Speculation(
        spec_draft_tokens=_count(spec, "total_draft_tokens"),
        spec_accepted_tokens=_count(spec, "total_accepted_draft_tokens"),
        spec_acceptance_rate=_number(spec, "acceptance_rate"),
        spec_from=TRTLLM,
    )


def _between(times: dict[str, Any], start: str, end: str) -> float | None:
    a, b = _number(times, start), _number(times, end)
    return b - a if a is not None and b is not None else None


def trtllm_perf_timing(perf_metrics: dict[str, Any], output_tokens: int | None = None) -> ServerTiming | None:
    """The ``timing_metrics`` of one ``/perf_metrics`` entry's ``perf_metrics`` (module doc): the
    executor's arrival is where its TTFT starts; the mean ITL needs the reply's ``output_tokens``."""
    times = perf_metrics.get("timing_metrics")
    if not isinstance(times, dict):
        return None
    decode = _between(times, "first_token_time", "last_token_time")
    return ServerTiming(
        reported_queue_s=_between(times, "arrival_time", "first_scheduled_time"),
        reported_prefill_s=_between(times, "first_scheduled_time", "first_token_time"),
        reported_ttft_s=_between(times, "arrival_time", "first_token_time"),
        reported_decode_s=decode,
        reported_itl_s=decode / (output_tokens - 1)
        if decode is not None and output_tokens and output_tokens > 1
        else None,
        reported_timing_from=TRTLLM,
    )


def read_report(
    timings: dict[str, Any] | None,
    metrics: dict[str, Any] | None,
    sglext: dict[str, Any] | None = None,
    decoded_per_iter: object = None,
) -> tuple[Speculation | None, ServerTiming | None]:
    """A record's speculation and server timing from what its stream kept: llama.cpp's
    ``timings``, vLLM's ``metrics`` object, SGLang's ``sglext`` and TensorRT-LLM's last
    ``avg_decoded_tokens_per_iter`` (any may be None)."""
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
    if speculation is None and sglext is not None:
        details = sglang_details(sglext)
        speculation = sglang_speculation(details) if details is not None else None
    if speculation is None and decoded_per_iter is not None:
        speculation = trtllm_speculation(decoded_per_iter)
    return speculation, timing
