"""vLLM (`vllm serve`): OpenAI completions + chat, Prometheus at /metrics.

Facts and their sources:
- CLI flags: vllm-project/vllm vllm/engine/arg_utils.py (EngineArgs.add_cli_args):
  --max-num-seqs, --gpu-memory-utilization, --max-model-len, --enable-prefix-caching /
  --no-enable-prefix-caching, --quantization, --tensor-parallel-size, --served-model-name.
- Readiness: GET /health answers 200 once the engine is up (vllm/entrypoints/openai/api_server.py);
  GET /version -> {"version": ...} (same file).
- Metrics: vllm/v1/metrics/loggers.py (PrometheusStatLogger) and docs/design/metrics.md. V1 renamed
  vllm:gpu_cache_usage_perc -> vllm:kv_cache_usage_perc (a 0..1 fraction despite "perc") and
  vllm:time_per_output_token_seconds -> vllm:inter_token_latency_seconds; both names are listed.
- CPU build: VLLM_CPU_KVCACHE_SPACE (GiB) sizes the KV cache on CPU (docs/getting_started/
  installation/cpu.md); --kv-cache-memory-bytes sizes it directly in newer versions (arg_utils.py).
- Usage: final SSE chunk with empty choices when stream_options.include_usage is true
  (vllm/entrypoints/openai/serving_chat.py); with stream_options.continuous_usage_stats too,
  the cumulative usage on every chunk (the role chunk 0, each later one the tokens so far:
  chat_completion/serving.py, serve/utils/api_utils.py should_include_usage). ignore_eos is a vLLM extra sampling parameter
  (vllm/entrypoints/openai/protocol.py).
"""

from __future__ import annotations

from tokenbench.backends.base import Launch, LaunchSpec, Profile, docker_run, exe, in_container, knob_flags
from tokenbench.backends.cache_control import reset_vllm
from tokenbench.backends.lora import VLLM
from tokenbench.backends.speculation import vllm_flags
from tokenbench.telemetry.prom import MetricNames

IMAGE = "vllm/vllm-openai:latest"

# vllm/v1/metrics/loggers.py (PrometheusStatLogger): gauge_scheduler_running / _waiting,
# gauge_kv_cache_usage, counter_num_preempted_reqs, counter_prefix_cache_hits / _queries,
# counter_generation_tokens, histogram_time_to_first_token, histogram_inter_token_latency.
METRICS = MetricNames(
    running=("vllm:num_requests_running",),
    waiting=("vllm:num_requests_waiting",),
    kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    preemptions=("vllm:num_preemptions_total",),
    prefix_cache_hits=("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    prefix_cache_queries=("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    generated_tokens=("vllm:generation_tokens_total",),
    requests_finished=("vllm:request_success_total",),  # labelled finished_reason: summed
    # speculative decoding (vllm/v1/spec_decode/metrics.py SpecDecodingProm)
    spec_drafts=("vllm:spec_decode_num_drafts_total",),
    spec_draft_tokens=("vllm:spec_decode_num_draft_tokens_total",),
    spec_accepted_tokens=("vllm:spec_decode_num_accepted_tokens_total",),
    spec_accepted_by_position=("vllm:spec_decode_num_accepted_tokens_per_pos_total",),
    ttft_histogram=("vllm:time_to_first_token_seconds",),
    itl_histogram=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
)


# pooling APIs: the model served as an embedding model (vllm/engine/arg_utils.py --runner,
# --convert; config/model.py RunnerOption, ConvertType): /v1/embeddings, /v1/rerank and /v1/score
# (vllm/entrypoints/pooling/embed and scoring/api_router.py; scoring is on for an "embed" task).
EMBEDDING_ARGS = ("--runner", "pooling", "--convert", "embed")


def _args(spec: LaunchSpec, model: str) -> list[str]:
    embedding = EMBEDDING_ARGS if spec.knobs.embedding else ()
    knobs = spec.knobs.model_copy(update={"embedding": None})
    # --model rather than the positional tag: `vllm serve` maps its positional tag onto --model
    # (vllm/entrypoints/cli/serve.py), while `python -m vllm.entrypoints.openai.api_server` and the
    # launcher entry ignore a positional tag and would fall back to the default hub model.
    return [
        "--model",
        model,
        "--host",
        spec.host,
        "--port",
        str(spec.port),
        "--served-model-name",
        spec.served_name,
        *embedding,
        *knob_flags(
            knobs,
            "vLLM",
            {
                "max_num_seqs": "--max-num-seqs",
                "kv_memory": "--gpu-memory-utilization",
                "max_model_len": "--max-model-len",
                "quantization": "--quantization",
                "tensor_parallel": "--tensor-parallel-size",
            },
            {"prefix_caching": ("--enable-prefix-caching", "--no-enable-prefix-caching")},
            lora=VLLM,
            speculation=vllm_flags,
        ),
        *spec.knobs.engine_args,
    ]


# Mounts POST /reset_prefix_cache (vllm/entrypoints/launchers/api_server/routers.py): tokenbench's
# --prefix-cache reset goes through it. The user's --engine-env wins.
DEV_MODE = {"VLLM_SERVER_DEV_MODE": "1"}


def traces(endpoint: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """server spans: vLLM's spans to ``endpoint``. --otlp-traces-endpoint (vllm/engine/arg_utils.py);
    the exporter's protocol from OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, grpc unless "http/protobuf"
    (vllm/tracing/otel.py get_span_exporter); a BatchSpanProcessor exports every
    OTEL_BSP_SCHEDULE_DELAY ms (OpenTelemetry SDK, default 5000): 200 so a point's spans are in
    within the run's grace. Each finished request is one ``llm_request`` span in the trace of its
    incoming traceparent (vllm/v1/engine/output_processor.py do_tracing)."""
    env = {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "200"}
    return ("--otlp-traces-endpoint", endpoint), env


def local(spec: LaunchSpec) -> Launch:
    return Launch((*exe(spec, ["vllm", "serve"]), *_args(spec, spec.model)), {**DEV_MODE, **spec.knobs.engine_env})


def container(spec: LaunchSpec) -> Launch:
    inside, volumes = in_container(spec)
    # The image's entrypoint is the OpenAI server; arguments follow the image name.
    return docker_run(spec, IMAGE, _args(inside, inside.model), volumes, env=DEV_MODE)


PROFILE = Profile(
    name="vllm",
    title="vLLM",
    apis=("completions", "chat", "messages", "responses", "embeddings", "rerank", "score"),
    # its Messages request model has no ignore_eos field and drops unknown ones
    # (entrypoints/anthropic/protocol.py AnthropicMessagesRequest): replies there end at EOS
    ignore_eos_apis=("completions", "chat", "responses"),
    default_port=8000,
    ready_path="/health",
    local=local,
    container=container,
    metrics=METRICS,
    version_path="/version",
    version_field="version",
    version_package="vllm",
    usage="final chunk with empty choices when stream_options.include_usage is set",
    quirks=(
        "first chat delta carries only the role (not counted as a chunk)",
        "on CPU, VLLM_CPU_KVCACHE_SPACE (whole GiB) or --engine-arg=--kv-cache-memory-bytes=N sizes "
        "the KV cache (the env var wins when set)",
        "vllm-cpu's `vllm` script fails (no 'vllm' distribution metadata): pass --engine-bin "
        "'PYTHON -m vllm.entrypoints.launchers.api_server.entry'",
    ),
    docs=(
        "vllm/engine/arg_utils.py",
        "vllm/v1/metrics/loggers.py",
        "vllm/entrypoints/openai/api_server.py",
        "vllm/entrypoints/serve/dev/cache/api_router.py",
    ),
    reset_prefix_cache=reset_vllm,
    token_id_prompts=True,  # CompletionRequest.prompt: str | list[int] (vllm/entrypoints/openai/protocol.py)
    continuous_usage=True,  # StreamOptions.continuous_usage_stats (chat_completion/serving.py)
    traces=traces,
    structured="vllm",  # --response-format in its own fields (StructuredOutputsParams: vllm/sampling_params.py)
)
