"""How each tool defines the figures it reports, against tokenbench's (METRICS.md), and the
comparison of the two over the same requests (results.json ``imported.points[].figures``).

Read from each tool's source, per version:

vLLM bench serve (vllm/benchmarks/serve.py and lib/endpoint_request_func.py, vLLM 0.32): a
request's clock starts just before its POST, and every SSE event with ``choices`` is timed as a
token. Its TTFT ends at the first: on the chat route the role-only opening chunk (empty content)
that vLLM, and the mock, send before any token; tokenbench's ends at the first chunk with
content. Its latency (E2E) ends at the last: a closing chunk with only the finish reason where the
server sends one (the mock does; vLLM puts the finish reason on the last token's chunk); its ITL
is every gap between consecutive such events, pooled over requests, so it holds the opening
chunk's gap to the first token and the closing chunk's; tokenbench's ITL pools the gaps between
content chunks. Its TPOT is (latency − TTFT) / (output tokens − 1) over requests of 2+ tokens:
tokenbench's formula, between different ends.
Its throughputs divide every completed request (and its output tokens) by the benchmark's
duration, from its first send to its last reply's end; tokenbench divides the requests in the
measurement window by the window (open loop: the requests scheduled in it, over the window
stretched by any backlog: METRICS.md "Populations and periods").

AIPerf 0.13.0 (aiperf/metrics/types/*.py, aiperf/transports/aiohttp_client.py,
aiperf/common/models/record_models.py, aiperf/metrics/metric_dicts.py): a request's clock starts
just before its POST (``start_perf_ns``, session set up, connection not yet made), and it times only
responses with content (``content_responses``: a role-only opening chunk, a finish-only closing one
and the usage chunk are not among them). Its TTFT (ttft_metric.py) ends at the first of them, its
request latency (request_latency_metric.py) at the last; its inter chunk latency
(inter_chunk_latency_metric.py) is every gap between consecutive ones, pooled: tokenbench's TTFT,
E2E and ITL. Its inter token latency (inter_token_latency_metric.py) is (latency − TTFT) / (output
tokens − 1) over requests of 2+ tokens, the tokens its tokenizer counted in the reply (the first
chunk's own count under --per-chunk-usage): tokenbench's TPOT. Its TTFT, ITL and latency
percentiles include a failed request that had content (``PERCENTILE_INCLUDES_FAILED_REQUESTS``);
tokenbench's are over the requests that succeeded. Its request and output token throughputs
(request_throughput_metric.py, output_token_throughput_metrics.py) divide the valid requests (no
error, content) and their output tokens by the benchmark duration (benchmark_duration_metric.py:
the first request's start to the last response, on the wall clock); tokenbench divides the
requests in the measurement window by the window. It counts a failed request once in
``error_request_count`` and groups them in ``error_summary`` by identical error, each entry with
its own ``count``; its warmup requests (--warmup-request-count) are in none of its figures.

GuideLLM (guidellm/backends/openai/http.py, backends/openai/request_handlers.py,
schemas/base/request_stats.py, benchmark/schemas/metrics.py and accumulator.py, GuideLLM 0.8.1):
a request's clock starts when its first request header is written (httpx's trace hook; before
the POST without one); its first and last token are the first and last SSE line with content (a
role-only opening chunk and a finish-only or usage-only closing one are not), and it keeps only
those two times. Its TTFT is tokenbench's. Its "inter token latency" is tokenbench's TPOT per
request, (last token - first token) / (output tokens - 1), but its summary weights each request
by its output tokens - 1; its "time per output token" is (last token - start) / output tokens,
tokenbench's normalized latency, weighted by output tokens. Its request latency ends when the
stream closed ([DONE] read), after the last token. Its summaries count the requests that overlap
its measurement window (its warmup and cooldown cut off; TTFT by the first token's time), and its
rates divide the successful requests (and their output tokens, the ones between the first and
last token spread evenly between them) ending in that window by the window: its first request's
start to its last one's end.

inference-perf 0.7.0 (inference_perf/reportgen/base.py ``summarize_requests``,
``compute_request_latency_metrics``, ``correct_streamed_response_metrics``;
apis/streaming_parser.py; client/modelserver/openai_client.py): a request's clock starts just before
its POST (``start``, connection not yet made); it times each SSE event with content (a role-only
delta, the usage chunk and [DONE] are not timed), then, with a tokenizer configured, gives each
token its chunk's time (``output_token_times``: a chunk of k tokens, by its tokenizer over the
chunk's text, is k times, k - 1 gaps of 0). Its TTFT ends at the first token's time: tokenbench's.
Its TPOT is (last token - first token) / (output tokens - 1), the tokens its tokenizer counted in
the whole reply (the server's usage with ``use_server_output_tokens``): tokenbench's formula, whose
count is the server's usage. Its inter_token_latency pools every gap between consecutive token
times: tokenbench's ITL when each chunk is one token. Its request latency ends when the stream
closed and the response was released (after [DONE]), not at the last token. Its TTFT and TPOT are
over successful requests of 2+ token times. Its throughputs divide the successful requests (and
their output tokens, its tokenizer's count) by the stage's ``benchmark_time_seconds``: the first
request's start to the last one's end, failed ones included; tokenbench divides the requests in the
measurement window by the window. Its normalized_time_per_output_token (NTPOT: request latency /
output tokens) has no tokenbench headline figure to compare with.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenbench.metrics.catalogue import METRICS
from tokenbench.results import PointResult
from tokenbench.results.imported import NO_REQUESTS, ImportedFigure


@dataclass(frozen=True)
class Definition:
    """One of a tool's figures: its own name, the tokenbench metric it is compared with, whether
    the formulas agree on a *plain* stream (every event the tool timed carried a token) and on
    one with an opening or a closing chunk the tool timed as a token (a role-only first chunk, a
    finish-only last one), and why not."""

    metric: str  # a catalogue key
    tool_name: str
    same: bool  # the same formula on a plain stream
    same_unplain: bool  # ... and on one with an opening or a closing chunk
    text: str


_VLLM_TTFT = (
    "vLLM bench: POST to its first SSE event with choices, the role-only opening chunk included; "
    "tokenbench: to the first chunk with content"
)
_VLLM_GAPS = (
    "vLLM bench: every gap between consecutive choices events, the opening chunk's gap to the first token "
    "included; tokenbench: the gaps between content chunks"
)
_VLLM_TPOT = (
    "(latency - TTFT) / (output tokens - 1) in both, over requests of 2+ tokens; vLLM bench's TTFT ends at "
    "the opening chunk, so its numerator also holds that chunk's gap to the first token"
)
_VLLM_E2E = (
    "POST to the last chunk in both; vLLM bench's is its last choices event, a closing chunk with only the "
    "finish reason included (the usage chunk after it is not)"
)
_VLLM_RATE = (
    "vLLM bench: every completed request / the benchmark's duration (first send to the last reply's end); "
    "tokenbench: the requests in the measurement window / the window (open loop: scheduled in it)"
)
_VLLM_TOKENS = (
    "vLLM bench: every completed request's output tokens / the benchmark's duration; tokenbench: the tokens "
    "that arrived in the measurement window / the window"
)

_AIPERF_LATENCY = (
    "the same in both: POST to the {end} response with content (AIPerf times no role-only or finish-only chunk); "
    "AIPerf's percentiles also hold a failed request that had content, tokenbench's only those that succeeded"
)
_AIPERF_ICL = (
    "AIPerf's inter chunk latency is tokenbench's ITL: every gap between consecutive responses with content, "
    "pooled over requests"
)
_AIPERF_ITL = (
    "AIPerf's inter token latency is tokenbench's TPOT: (latency - TTFT) / (output tokens - 1) over requests "
    "of 2+ tokens, the tokens its tokenizer counted in the reply"
)
_AIPERF_RATE = (
    "AIPerf: the valid requests / the benchmark duration (first request's start to the last response, warmup "
    "left out); tokenbench: the requests in the measurement window / the window (open loop: scheduled in it)"
)
_AIPERF_TOKENS = (
    "AIPerf: the valid requests' output tokens (its tokenizer's count) / the benchmark duration; tokenbench: "
    "the tokens that arrived in the measurement window / the window"
)

_GUIDELLM_TTFT = (
    "first request header written to the first SSE line with content in GuideLLM, the send to the first "
    "content chunk in tokenbench; GuideLLM's summary: the requests whose first token fell in its window"
)
_GUIDELLM_PCT = (
    "; GuideLLM's median and percentiles are the first sample at or above the rank on its CDF "
    "(schemas/base/statistics.py Percentiles.from_pdf), tokenbench's interpolate between samples"
)
_GUIDELLM_TPOT = (
    "GuideLLM's inter_token_latency_ms: (last token - first token) / (output tokens - 1) per request, as "
    "tokenbench's TPOT, but its summary weights each request by output tokens - 1 (the same when every "
    "reply has as many tokens); its time_per_output_token_ms is E2E / output tokens (normalized latency)"
)
_GUIDELLM_E2E = (
    "GuideLLM: request start to the stream's close ([DONE] read, after any closing and usage chunk); "
    "tokenbench: to the last content chunk"
)
_GUIDELLM_RATE = (
    "GuideLLM: successful requests ending in its measurement window (warmup and cooldown cut off) / the "
    "window, first start to last end; tokenbench: the requests in the measurement window / the window "
    "(open loop: scheduled in it)"
)
_GUIDELLM_TOKENS = (
    "GuideLLM: the successful requests' output tokens in its measurement window / the window; tokenbench: "
    "the tokens that arrived in the measurement window / the window"
)

_IP_TTFT = (
    "the same in both: POST to the first SSE event with content (inference-perf times no role-only or usage chunk); "
    "with a tokenizer, a first chunk its tokenizer counts as no token is skipped"
)
_IP_TPOT = (
    "(last token - first token) / (output tokens - 1) in both, over requests of 2+ tokens; inference-perf's count is "
    "its tokenizer's over the reply's text (the server's with use_server_output_tokens), tokenbench's the server's usage"
)
_IP_ITL = (
    "inference-perf's inter_token_latency pools the gaps between its token times, a chunk of k tokens k times (k - 1 "
    "gaps of 0); tokenbench's ITL pools the gaps between content chunks: the same when every chunk is one token"
)
_IP_E2E = (
    "inference-perf: POST to the stream's close (after [DONE], the response released); tokenbench: to the last "
    "content chunk"
)
_IP_RATE = (
    "inference-perf: the stage's successful requests / its benchmark_time_seconds (first request's start to the last "
    "one's end, failed ones included); tokenbench: the requests in the measurement window / the window (open loop: "
    "scheduled in it)"
)
_IP_TOKENS = (
    "inference-perf: the successful requests' output tokens (its tokenizer's count) / the stage's "
    "benchmark_time_seconds; tokenbench: the tokens that arrived in the measurement window / the window"
)

DEFINITIONS: dict[str, tuple[Definition, ...]] = {
    "vllm-bench-serve": (
        Definition("ttft_s_mean", "mean_ttft_ms", True, False, _VLLM_TTFT),
        Definition("ttft_s_p50", "median_ttft_ms", True, False, _VLLM_TTFT),
        Definition("ttft_s_p99", "p99_ttft_ms", True, False, _VLLM_TTFT),
        Definition("tpot_s_mean", "mean_tpot_ms", True, False, _VLLM_TPOT),
        Definition("tpot_s_p50", "median_tpot_ms", True, False, _VLLM_TPOT),
        Definition("tpot_s_p99", "p99_tpot_ms", True, False, _VLLM_TPOT),
        Definition("itl_s_mean", "mean_itl_ms", True, False, _VLLM_GAPS),
        Definition("e2e_s_mean", "mean_e2el_ms", True, False, _VLLM_E2E),
        Definition("e2e_s_p50", "median_e2el_ms", True, False, _VLLM_E2E),
        Definition("e2e_s_p99", "p99_e2el_ms", True, False, _VLLM_E2E),
        Definition("requests_per_s", "request_throughput", False, False, _VLLM_RATE),
        Definition("output_tokens_per_s", "output_throughput", False, False, _VLLM_TOKENS),
    ),
    "aiperf": (
        Definition("ttft_s_mean", "time_to_first_token.avg", True, True, _AIPERF_LATENCY.format(end="first")),
        Definition("ttft_s_p50", "time_to_first_token.p50", True, True, _AIPERF_LATENCY.format(end="first")),
        Definition("ttft_s_p99", "time_to_first_token.p99", True, True, _AIPERF_LATENCY.format(end="first")),
        Definition("tpot_s_mean", "inter_token_latency.avg", True, True, _AIPERF_ITL),
        Definition("tpot_s_p50", "inter_token_latency.p50", True, True, _AIPERF_ITL),
        Definition("tpot_s_p99", "inter_token_latency.p99", True, True, _AIPERF_ITL),
        Definition("itl_s_mean", "inter_chunk_latency.avg", True, True, _AIPERF_ICL),
        Definition("e2e_s_mean", "request_latency.avg", True, True, _AIPERF_LATENCY.format(end="last")),
        Definition("e2e_s_p50", "request_latency.p50", True, True, _AIPERF_LATENCY.format(end="last")),
        Definition("e2e_s_p99", "request_latency.p99", True, True, _AIPERF_LATENCY.format(end="last")),
        Definition("requests_per_s", "request_throughput.avg", False, False, _AIPERF_RATE),
        Definition("output_tokens_per_s", "output_token_throughput.avg", False, False, _AIPERF_TOKENS),
    ),
    "guidellm": (
        Definition("ttft_s_mean", "time_to_first_token_ms.mean", True, True, _GUIDELLM_TTFT),
        Definition("ttft_s_p50", "time_to_first_token_ms.median", False, False, _GUIDELLM_TTFT + _GUIDELLM_PCT),
        Definition("ttft_s_p99", "time_to_first_token_ms.p99", False, False, _GUIDELLM_TTFT + _GUIDELLM_PCT),
        Definition("tpot_s_mean", "inter_token_latency_ms.mean", False, False, _GUIDELLM_TPOT),
        Definition("tpot_s_p50", "inter_token_latency_ms.median", False, False, _GUIDELLM_TPOT + _GUIDELLM_PCT),
        Definition("tpot_s_p99", "inter_token_latency_ms.p99", False, False, _GUIDELLM_TPOT + _GUIDELLM_PCT),
        Definition("e2e_s_mean", "request_latency.mean", False, False, _GUIDELLM_E2E),
        Definition("e2e_s_p50", "request_latency.median", False, False, _GUIDELLM_E2E + _GUIDELLM_PCT),
        Definition("e2e_s_p99", "request_latency.p99", False, False, _GUIDELLM_E2E + _GUIDELLM_PCT),
        Definition("requests_per_s", "requests_per_second.mean", False, False, _GUIDELLM_RATE),
        Definition("output_tokens_per_s", "output_tokens_per_second.mean", False, False, _GUIDELLM_TOKENS),
    ),
    "inference-perf": (
        Definition("ttft_s_mean", "successes.latency.time_to_first_token.mean", True, True, _IP_TTFT),
        Definition("ttft_s_p50", "successes.latency.time_to_first_token.median", True, True, _IP_TTFT),
        Definition("ttft_s_p99", "successes.latency.time_to_first_token.p99", True, True, _IP_TTFT),
        Definition("tpot_s_mean", "successes.latency.time_per_output_token.mean", True, True, _IP_TPOT),
        Definition("tpot_s_p50", "successes.latency.time_per_output_token.median", True, True, _IP_TPOT),
        Definition("tpot_s_p99", "successes.latency.time_per_output_token.p99", True, True, _IP_TPOT),
        Definition("itl_s_mean", "successes.latency.inter_token_latency.mean", True, True, _IP_ITL),
        Definition("e2e_s_mean", "successes.latency.request_latency.mean", False, False, _IP_E2E),
        Definition("e2e_s_p50", "successes.latency.request_latency.median", False, False, _IP_E2E),
        Definition("e2e_s_p99", "successes.latency.request_latency.p99", False, False, _IP_E2E),
        Definition("requests_per_s", "successes.throughput.requests_per_sec", False, False, _IP_RATE),
        Definition("output_tokens_per_s", "successes.throughput.output_tokens_per_sec", False, False, _IP_TOKENS),
    ),
}


def tool_names(tool: str) -> dict[str, str]:
    """A tool's figure names by tokenbench metric key."""
    return {d.metric: d.tool_name for d in DEFINITIONS.get(tool, ())}


def compare_figures(tool: str, figures: dict[str, float], point: PointResult, plain: bool) -> list[ImportedFigure]:
    """Each of the tool's figures of a point beside tokenbench's over the same requests
    (``plain``: no request had an opening or a closing chunk)."""
    out = []
    for d in DEFINITIONS.get(tool, ()):
        if d.metric not in figures:
            continue
        ours = METRICS[d.metric].get(point)
        theirs = figures[d.metric]
        same = d.same if plain else d.same_unplain
        out.append(
            ImportedFigure(
                metric=d.metric,
                tool_name=d.tool_name,
                tool_value=theirs,
                tokenbench_value=ours,
                difference=(theirs - ours) / ours if ours else None,
                same_definition=same,
                definition=d.text,
            )
        )
    return out


def aggregate_figures(
    measured_by: str | None, figures: dict[str, float], names: dict[str, str]
) -> list[ImportedFigure]:
    """The figures of a file that kept no request (a Benchmark Report): the tool's alone,
    tokenbench's absent (nothing to compute them over), each as its measuring tool defines it;
    that is tokenbench's own definition only when tokenbench measured them."""
    ours = measured_by is not None and measured_by.split()[0] == "tokenbench"
    by = measured_by or "the tool that wrote the report (the report does not name it)"
    text = f"{NO_REQUESTS}: the report's figure as {by} defines it"
    return [
        ImportedFigure(
            metric=key,
            tool_name=names.get(key, key),
            tool_value=value,
            tokenbench_value=None,
            difference=None,
            same_definition=ours,
            definition=text,
        )
        for key, value in figures.items()
    ]
