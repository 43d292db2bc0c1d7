"""MLC LLM (`mlc_llm serve`): OpenAI completions + chat. No Prometheus endpoint tokenbench can
scrape (see Metrics below), so metrics=None.

Facts and their sources:
- CLI: mlc-ai/mlc-llm python/mlc_llm/cli/serve.py: positional model (an MLC model directory with
  mlc-chat-config.json, or an "HF://" link to a compiled MLC model), --host (default 127.0.0.1),
  --port (default 8000), --mode {local,interactive,server} (default local),
  --prefix-cache-mode {disable,radix} (default radix), --overrides "k=v;k=v" (EngineConfigOverride:
  max_num_sequence, max_total_seq_length, prefill_chunk_size, gpu_memory_utilization,
  context_window_size, tensor_parallel_shards, ...; each item is parsed as --k=v). There is no
  served-model-name flag.
- Knob meanings (python/mlc_llm/interface/help.py): gpu_memory_utilization is "the fraction of GPU
  memory used by the server in total" (our kv_memory); context_window_size is the maximum
  sequence length, passed as max_single_sequence_length (interface/serve.py) (our max_model_len);
  max_num_sequence is the maximum batch size; max_total_seq_length is the KV cache's total token
  capacity (not a per-request length, so not used for max_model_len).
- Mode: "local" caps the batch at 4 and sizes the KV cache to one context window, "server" infers
  the largest batch and KV capacity within gpu_memory_utilization (help.py mode_serve).
  tokenbench renders --mode server (a benchmark sends concurrent requests); --engine-arg --mode
  local comes later on the command line and wins.
- Quantization is fixed when the model is compiled (q4f16_1 etc. in the model directory), so the
  knob is refused. Without --model-lib the model library is JIT-compiled at start
  (python/mlc_llm/serve/engine_base.py _process_model_args -> mlc_llm.interface.jit), which is
  part of the cold start.
- Readiness: the engine (and JIT) is built before uvicorn starts (interface/serve.py), and there is
  no /health route (serve/entrypoints/openai_entrypoints.py), so GET /v1/models is the ready path.
  With one model served any "model" value in a request reaches it
  (serve/server/server_context.py get_engine).
- Metrics: newer releases mount GET /metrics (serve/entrypoints/metrics_entrypoints.py) with
  EngineMetrics.prometheus_text() (serve/engine_base.py): untyped "name<TAB>value" lines from the
  engine's JSON (cpp/serve/metrics.cc: completion_tokens_sum, prompt_tokens_sum,
  prefill_tokens_sum, engine_decode_time_sum, ...) plus per-batch-size entries written as
  `decode_time_by_batch_size_mean{batch_size=1}` with an unquoted label value, which the Prometheus
  text parser rejects ("Invalid labels"), so a scrape fails as soon as anything was decoded. The
  same statistics come as JSON from POST /debug/dump_engine_metrics when started with
  --enable-debug (serve/entrypoints/debug_entrypoints.py).
- ignore_eos: docs/deploy/rest.rst lists a top-level ignore_eos request field, but the current
  request models (python/mlc_llm/protocol/openai_api_protocol.py) have none: it moved to
  DebugConfig.ignore_eos (protocol/debug_protocol.py), honoured only with --enable-debug and sent
  inside debug_config. tokenbench sends the top-level field, so ignore_eos=False. Usage:
  stream_options.include_usage (openai_api_protocol.py).
- Container: MLC LLM publishes no server image (mlc-ai/mlc-llm#977 and #1271 are still open), so
  there is no container command.
"""

from __future__ import annotations

from tokenbench.backends.base import Launch, LaunchSpec, Profile, exe, knob_flags
from tokenbench.errors import BackendError

# cli/serve.py EngineConfigOverride field per knob.
OVERRIDES = {
    "max_num_seqs": "max_num_sequence",
    "kv_memory": "gpu_memory_utilization",
    "max_model_len": "context_window_size",
    "tensor_parallel": "tensor_parallel_shards",
}


def _fmt(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _args(spec: LaunchSpec, model: str) -> list[str]:
    knobs = spec.knobs
    if knobs.quantization is not None:
        raise BackendError(
            "MLC LLM takes its quantization from the compiled model (e.g. "
            "q4f16_1 in the model directory name): pass a model compiled with the "
            "quantization you want instead of --quantization"
        )
    values = knobs.model_dump(include=set(OVERRIDES))
    overrides = ";".join(f"{OVERRIDES[k]}={_fmt(v)}" for k, v in values.items() if v is not None)
    prefix = []
    if knobs.prefix_caching is not None:
        prefix = ["--prefix-cache-mode", "radix" if knobs.prefix_caching else "disable"]
    rest = knobs.model_copy(update={**{k: None for k in OVERRIDES}, "prefix_caching": None})
    return [
        model,
        "--host",
        spec.host,
        "--port",
        str(spec.port),
        "--mode",
        "server",
        *(["--overrides", overrides] if overrides else []),
        *prefix,
        *knob_flags(rest, "MLC LLM", {}),  # refuses any knob added to EngineKnobs later
        *knobs.engine_args,
    ]


def local(spec: LaunchSpec) -> Launch:
    return Launch((*exe(spec, ["mlc_llm", "serve"]), *_args(spec, spec.model)), dict(spec.knobs.engine_env))


def container(spec: LaunchSpec) -> Launch:
    raise BackendError(
        "MLC LLM publishes no server container image: install its wheels (https://llm.mlc.ai) and run it locally"
    )


PROFILE = Profile(
    name="mlc",
    title="MLC LLM",
    apis=("chat", "completions"),
    default_port=8000,
    ready_path="/v1/models",
    local=local,
    container=container,
    metrics=None,
    version_package="mlc_llm",
    ignore_eos=False,
    usage="final chunk with usage when stream_options.include_usage is set",
    quirks=(
        "always started with --mode server (largest batch and KV cache within "
        "gpu_memory_utilization); --engine-arg --mode local overrides it",
        "batch size, memory fraction, context window and tensor parallelism share one "
        "--overrides string; an --engine-arg --overrides replaces it",
        "no usable Prometheus endpoint: /metrics (newer releases) is not valid exposition text; "
        "engine stats are JSON at POST /debug/dump_engine_metrics with --enable-debug",
        "ignore_eos: older releases took a top-level field (docs/deploy/rest.rst), current ones "
        "only debug_config.ignore_eos with --enable-debug",
        "no served-model-name flag: /v1/models lists the model path; any model name reaches the single served model",
        "the model must be MLC-compiled (mlc-chat-config.json) or an HF:// link to one",
    ),
    cold_start_includes="process start, model download and load, and JIT compilation of the "
    "model library when no --model-lib is given",
    docs=(
        "python/mlc_llm/cli/serve.py",
        "python/mlc_llm/interface/help.py",
        "python/mlc_llm/interface/serve.py",
        "python/mlc_llm/serve/engine_base.py",
        "python/mlc_llm/serve/entrypoints/metrics_entrypoints.py",
        "cpp/serve/metrics.cc",
        "docs/deploy/rest.rst",
    ),
)
