"""LMDeploy (`lmdeploy serve api_server`): OpenAI completions + chat, Prometheus at /metrics.
Two engines behind one CLI, so two profiles: TurboMind (C++/CUDA) and PyTorch.

Facts and their sources:
- CLI flags: InternLM/lmdeploy lmdeploy/cli/serve.py (add_parser_api_server, api_server) and
  lmdeploy/cli/utils.py (ArgumentHelper): positional model_path, --server-name, --server-port,
  --backend {pytorch,turbomind} (default turbomind), --model-name (the name /v1/models serves),
  --max-batch-size, --cache-max-entry-count, --session-len ("The max session length of a
  sequence"), --enable-prefix-caching (store_true, default False: off renders nothing),
  --model-format {hf,awq,gptq,fp8,mxfp4}, --quant-policy {0,4,8} (KV-cache quantization), --tp.
  The same engine flags feed PytorchEngineConfig and TurbomindEngineConfig.
- --cache-max-entry-count is "the percentage of FREE gpu memory occupied by the k/v cache,
  excluding weights" (cli/utils.py; lmdeploy/messages.py TurbomindEngineConfig /
  PytorchEngineConfig docstrings: FREE memory since v0.2.1, and an integer > 0 is a block count).
  Our kv_memory (weights + KV share of the whole device) maps to it only approximately.
- Quantization: the weight format is --model-format (awq/gptq/fp8/mxfp4; hf = unquantized), so
  the quantization knob maps there. --quant-policy 4|8 (KV int4/int8) goes via --engine-arg.
- Metrics: lmdeploy/metrics/loggers.py (PrometheusStatLogger) mounted at /metrics by
  lmdeploy/serve/openai/api_server.py (mount_metrics) when the engine config has
  enable_metrics. Metrics shipped in v0.9.2 (a comment in InternLM/lmdeploy#3815), PyTorch engine only at
  first (TurboMind asked for in #3801). Since InternLM/lmdeploy#4108 ("enable metrics by default")
  the CLI only has --disable-metrics (cli/utils.py; serve.py passes enable_metrics=not
  args.disable_metrics) and `--enable-metrics` is an unrecognized argument that stops the server
  (InternLM/lmdeploy#4809). So tokenbench renders no metrics flag: on older releases that needed
  it, pass `--engine-arg --enable-metrics`.
- lmdeploy:gpu_cache_usage_perc is 0..1 ("1 means 100 percent usage"). The inter-token histogram
  is lmdeploy:iter_token_latency (seconds, newer) and was lmdeploy:time_per_output_token_seconds
  (observed per iteration) before; both are listed, newest first. No preemption or prefix-cache
  counter is exported (the prefix-cache hit rate is only printed by LoggingStatLogger).
- Readiness: GET /health answers 200; the engine is built before uvicorn starts, so the port only
  opens once the model is loaded (api_server.py serve()). No version endpoint: the version comes
  from the `lmdeploy` Python distribution when it is importable.
- Usage and ignore_eos: chat_completions_v1 documents stream_options and ignore_eos (api_server.py).
- Container: openmmlab/lmdeploy has no server entrypoint; docs/en/serving/restful_api.md runs
  `openmmlab/lmdeploy:latest lmdeploy serve api_server ...` with ~/.cache/huggingface mounted at
  /root/.cache/huggingface. Default port 23333 (serve.py).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from tokenbench.backends.base import Launch, LaunchSpec, Profile, docker_run, exe, in_container, knob_flags
from tokenbench.backends.lora import LMDEPLOY
from tokenbench.telemetry.prom import MetricNames

IMAGE = "openmmlab/lmdeploy:latest"
COMMAND = ["lmdeploy", "serve", "api_server"]

# lmdeploy/metrics/loggers.py (PrometheusStatLogger), labels model_name + engine (DP rank):
# gauge_scheduler_running / _waiting, gauge_gpu_cache_usage (0..1), counter_generation_tokens,
# histogram_time_to_first_token, histogram_iter_token_latency (newer) /
# histogram_time_per_output_token. Older loggers.py (commit 0168eed) incremented
# lmdeploy:generation_tokens_total twice per iteration.
METRICS = MetricNames(
    running=("lmdeploy:num_requests_running",),
    waiting=("lmdeploy:num_requests_waiting",),
    kv_usage=("lmdeploy:gpu_cache_usage_perc",),
    generated_tokens=("lmdeploy:generation_tokens_total",),
    ttft_histogram=("lmdeploy:time_to_first_token_seconds",),
    itl_histogram=("lmdeploy:iter_token_latency", "lmdeploy:time_per_output_token_seconds"),
)


def _args(spec: LaunchSpec, model: str, backend: str) -> list[str]:
    knobs = spec.knobs
    if knobs.prefix_caching is False:  # off is LMDeploy's default (cli/utils.py)
        knobs = knobs.model_copy(update={"prefix_caching": None})
    return [
        model,
        "--server-name",
        spec.host,
        "--server-port",
        str(spec.port),
        "--backend",
        backend,
        "--model-name",
        spec.served_name,
        *knob_flags(
            knobs,
            f"LMDeploy ({backend})",
            {
                "max_num_seqs": "--max-batch-size",
                "kv_memory": "--cache-max-entry-count",
                "max_model_len": "--session-len",
                "quantization": "--model-format",
                "tensor_parallel": "--tp",
            },
            {"prefix_caching": ("--enable-prefix-caching", None)},
            lora=LMDEPLOY if backend == "pytorch" else None,  # --adapters: the PyTorch engine's
        ),
        *spec.knobs.engine_args,
    ]


def _local(backend: str) -> Callable[[LaunchSpec], Launch]:
    def local(spec: LaunchSpec) -> Launch:
        return Launch((*exe(spec, COMMAND), *_args(spec, spec.model, backend)), dict(spec.knobs.engine_env))

    return local


def _container(backend: str) -> Callable[[LaunchSpec], Launch]:
    def container(spec: LaunchSpec) -> Launch:
        inside, volumes = in_container(spec)
        return docker_run(spec, IMAGE, [*COMMAND, *_args(inside, inside.model, backend)], volumes)

    return container


# What the profiles below share; each adds its own name, title and launch
_profile = partial(
    Profile,
    apis=("chat", "completions"),
    default_port=23333,
    ready_path="/health",
    metrics=METRICS,
    version_package="lmdeploy",
    usage="final chunk with usage when stream_options.include_usage is set",
    docs=(
        "lmdeploy/cli/serve.py",
        "lmdeploy/cli/utils.py",
        "lmdeploy/messages.py",
        "lmdeploy/metrics/loggers.py",
        "lmdeploy/serve/openai/api_server.py",
    ),
)

_QUIRKS = (
    "kv_memory renders --cache-max-entry-count: the share of FREE memory after the weights given "
    "to the KV cache, not weights + KV of the whole device as in vLLM/SGLang",
    "metrics are on by default since lmdeploy#4108; older releases (0.9.2 onward) need "
    "--engine-arg --enable-metrics, newer ones reject that flag",
    "no preemption or prefix-cache counters in /metrics",
)

TURBOMIND_PROFILE = _profile(
    name="lmdeploy-turbomind",
    title="LMDeploy (TurboMind engine)",
    local=_local("turbomind"),
    container=_container("turbomind"),
    quirks=(
        *_QUIRKS,
        "--backend turbomind falls back to the PyTorch engine for models TurboMind does not "
        "support (cli/serve.py autoget_backend); check server.log",
        "Prometheus metrics for TurboMind arrived after the PyTorch engine's (lmdeploy#3801)",
    ),
)

PYTORCH_PROFILE = _profile(
    name="lmdeploy-pytorch",
    title="LMDeploy (PyTorch engine)",
    local=_local("pytorch"),
    container=_container("pytorch"),
    quirks=_QUIRKS,
)
