"""Routers in front of a fleet: vllm-router and sglang-router (Rust, PyPI wheels in
.cache/router-venv, made by scripts/setup_routers.sh). Each is a serving layer (Profile.router)
launched after ``--replicas N`` copies of its upstream engine (default llamacpp: the embedded
llama.cpp server), each on its own port; the router picks one per request.

Launch: ``<router> --worker-urls URL... --policy P --host 127.0.0.1 --port P --prometheus-host
127.0.0.1 --prometheus-port M --worker-startup-check-interval 1 --disable-retries`` (sglang-router:
``sglang-router launch ...``, the same flags). The executable is $TOKENBENCH_VLLM_ROUTER_BIN /
$TOKENBENCH_SGLANG_ROUTER_BIN when set (--engine-bin is the replicas' engine's), else the router
venv's console script.

Facts and their sources (``--help`` of vllm-router 0.1.17 and sglang-router 0.3.2, and live runs
against two tokenbench mocks):
- Policies (--policy): vllm-router random, round_robin, cache_aware (its default), kv_aware,
  power_of_two, consistent_hash, sticky_least_loaded; sglang-router random, round_robin,
  cache_aware (its default), power_of_two, manual. cache_aware's thresholds: --cache-threshold
  (0.3), --balance-abs-threshold (64), --balance-rel-threshold (1.5), the same in both.
- Defaults that a benchmark must not keep: retries on (5 attempts; --disable-retries means 1):
  a retry hides a replica's error from the client, so tokenbench disables them (``--layer-arg
  retries=on`` puts them back); --worker-startup-check-interval 30 s: the router waits for its
  first health check of the workers before it serves, so tokenbench asks for 1 s. sglang-router
  binds 0.0.0.0 (router and Prometheus) unless told: both hosts are given.
- Readiness: vllm-router listens only once its workers answered /health; sglang-router listens
  at once and registers its workers in the background. GET /readiness answers
  ``{"status":"ready","healthy_workers":N,"total_workers":N}`` (both), 2xx once one worker is
  healthy: tokenbench waits until ``healthy_workers`` counts every replica (``ready_body``).
  /health ("All servers healthy") and /v1/models (proxied to a worker) answer 2xx then too.
- No response header names the worker that served (records' replica stays None behind these
  routers); the per-worker counters below say how many each one got.
- Metrics (Prometheus text on --prometheus-port, scraped live):
  vllm-router: vllm_router_requests_total{route}, vllm_router_processed_requests_total{worker}
  (worker = the replica's base URL as given in --worker-urls), vllm_router_policy_decisions_total
  {policy,worker}, vllm_router_running_requests{worker} (a gauge, only under the load-tracking
  policies: cache_aware, power_of_two), vllm_router_worker_health{worker},
  vllm_router_active_workers, vllm_router_cb_state{worker}, vllm_router_cb_outcomes_total
  {worker,outcome}, vllm_router_generate_duration_seconds (to the upstream's response headers, not
  the stream's end: no normalized field), vllm_router_prefix_routing_decisions_total (cache_aware).
  sglang-router (prefix smg_): smg_router_requests_total{router_type,backend_type,connection_mode,
  model,endpoint,streaming}, smg_worker_cb_outcomes_total{worker,outcome} (the only per-worker
  count: one outcome per routed request with retries off), smg_worker_health{worker},
  smg_worker_pool_size, smg_worker_selection_total{...,policy} (no worker label),
  smg_http_requests_total{method,path}; no running gauge was exported over HTTP.
- Per-replica routed requests: normalize gives one value per worker, keyed
  ``routed_requests@<host:port>`` (prom.ROUTED_PREFIX + the worker label without its scheme, e.g.
  ``routed_requests@127.0.0.1:8001``: ReplicaEndpoint.name), a counter; ``requests`` is the
  router's received-requests counter (every route summed).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tokenbench.backends.base import Launch, LaunchSpec, Profile, exe
from tokenbench.backends.ray import metrics_port as side_port
from tokenbench.errors import BackendError
from tokenbench.telemetry.prom import MetricNames

VENV_BIN = Path(__file__).resolve().parents[3] / ".cache/router-venv/bin"  # the checkout's (make routers)
READY_PATH = "/readiness"
STARTUP_CHECK_INTERVAL_S = 1  # --worker-startup-check-interval: the default 30 s delays readiness
DEFAULT_POLICY = "round_robin"  # the routers' own default is cache_aware; round robin is the plain baseline

# --layer-arg KEY=VALUE -> the router flag that takes VALUE (retries is a switch: on|off)
THRESHOLDS = {
    "cache_threshold": "--cache-threshold",
    "balance_abs_threshold": "--balance-abs-threshold",
    "balance_rel_threshold": "--balance-rel-threshold",
}
LAYER_KEYS = ("policy", "retries", *THRESHOLDS)


@dataclass(frozen=True)
class Router:
    """What differs between the two routers' command lines."""

    title: str
    script: str  # the console script in the router venv
    subcommand: tuple[str, ...]  # words after it (sglang-router: launch)
    env_bin: str  # the environment variable that overrides the executable
    policies: tuple[str, ...]  # --policy choices, from --help


VLLM = Router(
    "vLLM router",
    "vllm-router",
    (),
    "TOKENBENCH_VLLM_ROUTER_BIN",
    ("random", "round_robin", "cache_aware", "kv_aware", "power_of_two", "consistent_hash", "sticky_least_loaded"),
)
SGLANG = Router(
    "SGLang router",
    "sglang-router",
    ("launch",),
    "TOKENBENCH_SGLANG_ROUTER_BIN",
    ("random", "round_robin", "cache_aware", "power_of_two", "manual"),
)


def prometheus_port(port: int) -> int:
    """The router's Prometheus port: its HTTP port + 1, by Ray's rule (ray.metrics_port: a free
    port in the ephemeral range gets one below that range)."""
    return side_port(port)


def metrics_url(spec: LaunchSpec) -> str:
    return f"http://127.0.0.1:{prometheus_port(spec.port)}/metrics"


def executable(router: Router) -> list[str]:
    """$TOKENBENCH_<ROUTER>_BIN (one or more words), else the router venv's console script (a
    missing one is named at launch, and by an experiment's prerequisites with ``make routers``)."""
    given = os.environ.get(router.env_bin)
    if given:
        return [*given.split(), *router.subcommand]
    return [str(VENV_BIN / router.script), *router.subcommand]


def installed_version(router: Router) -> str | None:
    """The router's wheel version in the router venv (its dist-info folder's name); None with an
    executable from the environment (another install) or none installed."""
    if os.environ.get(router.env_bin):
        return None
    distribution = router.script.replace("-", "_")
    found = sorted(VENV_BIN.parent.glob(f"lib/python*/site-packages/{distribution}-*.dist-info"))
    return found[-1].name.removeprefix(f"{distribution}-").removesuffix(".dist-info") if found else None


def layer_flags(router: Router, layer_args: tuple[str, ...]) -> list[str]:
    """--policy, retries and the cache_aware thresholds from --layer-arg KEY=VALUE; an argument
    that starts with ``--`` is one of the router's own flags, passed as given."""
    policy, retries, flags, own = DEFAULT_POLICY, "off", [], []
    for arg in layer_args:
        if arg.startswith("--"):
            own.append(arg)
            continue
        key, sep, value = arg.partition("=")
        if not sep or key not in LAYER_KEYS or not value:
            raise BackendError(
                f"--backend {router.script} takes --layer-arg as KEY=VALUE with KEY one of {', '.join(LAYER_KEYS)}, "
                f"or one of its own flags as --flag=VALUE; got {arg!r}"
            )
        if key == "policy":
            if value not in router.policies:
                raise BackendError(
                    f"--layer-arg policy={value}: {router.script} routes by {', '.join(router.policies)}"
                )
            policy = value
        elif key == "retries":
            if value not in ("on", "off"):
                raise BackendError(
                    f"--layer-arg retries={value}: on or off (off, the default: errors reach the client)"
                )
            retries = value
        else:
            try:
                float(value)
            except ValueError:
                raise BackendError(f"--layer-arg {key}={value}: a number") from None
            flags += [THRESHOLDS[key], value]
    return ["--policy", policy, *(["--disable-retries"] if retries == "off" else []), *flags, *own]


def router_argv(router: Router, spec: LaunchSpec) -> list[str]:
    if not spec.upstream_urls:
        raise BackendError(
            f"--backend {router.script} is a router: it is launched in front of --replicas N copies of "
            f"--upstream (default llamacpp), or attached to with --url and --replica-url"
        )
    return [
        *exe(spec, executable(router)),
        "--worker-urls",
        *spec.upstream_urls,
        *layer_flags(router, spec.knobs.engine_args),
        *("--host", spec.host, "--port", str(spec.port)),
        *("--prometheus-host", "127.0.0.1", "--prometheus-port", str(prometheus_port(spec.port))),
        *("--worker-startup-check-interval", str(STARTUP_CHECK_INTERVAL_S)),
    ]


def every_worker_healthy(spec: LaunchSpec, body: bytes) -> bool:
    """/readiness's answer counts every replica as healthy (sglang-router registers them after it
    listens: a router ready with one of two would send the first requests all to that one)."""
    try:
        healthy = json.loads(body).get("healthy_workers")
    except (ValueError, AttributeError):
        return False
    return isinstance(healthy, int) and healthy >= len(spec.upstream_urls)


def _container(router: Router) -> Launch:
    raise BackendError(
        f"--backend {router.script} runs from its PyPI wheel (make routers): there is no container launch"
    )


# vllm_router_* names from vllm-project/router src/metrics.rs, checked live (module docstring)
VLLM_METRICS = MetricNames(
    running=("vllm_router_running_requests",),  # per worker, summed; load-tracking policies only
    requests=("vllm_router_requests_total",),
    routed_requests_by_worker=("vllm_router_processed_requests_total",),
    path="/metrics",  # on the Prometheus port: see metrics_url()
)
SGLANG_METRICS = MetricNames(
    requests=("smg_router_requests_total",),
    routed_requests_by_worker=("smg_worker_cb_outcomes_total",),  # success + failure, per worker
    path="/metrics",
)

QUIRKS = (
    "a router in front of --replicas N copies of --upstream (default llamacpp: the embedded llama.cpp "
    "server, one thread each on a small machine), each on its own port with its own log (server-replica-K.log)",
    "--layer-arg policy=NAME (default round_robin), retries=on (off by default: a retried error never "
    "reaches the client), cache_threshold / balance_abs_threshold / balance_rel_threshold=NUMBER "
    "(cache_aware), or the router's own --flag=VALUE",
    "Prometheus metrics on a separate port (http port + 1); routed_requests@HOST:PORT per replica",
    "no response header names the replica that served: per-replica counts come from the router's counters",
    "installed by make routers (scripts/setup_routers.sh) into .cache/router-venv",
)


def _profile(router: Router, name: str, metrics: MetricNames) -> Profile:
    return Profile(
        name=name,
        title=router.title,
        layer=True,
        router=True,
        default_upstream="llamacpp",
        apis=("chat", "completions"),
        default_port=30000,
        ready_path=READY_PATH,
        ready_body=every_worker_healthy,
        local=lambda spec: Launch(tuple(router_argv(router, spec))),
        container=lambda spec: _container(router),
        metrics=metrics,
        metrics_url=metrics_url,
        version_reader=lambda: installed_version(router),
        usage="the replica's own (the router relays the stream as it comes)",
        quirks=QUIRKS,
        cold_start_includes="the router's start and its first health check of every replica, after the "
        "replicas were ready (each replica's own cold start is in replicas[])",
        docs=(f"{router.script} --help", "vllm-project/router src/metrics.rs", "live scrapes (module docstring)"),
    )


VLLM_PROFILE = _profile(VLLM, "vllm-router", VLLM_METRICS)
SGLANG_PROFILE = _profile(SGLANG, "sglang-router", SGLANG_METRICS)
