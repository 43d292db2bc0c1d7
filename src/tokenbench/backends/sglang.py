"""SGLang (`python -m sglang.launch_server`): OpenAI completions + chat, Prometheus at /metrics
when started with --enable-metrics (always rendered).

Facts and their sources:
- CLI flags: sgl-project/sglang python/sglang/srt/server_args.py (ServerArgs; the flag is the
  field name with dashes): --model-path (alias --model), --host, --port, --served-model-name,
  --max-running-requests, --mem-fraction-static ("fraction of the memory used for static
  allocation (model weights and KV cache memory pool)", the same meaning as our kv_memory),
  --context-length, --disable-radix-cache ("Disable RadixAttention for prefix caching"; the radix
  cache is on by default, so prefix_caching=on renders nothing), --quantization, --tp-size (alias
  --tensor-parallel-size), --enable-metrics ("Enable log prometheus metrics", default off).
- Readiness: GET /health and GET /health_generate are one handler that answers 503 while the
  server status is Starting and 200 once a 1-token generation comes back
  (python/sglang/srt/entrypoints/http_server.py). GET /get_server_info returns the server args
  plus "version" (same file).
- Metrics: python/sglang/srt/metrics/collector.py (SchedulerMetricsCollector,
  TokenizerMetricsCollector). sglang:token_usage is a 0..1 fraction of the KV pool (example value
  0.28 in docs/references/production_metrics.md). The inter-token histogram was called
  sglang:time_per_output_token_seconds in older releases (docs/references/production_metrics.md)
  and sglang:inter_token_latency_seconds now; both are listed, newest first. Also exported but not
  mapped: sglang:gen_throughput (tok/s gauge), sglang:cache_hit_rate (gauge),
  sglang:e2e_request_latency_seconds, sglang:queue_time_seconds.
- Usage: stream_options.include_usage and the ignore_eos extra parameter are request fields of
  CompletionRequest / ChatCompletionRequest (python/sglang/srt/entrypoints/openai/protocol.py);
  stream_options.continuous_usage_stats puts the usage on every chunk (serving_chat.py
  _generate_stream_content; utils.py should_include_usage).
- Container: lmsysorg/sglang has no server entrypoint; docs/get_started/install.md runs
  `lmsysorg/sglang:latest python3 -m sglang.launch_server ... --host 0.0.0.0 --port 30000` with
  ~/.cache/huggingface mounted at /root/.cache/huggingface. Default port 30000 (same doc).
"""

from __future__ import annotations

from pathlib import Path

from tokenbench.backends.base import Launch, LaunchSpec, Profile, docker_run, exe, in_container, knob_flags
from tokenbench.backends.cache_control import reset_sglang
from tokenbench.backends.lora import SGLANG
from tokenbench.backends.speculation import sglang_flags
from tokenbench.telemetry.prom import MetricNames

IMAGE = "lmsysorg/sglang:latest"
MODULE = ["-m", "sglang.launch_server"]

# python/sglang/srt/metrics/collector.py:
#   SchedulerMetricsCollector: sglang:num_running_reqs, sglang:num_queue_reqs (gauges),
#     sglang:token_usage (gauge, 0..1), sglang:num_retracted_requests_total (counter; requests
#     retracted = preempted when the KV cache is full).
#   TokenizerMetricsCollector: sglang:prompt_tokens_total, sglang:generation_tokens_total,
#     sglang:cached_tokens_total (counters, tokens; cached is only incremented when a request hit
#     the cache, so it is absent until the first hit), sglang:time_to_first_token_seconds,
#     sglang:inter_token_latency_seconds (histograms, seconds; the ITL _sum adds each interval and
#     the buckets count tokens, so _sum/_count is the mean time per output token).
# docs/references/production_metrics.md (older): sglang:time_per_output_token_seconds.
METRICS = MetricNames(
    running=("sglang:num_running_reqs",),
    waiting=("sglang:num_queue_reqs",),
    kv_usage=("sglang:token_usage",),
    preemptions=("sglang:num_retracted_requests_total",),
    prefix_cache_hits=("sglang:cached_tokens_total",),
    prefix_cache_queries=("sglang:prompt_tokens_total",),
    generated_tokens=("sglang:generation_tokens_total",),
    ttft_histogram=("sglang:time_to_first_token_seconds",),
    itl_histogram=("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
)


def _args(spec: LaunchSpec, model: str) -> list[str]:
    knobs = spec.knobs
    if knobs.prefix_caching:  # the radix cache is SGLang's default (server_args.py)
        knobs = knobs.model_copy(update={"prefix_caching": None})
    return [
        "--model-path",
        model,
        "--host",
        spec.host,
        "--port",
        str(spec.port),
        "--served-model-name",
        spec.served_name,
        "--enable-metrics",
        *knob_flags(
            knobs,
            "SGLang",
            {
                "max_num_seqs": "--max-running-requests",
                "kv_memory": "--mem-fraction-static",
                "max_model_len": "--context-length",
                "quantization": "--quantization",
                "tensor_parallel": "--tp-size",
            },
            {"prefix_caching": (None, "--disable-radix-cache")},
            lora=SGLANG,
            speculation=sglang_flags,
        ),
        *spec.knobs.engine_args,
    ]


def traces(endpoint: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """server spans: SGLang's spans to ``endpoint``. --enable-trace and --otlp-traces-endpoint
    (python/sglang/srt/server_args.py; the endpoint's default localhost:4317 is gRPC's); the
    exporter's protocol from OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, grpc unless "http/protobuf", which
    takes the full URL (python/sglang/srt/observability/trace.py get_otlp_span_exporter; both
    exporters must be installed: ``pip install "sglang[tracing]"``, docs/references/
    production_request_trace.md); its BatchSpanProcessor exports every
    SGLANG_OTLP_EXPORTER_SCHEDULE_DELAY_MILLIS (trace.py process_tracing_init, default 500): 200
    as vLLM's. Each request is a root span "Req <rid>" in the trace of its incoming traceparent
    (the tokenizer manager passes the request's headers: extract_trace_headers), with the
    scheduler's slices below it (spans/shapes.py reads them)."""
    env = {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "SGLANG_OTLP_EXPORTER_SCHEDULE_DELAY_MILLIS": "200"}
    return ("--enable-trace", "--otlp-traces-endpoint", endpoint), env


def _command(spec: LaunchSpec) -> list[str]:
    """``python3 -m sglang.launch_server``; --engine-bin replaces it, except that a Python
    interpreter given as --engine-bin (a venv's bin/python) keeps ``-m sglang.launch_server``."""
    if spec.executable and Path(spec.executable).name.startswith("python"):
        return [spec.executable, *MODULE]
    return exe(spec, ["python3", *MODULE])


def local(spec: LaunchSpec) -> Launch:
    return Launch((*_command(spec), *_args(spec, spec.model)), dict(spec.knobs.engine_env))


def container(spec: LaunchSpec) -> Launch:
    inside, volumes = in_container(spec)
    return docker_run(spec, IMAGE, ["python3", *MODULE, *_args(inside, inside.model)], volumes)


PROFILE = Profile(
    name="sglang",
    title="SGLang",
    apis=("chat", "completions"),
    default_port=30000,
    ready_path="/health",
    local=local,
    container=container,
    metrics=METRICS,
    version_path="/get_server_info",
    version_field="version",
    version_package="sglang",
    usage="final chunk with usage when stream_options.include_usage is set",
    quirks=(
        "/metrics exists only with --enable-metrics (tokenbench always passes it)",
        "/health runs a 1-token generation (503 until the server status is Up)",
        "prefix_caching=on is the default (radix cache) and renders no flag; off renders --disable-radix-cache",
        "sglang:cached_tokens_total is absent until the first prefix-cache hit",
    ),
    cold_start_includes="process start, model load and the server's first successful /health generation",
    docs=(
        "python/sglang/srt/server_args.py",
        "python/sglang/srt/metrics/collector.py",
        "python/sglang/srt/entrypoints/http_server.py",
        "docs/references/production_metrics.md",
        "python/sglang/srt/observability/trace.py",
        "python/sglang/srt/observability/req_time_stats.py",
    ),
    reset_prefix_cache=reset_sglang,  # /flush_cache, retried while busy (400)
    token_id_prompts=True,  # CompletionRequest.prompt takes a list of ids (entrypoints/openai/protocol.py)
    continuous_usage=True,  # StreamOptions.continuous_usage_stats (entrypoints/openai/serving_chat.py)
    # each reply's speculation figures in sglext (entrypoints/openai/protocol.py; nothing without speculation)
    report_fields={"return_spec_tokens_details": True},
    traces=traces,
    structured="sglang",  # --response-format in its own fields (regex/ebnf: sglang/srt/entrypoints/openai/protocol.py)
)
