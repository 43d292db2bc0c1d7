"""Triton Inference Server: native generate_stream, Prometheus on a separate metrics port. Two
launches: LIVE on CPU, a serving layer in front of an engine (--upstream, default llamacpp: the
embedded llama.cpp server), where NVIDIA PyTriton's tritonserver (Triton 2.51, PyPI
nvidia-pytriton 0.7.0 in .cache/triton-venv, made by scripts/setup_triton.sh) serves
triton_model.py, a decoupled model with the TensorRT-LLM ensemble's interface that relays the
engine's OpenAI completions stream (one Triton response per upstream chunk); and, from the docs
below (needs a GPU, --upstream none), tritonserver with the TensorRT-LLM backend.

Live (PyTriton) launch: ``<triton venv python> triton_model.py --host 127.0.0.1 --http-port P
--grpc-port P+1 --metrics-port P+2 --upstream-url U --upstream-model M --model-name ensemble``; the
interpreter is $TOKENBENCH_TRITON_PYTHON, else .cache/triton-venv/bin/python of the checkout.
Metrics a live PyTriton 2.51 server exports (curl of its metrics port, decoupled model on CPU):
nv_inference_request_success / _failure{reason}, nv_inference_count, nv_inference_exec_count,
nv_inference_request_duration_us, nv_inference_queue_duration_us,
nv_inference_compute_{input,infer,output}_duration_us (cumulative microsecond counters; for a
decoupled model "infer" ends when execute() returns, not when the stream ends),
nv_inference_pending_request_count (gauge: requests queued for the model, not yet executing),
nv_pinned_memory_pool_*, nv_cpu_utilization, nv_cpu_memory_{total,used}_bytes. NOT exported
there, although --metrics-config histogram_latencies=true is given: the first-response histogram
(the Python backend does not report response statistics), and no gauge of streams in flight or
counter of tokens. So the live mapping is waiting = nv_inference_pending_request_count; the rest
stays in each scrape's raw samples.

TensorRT-LLM (docs-derived, not run here):

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
  all models are ready (command_line_parser.cc, --strict-readiness), but PyTriton loads its model
  after the server is up (explicit model control), so tokenbench waits on the model's own route,
  GET /v2/models/<served name>/ready (docs/protocol/README.md, KServe v2 model ready). Version: GET /v2 returns the
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

import os
from pathlib import Path

from tokenbench.backends.base import Launch, LaunchSpec, Profile, docker_run, exe, in_container
from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError
from tokenbench.telemetry.prom import MetricNames

IMAGE = "nvcr.io/nvidia/tritonserver:25.06-trtllm-python-py3"  # NGC tags are yy.mm; pin yours
TEMPLATE = "tensorrt_llm/config.pbtxt"  # relative to the model repository

# Label selectors use the sampler's exact-match syntax: name{label="value"}.
# custom_metrics_reporter.cc: request_keys_ "Active Request Count" -> request_type="active",
# "Waiting Requests" -> "waiting"; kv_cache_keys_ "Fraction used KV cache blocks" -> "fraction"
# (used/max, 0..1), "Reused KV cache blocks" -> "reused" (a running count of reused blocks).
# server docs/user_guide/metrics.md: nv_inference_first_response_histogram_ms (ms, per model).
METRICS = MetricNames(
    running=('nv_trt_llm_request_metrics{request_type="active"}',),
    # PyTriton live: Triton's own queue for the model (pending = enqueued, not yet executing)
    waiting=('nv_trt_llm_request_metrics{request_type="waiting"}', "nv_inference_pending_request_count"),
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
    if set_knobs.get("per_request_metrics") is False:  # off: every engine's default
        del set_knobs["per_request_metrics"]
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


MODEL_FILE = Path(__file__).with_name("triton_model.py")  # run as a file: it imports no tokenbench
VENV_PYTHON = Path(__file__).resolve().parents[3] / ".cache/triton-venv/bin/python"  # the checkout's


def triton_python() -> str:
    """The interpreter with nvidia-pytriton: $TOKENBENCH_TRITON_PYTHON, else the checkout's venv."""
    python = os.environ.get("TOKENBENCH_TRITON_PYTHON") or str(VENV_PYTHON)
    if not Path(python).exists():
        raise BackendError(
            f"Triton on CPU runs under NVIDIA PyTriton, and {python} does not exist: run "
            "scripts/setup_triton.sh (make triton), or set TOKENBENCH_TRITON_PYTHON to a python with "
            "nvidia-pytriton built from Debian's python3.11"
        )
    return python


def layer_argv(spec: LaunchSpec) -> list[str]:
    """PyTriton serving triton_model.py in front of spec.upstream_url, every listener on spec.host."""
    assert spec.upstream_url is not None and spec.upstream_model is not None
    return [
        triton_python(),
        str(MODEL_FILE),
        f"--host={spec.host}",
        f"--http-port={spec.port}",
        f"--grpc-port={grpc_port(spec.port)}",
        f"--metrics-port={metrics_port(spec.port)}",
        f"--upstream-url={spec.upstream_url}",
        f"--upstream-model={spec.upstream_model}",
        f"--model-name={spec.served_name}",
        "--metrics-config=histogram_latencies=true",  # asked for; PyTriton 2.51 exports none
    ]


def local(spec: LaunchSpec) -> Launch:
    if spec.upstream_url is not None:  # the live serving layer (the engine's knobs went to the engine)
        return Launch(tuple(layer_argv(spec)))
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
    title="Triton Inference Server",
    layer=True,
    default_upstream="llamacpp",  # on CPU: PyTriton in front of the embedded llama.cpp server
    default_served_name="ensemble",  # the TensorRT-LLM ensemble's name, as the live model's
    apis=("triton",),
    default_port=8000,
    # the model's own ready route: PyTriton starts tritonserver with no model and loads it after
    # (explicit model control), so /v2/health/ready answers 200 before the model exists
    ready_path="/v2/models/{served_name}/ready",
    local=local,
    container=container,
    metrics=METRICS,
    version_path="/v2",
    version_field="version",
    ignore_eos=False,
    usage="num_input_tokens / num_output_tokens per response when asked (return_num_*_tokens inputs): "
    "the live relay model sends the engine's own usage; older ensembles send none (counted client-side)",
    quirks=(
        "on CPU a serving layer: --upstream ENGINE (default llamacpp) is launched first and "
        "tritonserver (NVIDIA PyTriton) relays its stream; --upstream none launches tritonserver "
        "with a TensorRT-LLM model repository (--model) instead",
        "the live PyTriton model exports no first-response histogram and no tokens counter: "
        "waiting (nv_inference_pending_request_count) is the only normalized series",
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
    "deserialization, tokenizer load; the engine is built beforehand by trtllm-build); in front of "
    "an upstream engine: PyTriton's start and model load, after the engine was ready",
    docs=(
        "triton-inference-server/pytriton 0.7.0 (PyPI nvidia-pytriton): Triton, TritonConfig, ModelConfig",
        "triton-inference-server/server src/command_line_parser.cc",
        "triton-inference-server/server docs/user_guide/metrics.md",
        "triton-inference-server/server docs/protocol/extension_generate.md",
        "tensorrtllm_backend all_models/inflight_batcher_llm/tensorrt_llm/config.pbtxt",
        "tensorrtllm_backend tools/fill_template.py",
        "NVIDIA/TensorRT-LLM triton_backend/inflight_batcher_llm/src/custom_metrics_reporter/"
        "custom_metrics_reporter.cc",
    ),
)
