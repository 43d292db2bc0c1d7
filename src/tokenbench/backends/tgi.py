"""Hugging Face Text Generation Inference (`text-generation-launcher`): native /generate_stream
(the "tgi" API, default), OpenAI-style /v1/chat/completions and /v1/completions, Prometheus at
/metrics (always on, served by the router).

Facts and their sources:
- Launcher flags: huggingface/text-generation-inference launcher/src/main.rs (struct Args):
  --model-id, --hostname, --port (default 3000), --max-batch-size ("Enforce a maximum number of
  requests per batch"), --cuda-memory-fraction ("the total visible memory multiplied by
  cuda-memory-fraction" is what the process may use), --max-input-tokens (legacy name
  --max-input-length), --max-total-tokens (input + generated tokens per request; the launcher
  refuses max_input_tokens >= max_total_tokens), --quantize (awq, eetq, exl2, gptq, marlin,
  bitsandbytes, bitsandbytes-nf4, bitsandbytes-fp4, fp8), --num-shard. --max-concurrent-requests
  is an admission limit (requests beyond it are refused with 429), not a batch size, so
  max_num_seqs maps to --max-batch-size.
- Prefix caching has no flag: the launcher reads the PREFIX_CACHING environment variable
  (resolve_attention in launcher/src/main.rs; it forces "0" for VLMs, seq2seq, LoRA and paged
  attention unless set) and the server takes "1"/"true" as on
  (server/text_generation_server/models/globals.py; releases around v2.2 read
  USE_PREFIX_CACHING instead). tokenbench sets PREFIX_CACHING=1 or 0.
- Readiness: the launcher starts the router (the HTTP server) only after every shard reported
  ready (launcher/src/main.rs), then GET /health answers. GET /info returns struct Info with
  "version" (router/src/lib.rs).
- Metrics (docs/source/reference/metrics.md; router/src/server.rs): tgi_batch_current_size
  (gauge), tgi_queue_size (gauge), tgi_request_generated_tokens (histogram of tokens per finished
  request: its _sum is the generated-token total), tgi_request_mean_time_per_token_duration
  (histogram, seconds, one observation per request of inference_time / generated_tokens, so it
  includes the prefill). No TTFT histogram, no KV-usage gauge, no preemption or prefix-cache
  counter.
- API: ChatRequest.model is "[UNUSED]" (router/src/lib.rs), so the served name does not matter.
  There is no ignore_eos request parameter (GenerateParameters in router/src/lib.rs). Streaming
  usage in the Messages API came late (huggingface/text-generation-inference#2531, #3003); the
  native stream's final event carries details.generated_tokens.
- Container: ghcr.io/huggingface/text-generation-inference; the image's ENTRYPOINT is
  text-generation-launcher and it sets the hub cache to /data (Dockerfile: ENV
  HUGGINGFACE_HUB_CACHE=/data), so tokenbench points it at the mounted host cache instead.
"""

from __future__ import annotations

from tokenbench.backends.base import Launch, LaunchSpec, Profile, docker_run, exe, in_container, knob_flags
from tokenbench.telemetry.prom import MetricNames

IMAGE = "ghcr.io/huggingface/text-generation-inference:latest"
HF_CACHE = "/root/.cache/huggingface"  # where base.in_container mounts the host's HF cache

# docs/source/reference/metrics.md (types and units); router/src/server.rs observes the request
# histograms once per finished request.
METRICS = MetricNames(
    running=("tgi_batch_current_size",),
    waiting=("tgi_queue_size",),
    generated_tokens=("tgi_request_generated_tokens_sum",),
    # No itl_histogram: tgi_request_mean_time_per_token_duration is each request's inference time
    # (prefill included) over its generated tokens (router/src/server.rs), not an inter-token
    # latency; it stays in the raw samples under its own name.
)


def _args(spec: LaunchSpec, model: str) -> list[str]:
    knobs = spec.knobs
    rest = knobs.model_copy(update={"prefix_caching": None, "max_model_len": None})
    length: list[str] = []
    if knobs.max_model_len is not None:
        # launcher/src/main.rs: max_input_tokens must be < max_total_tokens
        length = ["--max-input-tokens", str(knobs.max_model_len - 1), "--max-total-tokens", str(knobs.max_model_len)]
    return [
        "--model-id",
        model,
        "--hostname",
        spec.host,
        "--port",
        str(spec.port),
        *length,
        *knob_flags(
            rest,
            "TGI",
            {
                "max_num_seqs": "--max-batch-size",
                "kv_memory": "--cuda-memory-fraction",
                "quantization": "--quantize",
                "tensor_parallel": "--num-shard",
            },
        ),
        *knobs.engine_args,
    ]


def traces(endpoint: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """server spans: TGI's spans to ``endpoint``, an OTLP/gRPC one: --otlp-endpoint (launcher/src/
    main.rs Args, passed on to the router and every shard). The router exports over gRPC only
    (router/src/logging.rs init_logging: opentelemetry_otlp's tonic exporter, AlwaysOn sampler),
    the shards too (server/text_generation_server/tracing.py: the gRPC OTLPSpanExporter). Both
    batch: OTEL_BSP_SCHEDULE_DELAY, read by the Rust SDK's BatchConfig (opentelemetry_sdk 0.20 in
    Cargo.lock) and the Python SDK's BatchSpanProcessor, 200 ms so a point's spans are in within
    the run's grace. Each request is its handler's span (router/src/server.rs #[instrument]:
    generate, generate_stream, completions, chat_completions) in the trace of its incoming
    traceparent (logging.rs trace_context_middleware, set_parent), timed by Duration fields
    (spans/shapes.py reads them)."""
    return ("--otlp-endpoint", endpoint), {"OTEL_BSP_SCHEDULE_DELAY": "200"}


def _env(spec: LaunchSpec) -> dict[str, str]:
    if spec.knobs.prefix_caching is None:
        return {}
    return {"PREFIX_CACHING": "1" if spec.knobs.prefix_caching else "0"}


def local(spec: LaunchSpec) -> Launch:
    argv = (*exe(spec, ["text-generation-launcher"]), *_args(spec, spec.model))
    return Launch(argv, {**_env(spec), **spec.knobs.engine_env})


def container(spec: LaunchSpec) -> Launch:
    inside, volumes = in_container(spec)
    env = {"HUGGINGFACE_HUB_CACHE": f"{HF_CACHE}/hub", "HF_HOME": HF_CACHE, **_env(spec)}
    # The image's entrypoint is text-generation-launcher; arguments follow the image name.
    return docker_run(spec, IMAGE, _args(inside, inside.model), volumes, env=env)


PROFILE = Profile(
    name="tgi",
    title="Text Generation Inference",
    apis=("tgi", "chat", "completions"),
    default_port=3000,
    ready_path="/health",
    local=local,
    container=container,
    metrics=METRICS,
    version_path="/info",
    version_field="version",
    ignore_eos=False,
    usage="native stream: details.generated_tokens in the final event; OpenAI routes: usage in "
    "the final chunk only in newer releases",
    quirks=(
        "no ignore_eos: outputs stop at EOS, so fixed output lengths are not guaranteed",
        "prefix caching is an environment variable (PREFIX_CACHING), not a flag",
        "max_model_len renders --max-input-tokens L-1 --max-total-tokens L",
        "server ITL is the per-request mean of inference time / generated tokens (includes "
        "prefill); there is no TTFT histogram",
        "generated tokens are counted when a request finishes (histogram _sum), not per step",
        "the OpenAI routes ignore the model field",
    ),
    cold_start_includes="process start, weight download/conversion by the launcher, shard start and model load",
    docs=(
        "launcher/src/main.rs",
        "router/src/server.rs",
        "router/src/lib.rs",
        "docs/source/reference/metrics.md",
        "server/text_generation_server/models/globals.py",
        "router/src/logging.rs",
        "server/text_generation_server/tracing.py",
    ),
    traces=traces,
    traces_protocol="grpc",
    traces_note="its handler span times validation, queue and inference (prefill and decode together), but no "
    "first token: prefill, decode and delivery stay null; its batch spans are traces of their own, counted as "
    "unknown spans",
    structured="tgi",  # --response-format in its own fields (parameters.grammar: TGI router/src/lib.rs GrammarType)
)
