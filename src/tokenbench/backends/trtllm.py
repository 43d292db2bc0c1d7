"""TensorRT-LLM (`trtllm-serve`): OpenAI chat + completions; Prometheus only when asked for.

Facts and their sources (NVIDIA/TensorRT-LLM unless a URL is given):
- CLI: tensorrt_llm/commands/serve.py (click command "serve"; the ``trtllm-serve`` group runs
  "serve" when the first word is not a subcommand, so ``trtllm-serve MODEL`` works): MODEL
  positional, --host (default localhost), --port (default 8000), --backend pytorch|tensorrt
  (alias trt; default pytorch), --max_batch_size, --max_seq_len, --tp_size (alias of
  --tensor_parallel_size), --kv_cache_free_gpu_memory_fraction (alias of --free_gpu_memory_fraction,
  default 0.9: "Free GPU memory fraction reserved for KV Cache, after allocating model weights and
  buffers"), --extra_llm_api_options (alias --config): a YAML file that overrides the LLM API
  arguments. There is no prefix-caching, quantization or served-model-name flag.
- Prefix caching is ``kv_cache_config.enable_block_reuse`` in that YAML (docs/source/commands/
  trtllm-serve.rst has a YAML setting ``enable_block_reuse: false`` under kv_cache_config). A profile renders argv
  and env only, so tokenbench writes no YAML: the knob is refused with the YAML to pass instead.
- Quantization comes from the checkpoint (a pre-quantized HF checkpoint or a built engine): refused.
- Served name: tensorrt_llm/serve/openai_server.py (OpenAIServer.__init__) uses a local model
  directory's basename, else the MODEL argument; GET /v1/models lists it.
- Readiness: the server binds only after the LLM is constructed (commands/serve.py launch_server),
  and GET /health answers 200 when the executor is healthy (openai_server.py ``health``).
  GET /version -> {"version": ...} (openai_server.py ``version``).
- Metrics: GET /metrics is NOT Prometheus: it returns JSON iteration stats (openai_server.py
  ``get_iteration_stats``; docs/source/commands/trtllm-serve.rst). Prometheus text is mounted at
  /prometheus/metrics only when the LLM args have ``return_perf_metrics: true``
  (openai_server.py ``mount_metrics``; basic support merged in PR #5785, see issue #4926);
  iteration gauges (running/waiting/KV) also need ``enable_iter_perf_stats: true`` on the PyTorch
  backend (tensorrt_llm/metrics/collector.py, ``log_iteration_stats`` docstring).
  Names: tensorrt_llm/metrics/collector.py (MetricsCollector, prefix "trtllm_"); the first
  version (1.1.0rc5, per https://docs.nvidia.com/dynamo/latest/backends/trtllm/prometheus.html)
  had the same names without the prefix, so both are listed.
- Usage: StreamOptions.include_usage (tensorrt_llm/serve/openai_protocol.py). Request models use
  ``extra="forbid"``: unknown request fields are a 400. ``ignore_eos`` is a request field there.
- Image: nvcr.io/nvidia/tensorrt-llm/release (docs quick-start runs trtllm-serve inside it; the
  docs recommend --ulimit memlock=-1 --ulimit stack=67108864, which docker_run does not add).
"""

from __future__ import annotations

from tokenbench.backends.base import Launch, LaunchSpec, Profile, docker_run, exe, in_container, knob_flags
from tokenbench.backends.lora import TRTLLM
from tokenbench.backends.speculation import trtllm_flags
from tokenbench.errors import BackendError
from tokenbench.telemetry.prom import MetricNames

IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.2.1"  # NGC publishes versioned tags; pin yours

# tensorrt_llm/metrics/collector.py (MetricsCollector): gauges num_requests_running /
# num_requests_waiting (from numActiveRequests / numQueuedRequests), kv_cache_utilization
# (usedNumBlocks / maxNumBlocks, a 0..1 fraction), counters prompt_tokens_total,
# prompt_cached_tokens_total (prompt tokens served from the KV cache), generation_tokens_total,
# histograms time_to_first_token_seconds, time_per_output_token_seconds (seconds).
# Unprefixed names: collector.py before the "trtllm_" metric_prefix (TensorRT-LLM 1.1.0rc5).
METRICS = MetricNames(
    running=("trtllm_num_requests_running",),
    waiting=("trtllm_num_requests_waiting",),
    kv_usage=("trtllm_kv_cache_utilization",),
    prefix_cache_hits=("trtllm_prompt_cached_tokens_total",),  # tokens
    prefix_cache_queries=("trtllm_prompt_tokens_total",),  # tokens: every prompt token was a lookup
    generated_tokens=("trtllm_generation_tokens_total",),
    ttft_histogram=("trtllm_time_to_first_token_seconds", "time_to_first_token_seconds"),
    itl_histogram=("trtllm_time_per_output_token_seconds", "time_per_output_token_seconds"),
    path="/prometheus/metrics",  # openai_server.py mount_metrics; /metrics is JSON iteration stats
)

PERF_METRICS_YAML = "return_perf_metrics: true\nenable_iter_perf_stats: true"


def _args(spec: LaunchSpec, model: str) -> list[str]:
    knobs = spec.knobs
    if knobs.prefix_caching is not None:
        raise BackendError(
            "trtllm-serve has no prefix-caching flag; it is kv_cache_config.enable_block_reuse in an "
            "LLM API YAML: write 'kv_cache_config: {enable_block_reuse: "
            f"{'true' if knobs.prefix_caching else 'false'}}}' to a file and pass it with "
            "--engine-arg=--extra_llm_api_options --engine-arg=FILE (drop --prefix-caching)"
        )
    if knobs.quantization is not None:
        raise BackendError(
            "TensorRT-LLM takes its quantization from the checkpoint (a pre-quantized Hugging Face "
            "checkpoint or a built engine): pass that as --model instead of --quantization, or the "
            "engine's own options with --engine-arg"
        )
    chosen = any(a == "--backend" or a.startswith("--backend=") for a in knobs.engine_args)
    backend = [] if chosen else ["--backend", "pytorch"]
    return [
        model,
        "--host",
        spec.host,
        "--port",
        str(spec.port),
        *backend,
        *knob_flags(
            knobs,
            "TensorRT-LLM",
            {
                "max_num_seqs": "--max_batch_size",  # serve.py: "Maximum number of requests that the engine can schedule"
                "kv_memory": "--kv_cache_free_gpu_memory_fraction",  # of FREE memory after weights (quirk)
                "max_model_len": "--max_seq_len",  # serve.py: "Maximum total length of one request"
                "tensor_parallel": "--tp_size",  # serve.py: alias of --tensor_parallel_size
            },
            lora=TRTLLM,
            speculation=trtllm_flags,
        ),
        *knobs.engine_args,
    ]


def traces(endpoint: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """server spans: TensorRT-LLM's spans to ``endpoint``. --otlp_traces_endpoint (tensorrt_llm/
    commands/serve.py: "Target URL to which OpenTelemetry traces will be sent", passed to the LLM
    args); the exporter's protocol from OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, grpc unless
    "http/protobuf" (tensorrt_llm/llmapi/tracing.py get_span_exporter, adapted from vLLM's); a
    BatchSpanProcessor with the SDK's defaults (tracing.py init_tracer): OTEL_BSP_SCHEDULE_DELAY
    200 ms. The OpenAI server reads the incoming traceparent (tracing.extract_trace_headers in
    tensorrt_llm/serve/openai_server.py), and each finished request is one span with
    ``gen_ai.latency.*`` and usage attributes (tracing.py SpanAttributes) when per-request perf
    metrics are on (otherwise tracing.py warns "Insufficient request metrics available; trace
    generation aborted"; its own test runs with ``return_perf_metrics: true``)."""
    env = {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "200"}
    return ("--otlp_traces_endpoint", endpoint), env


def local(spec: LaunchSpec) -> Launch:
    return Launch((*exe(spec, ["trtllm-serve"]), *_args(spec, spec.model)), dict(spec.knobs.engine_env))


def container(spec: LaunchSpec) -> Launch:
    inside, volumes = in_container(spec)
    # The release image has no server entrypoint: the command follows the image name.
    return docker_run(spec, IMAGE, ["trtllm-serve", *_args(inside, inside.model)], volumes)


PROFILE = Profile(
    name="trtllm",
    title="TensorRT-LLM (trtllm-serve)",
    apis=("chat", "completions"),
    default_port=8000,
    ready_path="/health",
    local=local,
    container=container,
    metrics=METRICS,
    version_path="/version",
    version_field="version",
    version_package="tensorrt_llm",
    usage="final chunk with usage when stream_options.include_usage is set",
    quirks=(
        "--kv-memory renders --kv_cache_free_gpu_memory_fraction: a fraction of the memory FREE after "
        "weights and buffers are allocated, not of total accelerator memory as for vLLM",
        "Prometheus metrics exist only at /prometheus/metrics and only with an "
        "--extra_llm_api_options YAML containing 'return_perf_metrics: true' (and "
        "'enable_iter_perf_stats: true' for running/waiting/KV gauges); without it the scrape 404s. "
        "GET /metrics is JSON iteration stats, not Prometheus",
        "prefix caching (kv_cache_config.enable_block_reuse) and quantization have no flag: see the "
        "error message for the YAML / checkpoint to use",
        "served model name is the MODEL argument, or a local directory's basename; there is no flag to rename it",
        "request bodies with unknown fields are rejected (pydantic extra='forbid')",
        "--backend pytorch is rendered unless --engine-arg passes --backend",
    ),
    cold_start_includes="process start and model load (download if a hub id); with --backend tensorrt "
    "and a Hugging Face checkpoint, also the TensorRT engine build",
    docs=(
        "tensorrt_llm/commands/serve.py",
        "tensorrt_llm/serve/openai_server.py",
        "tensorrt_llm/metrics/collector.py",
        "docs/source/commands/trtllm-serve.rst",
        "tensorrt_llm/llmapi/tracing.py",
    ),
    traces=traces,
    traces_note="it sends a request's span only with per-request perf metrics on: an --extra_llm_api_options "
    "YAML with 'return_perf_metrics: true' (--engine-arg); its span has queue, TTFT and E2E: prefill is TTFT - "
    "queue, decode E2E - TTFT, the frontend is inside its queue",
)
