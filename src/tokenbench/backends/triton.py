"""Triton Inference Server with the TensorRT-LLM backend: native generate_stream, Prometheus on a
separate metrics port.

Facts and their sources:
- CLI: triton-inference-server/server src/command_line_parser.cc: --model-repository,
  --http-address (default 0.0.0.0), --http-port (default 8000), --grpc-address (default 0.0.0.0),
  --grpc-port (default 8001), --metrics-address (default: the --http-address), --metrics-port
  (default 8002), --metrics-config <setting>=<value>. Every address is given explicitly here
  because the defaults bind all interfaces.
- Model = a model repository laid out like tensorrtllm_backend all_models/inflight_batcher_llm
  (preprocessing, tensorrt_llm, postprocessing, ensemble). Requests go to
  POST /v2/models/<name>/generate_stream (server docs/protocol/extension_generate.md); the
  served name must be the ensemble's (usually "ensemble": --served-model-name ensemble).
- Engine settings are NOT flags: they are ${...} placeholders in
  all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt (triton_max_batch_size,
  kv_cache_free_gpu_mem_fraction, enable_kv_cache_reuse, max_tokens_in_paged_kv_cache,
  max_attention_window_size, batching_strategy, ...) filled once, in place, by
  tools/fill_template.py ("fill_template.py -i FILE key:value,key:value", as in the backend docs).
  Design: a profile renders one command (argv + env) and must not rewrite the user's repository,
  so every common knob is refused; the error message carries the exact fill_template.py command
  for the knobs that have a config.pbtxt key (fill_template_argv below). max_model_len,
  quantization and tensor parallelism are fixed when the engine is built (trtllm-build) and
  tensor parallelism also needs one tritonserver rank per GPU under mpirun
  (scripts/launch_triton_server.py --world_size): those are refused without a command.
- No ignore_eos: the tensorrt_llm model's inputs (its config.pbtxt) have none; end_id is the nearest.
- Readiness: GET /v2/health/ready is 200 once the server and (with the default strict readiness)
  all models are ready (command_line_parser.cc, --strict-readiness). Version: GET /v2 returns the
  KServe v2 server metadata {"name", "version", "extensions"} (docs/protocol/README.md).
- Metrics: Prometheus text at http://HOST:<metrics port>/metrics (server docs/user_guide/
  metrics.md), NOT on the HTTP port. tokenbench gives the metrics port as http port + 2 (the
  defaults 8000/8002); the sampler must be pointed at metrics_url(spec) (the runner's metrics URL
  override), because MetricNames.path is only a path on the target URL.
  TensorRT-LLM gauges: triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/
  custom_metrics_reporter.cc (TensorRT-LLM repo; formerly tensorrtllm_backend):
  nv_trt_llm_request_metrics{request_type="active"|"max"|"scheduled"|"context"|"waiting"} and
  nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="max"|"free"|"used"|"tokens_per"|
  "reused"|"fraction"} ("waiting" and "fraction" only in newer builds). Every family carries
  model/version labels; the selectors below use the sampler's exact-label syntax name{label="v"}.
  TTFT: nv_inference_first_response_histogram_ms, a histogram in MILLISECONDS, per model, only with
  --metrics-config histogram_latencies=true (metrics.md "Histograms", experimental). It is time to
  the first response the model sends, which for a streaming model is the first streamed chunk.
"""

from __future__ import annotations

from ..config import EngineKnobs
from .base import BackendError, Launch, LaunchSpec, MetricNames, Profile, docker_run, exe, in_container

IMAGE = "nvcr.io/nvidia/tritonserver:25.06-trtllm-python-py3"  # NGC tags are yy.mm; pin yours
TEMPLATE = "tensorrt_llm/config.pbtxt"  # relative to the model repository

# Label selectors use the sampler's exact-match syntax: name{label="value"}.
# custom_metrics_reporter.cc: request_keys_ "Active Request Count" -> request_type="active",
# "Waiting Requests" -> "waiting"; kv_cache_keys_ "Fraction used KV cache blocks" -> "fraction"
# (used/max, 0..1), "Reused KV cache blocks" -> "reused" (a running count of reused blocks).
# server docs/user_guide/metrics.md: nv_inference_first_response_histogram_ms (ms, per model).
METRICS = MetricNames(
    running=('nv_trt_llm_request_metrics{request_type="active"}',),
    waiting=('nv_trt_llm_request_metrics{request_type="waiting"}',),
    kv_usage=('nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"}',),
    prefix_cache_hits=('nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="reused"}',),  # blocks
    ttft_histogram=(
        'nv_inference_first_response_histogram_ms{model="ensemble"}',
        'nv_inference_first_response_histogram_ms{model="tensorrt_llm"}',
    ),
    histogram_scale=0.001,  # the histogram is in milliseconds
    path="/metrics",  # on the METRICS port: see metrics_url()
)

# Common knob -> config.pbtxt placeholder in all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt.
PBTXT_KEYS = {
    "max_num_seqs": "triton_max_batch_size",  # max_batch_size: ${triton_max_batch_size}
    "kv_memory": "kv_cache_free_gpu_mem_fraction",  # fraction of FREE memory after weights
    "prefix_caching": "enable_kv_cache_reuse",
}
BUILD_TIME = {
    "max_model_len": "the engine's max_seq_len is set by trtllm-build (max_attention_window_size in "
    "config.pbtxt only limits the attention window)",
    "quantization": "quantization is part of the built engine",
    "tensor_parallel": "tensor parallelism is fixed by trtllm-build and needs one tritonserver rank "
    "per GPU (scripts/launch_triton_server.py --world_size N)",
}


def metrics_port(http_port: int) -> int:
    return http_port + 2


def grpc_port(http_port: int) -> int:
    return http_port + 1


def metrics_url(spec: LaunchSpec) -> str:
    """Where the sampler scrapes: the metrics port on loopback (published there for containers)."""
    return f"http://127.0.0.1:{metrics_port(spec.port)}{METRICS.path}"


def fill_template_argv(knobs: EngineKnobs, repository: str) -> list[str]:
    """The tools/fill_template.py command that writes the mappable knobs into config.pbtxt."""
    values = knobs.model_dump(include=set(PBTXT_KEYS), exclude_none=True)
    if not values:
        return []
    subs = ",".join(f"{PBTXT_KEYS[k]}:{_pbtxt(v)}" for k, v in values.items())
    return ["python3", "tools/fill_template.py", "-i", f"{repository.rstrip('/')}/{TEMPLATE}", subs]


def _pbtxt(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _refuse_knobs(spec: LaunchSpec) -> None:
    set_knobs = spec.knobs.model_dump(exclude={"engine_args", "engine_env"}, exclude_none=True)
    if not set_knobs:
        return
    lines = [
        f"Triton + TensorRT-LLM takes engine settings from {TEMPLATE} in the model repository, "
        "not from flags, and tokenbench does not rewrite your repository"
    ]
    argv = fill_template_argv(spec.knobs, spec.model)
    if argv:
        lines.append("run once from a tensorrtllm_backend checkout, then drop the knob(s): " + " ".join(argv))
    for knob in set_knobs:
        if knob in BUILD_TIME:
            lines.append(f"{knob}: {BUILD_TIME[knob]}")
    lines.append("(--engine-arg passes tritonserver flags only)")
    raise BackendError("; ".join(lines))


def _args(spec: LaunchSpec, repository: str) -> list[str]:
    _refuse_knobs(spec)
    return [
        f"--model-repository={repository}",
        f"--http-address={spec.host}",
        f"--http-port={spec.port}",
        f"--grpc-address={spec.host}",
        f"--grpc-port={grpc_port(spec.port)}",
        f"--metrics-address={spec.host}",
        f"--metrics-port={metrics_port(spec.port)}",
        "--metrics-config=histogram_latencies=true",  # metrics.md: enables the TTFT histogram
        *spec.knobs.engine_args,
    ]


def local(spec: LaunchSpec) -> Launch:
    return Launch((*exe(spec, ["tritonserver"]), *_args(spec, spec.model)), dict(spec.knobs.engine_env))


def container(spec: LaunchSpec) -> Launch:
    inside, volumes = in_container(spec)
    # the metrics port is published too: the sampler scrapes it from the host
    return docker_run(
        spec, IMAGE, ["tritonserver", *_args(inside, inside.model)], volumes, extra_ports=(metrics_port(spec.port),)
    )


PROFILE = Profile(
    metrics_url=metrics_url,
    name="triton",
    title="Triton Inference Server (TensorRT-LLM backend)",
    apis=("triton",),
    default_port=8000,
    ready_path="/v2/health/ready",
    local=local,
    container=container,
    metrics=METRICS,
    version_path="/v2",
    version_field="version",
    ignore_eos=False,
    usage="none in the stream; count tokens client-side (the ensemble streams text_output)",
    quirks=(
        "Prometheus metrics are on a separate port (http port + 2, default 8002), not the HTTP "
        "port: point the sampler at the metrics URL (triton.metrics_url)",
        "engine knobs live in tensorrt_llm/config.pbtxt (filled by tools/fill_template.py); the "
        "error message prints the command, tokenbench does not edit the repository",
        "--model is the model repository; requests name the ensemble (--served-model-name ensemble)",
        "paths inside config.pbtxt (engine_dir, tokenizer_dir) must be valid where tritonserver runs: "
        "inside the container that is under /model",
        "nv_inference_first_response_histogram_ms is in milliseconds and counts the first streamed "
        "response; enabled with --metrics-config histogram_latencies=true",
        'request_type="waiting" and kv_cache_block_type="fraction" exist only in newer TensorRT-LLM '
        "backends; older ones expose used/max block counts only",
        "tensor parallelism needs mpirun with one tritonserver per GPU (launch_triton_server.py)",
    ),
    cold_start_includes="process start and loading every model in the repository (engine "
    "deserialization, tokenizer load); the engine is built beforehand by trtllm-build",
    docs=(
        "triton-inference-server/server src/command_line_parser.cc",
        "triton-inference-server/server docs/user_guide/metrics.md",
        "triton-inference-server/server docs/protocol/extension_generate.md",
        "tensorrtllm_backend all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt",
        "tensorrtllm_backend tools/fill_template.py",
        "NVIDIA/TensorRT-LLM triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/"
        "custom_metrics_reporter.cc",
    ),
)
