"""What a backend profile is: how to launch an engine, its knobs, its APIs and its metric names.

A profile is data plus two small functions (local and container command). Each engine is one
module in this package and one line in ``backends.PROFILES``. Commands are argument lists, never
shell strings. Metric names are cited next to each mapping in the engine's module.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import quote

from tokenbench.backends.cache_control import ResetHook
from tokenbench.backends.lora import LoraFlags, lora_flags
from tokenbench.backends.speculation import SPEC_KNOBS, asked, draft_in_container
from tokenbench.config import BackendConfig, EngineKnobs
from tokenbench.config.constraints import Dialect
from tokenbench.errors import BackendError
from tokenbench.telemetry.prom import MetricNames
from tokenbench.telemetry.scaler import ScalerTarget


@dataclass(frozen=True)
class LaunchSpec:
    """Everything a profile needs to render a command."""

    model: str
    served_name: str
    host: str
    port: int
    knobs: EngineKnobs
    executable: str | None = None  # overrides the first word(s) of the local command
    # a serving layer in front of an engine (BackendConfig.upstream): the running engine's base URL
    # (http://127.0.0.1:PORT) and the model name it serves; None: the layer serves on its own.
    upstream_url: str | None = None
    upstream_model: str | None = None
    # a router in front of a fleet (Profile.router): every replica's base URL, in launch order (the
    # first is also upstream_url); () for anything else
    upstream_urls: tuple[str, ...] = ()


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)  # added to the caller's environment


@dataclass(frozen=True)
class Profile:
    name: str  # the key in PROFILES and the value of --backend
    title: str
    apis: tuple[str, ...]  # values of --api it serves; the first is the default
    default_port: int
    ready_path: str  # GET answers 2xx once the model is loaded and requests can be served
    # ({served_name} in it is the launch's served name, URL-quoted: Triton's per-model ready route)
    local: Callable[[LaunchSpec], Launch]
    container: Callable[[LaunchSpec], Launch]
    metrics: MetricNames | None  # None: the engine has no Prometheus endpoint
    # Where the sampler scrapes when it is not the server's URL + metrics.path (a separate
    # metrics port: Triton, Ray). For a server tokenbench did not launch, pass --metrics-url.
    metrics_url: Callable[[LaunchSpec], str] | None = None
    default_model: Callable[[], str] | None = None  # what it loads when --model is not given
    # The ready path's 2xx body also says it can serve (a router: every replica counted healthy);
    # None: any 2xx is ready.
    ready_body: Callable[[LaunchSpec, bytes], bool] | None = None
    version_path: str | None = None  # GET returning JSON with the engine version
    version_field: str | None = None  # dotted key in that JSON
    version_package: str | None = None  # else: the Python distribution of the engine
    # else: the version read another way (a router's wheel in its own venv); None: unknown
    version_reader: Callable[[], str | None] | None = None
    ignore_eos: bool = True  # honours ignore_eos (fixed-length outputs)
    # the APIs whose route honours it, where some of those it serves do not (None: every one)
    ignore_eos_apis: tuple[str, ...] | None = None
    usage: str = ""  # where the server reports token usage
    quirks: tuple[str, ...] = ()
    cold_start_includes: str = "process start and model load"
    docs: tuple[str, ...] = ()  # where the facts in the module come from
    # The profile's own defaults for a launch, given the most users/concurrency any point asks
    # for (the embedded llama.cpp server: one slot per user). None: the settings as given.
    prepare: Callable[[BackendConfig, int], BackendConfig] | None = None
    # Empties the engine's prefix cache before a point (--prefix-cache reset; cache_control.py).
    # None: the engine has no such control (experiments restart the server instead).
    reset_prefix_cache: ResetHook | None = None
    # The launch settings that make that reset complete, applied when --prefix-cache reset is
    # asked (llama.cpp: a slot save path, else erase answers 501; no host-RAM prompt cache, else
    # an erased prefix comes back from it). None: the launch as given.
    reset_launch: Callable[[BackendConfig], BackendConfig] | None = None
    # The launch settings of one of N replicas of this engine sharing the machine (a fleet behind
    # a router: llama.cpp's threads split between them). None: the launch as given.
    replica_launch: Callable[[BackendConfig, int], BackendConfig] | None = None
    # The completions API takes the prompt as a list of token ids (vLLM, SGLang): trace block
    # prompts are then sent as exact ids, so the server's block hashes match the trace's.
    token_id_prompts: bool = False
    # The OpenAI APIs put the cumulative usage on every chunk when asked (stream_options.
    # continuous_usage_stats): records then hold each chunk's tokens (per-token ITL, fluidity).
    continuous_usage: bool = False
    # Request fields of its OpenAI APIs that ask for its own report of each reply (SGLang's
    # speculation figures; clients/server_report.py); --extra-body may override them.
    report_fields: Mapping[str, object] = field(default_factory=dict)
    # A serving layer (Triton, Ray Serve) in front of an engine: launched after the engine named
    # by BackendConfig.upstream (else default_upstream), its command given LaunchSpec.upstream_url.
    layer: bool = False
    # A router (vllm-router, sglang-router): a layer in front of --replicas N copies of its upstream
    # engine, each on its own port, that picks one per request (LaunchSpec.upstream_urls)
    router: bool = False
    default_upstream: str | None = None  # the engine a layer serves from when --upstream is not given
    default_served_name: str | None = None  # the name requests use unless --served-model-name says
    # structured output: how its API takes --response-format (clients/structured.py's dialects:
    # openai = response_format only; vllm, sglang, llamacpp, tgi add choice/regex/grammar fields)
    structured: Dialect = "openai"
    # --server-traces: the engine's flags and environment that send its spans to an OTLP
    # endpoint (None: the engine exports no per-request spans tokenbench can join), the protocol its
    # exporter is pointed at ("http": the receiver's OTLP/HTTP URL; "grpc": its OTLP/gRPC endpoint,
    # for an exporter that speaks only gRPC), and what the console adds about its spans (one line)
    traces: Callable[[str], tuple[tuple[str, ...], dict[str, str]]] | None = None
    traces_protocol: str = "http"
    traces_note: str = ""
    # a serving layer that passes the request's traceparent on to its upstream engine (Ray Serve's
    # relay: ray_serve_app.JOIN_HEADERS), so the engine's spans join; False: they cannot
    relays_join_key: bool = False
    # Autoscaling: the scaler API a launch answers its replicas at (the ray relay with autoscaling:
    # its driver's), polled by the sampler unless --scaler-url says where; None: none
    scaler: Callable[[LaunchSpec], ScalerTarget | None] | None = None

    @property
    def default_api(self) -> str:
        return self.apis[0]

    def ready_url_path(self, spec: LaunchSpec) -> str:
        return self.ready_path.replace("{served_name}", quote(spec.served_name, safe=""))


def knob_flags(
    knobs: EngineKnobs,
    engine: str,
    values: Mapping[str, str],
    switches: Mapping[str, tuple[str | None, str | None]] = {},
    lora: LoraFlags | None = None,
    speculation: Callable[[EngineKnobs], list[str]] | None = None,
) -> list[str]:
    """Map the common knobs to native flags. ``values``: knob -> flag taking a value;
    ``switches``: knob -> (flag when True, flag when False); ``lora``: the engine's LoRA flags
    (backends/lora.py); ``speculation``: the engine's mapping of the speculative decoding and
    per-request metrics knobs (backends/speculation.py). A knob that is set but that this engine
    has no flag for raises BackendError naming the pass-through."""

    argv: list[str] = []
    if lora is not None:
        argv += lora_flags(knobs, lora)
    elif any(getattr(knobs, k) not in (None, ()) for k in LORA_KNOBS):
        raise unsupported(engine, "lora_modules", ",".join(knobs.lora_modules or ()) or "on")
    if speculation is not None:
        argv += speculation(knobs)
    elif spec := asked(knobs):
        knob, value = next(iter(spec.items()))
        raise unsupported(engine, knob, value)
    for knob, value in _set_knobs(knobs).items():
        if knob in values:
            argv += [values[knob], _fmt(value)]
        elif knob in switches:
            flag = switches[knob][0 if value else 1]
            if flag is None:
                raise unsupported(engine, knob, value)
            argv.append(flag)
        else:
            raise unsupported(engine, knob, value)
    return argv


def _set_knobs(knobs: EngineKnobs) -> dict[str, object]:
    # the LoRA knobs are each profile's lora_flags (backends/lora.py), the speculation knobs its
    # speculation mapping (backends/speculation.py)
    data = knobs.model_dump(exclude={"engine_args", "engine_env", *LORA_KNOBS, *SPEC_KNOBS})
    return {k: v for k, v in data.items() if v is not None}


LORA_KNOBS = ("lora_modules", "enable_lora", "max_loras", "max_lora_rank")  # routing


def _fmt(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


KNOB_FLAGS = {
    "lora_modules": "--lora-modules",
    "max_num_seqs": "--max-num-seqs",
    "kv_memory": "--kv-memory",
    "max_model_len": "--max-model-len",
    "prefix_caching": "--prefix-caching/--no-prefix-caching",
    "quantization": "--quantization",
    "tensor_parallel": "--tensor-parallel",
    "embedding": "--embedding/--no-embedding",  # embeddings
    "spec_method": "--spec-method",
    "spec_tokens": "--spec-tokens",
    "spec_draft_model": "--spec-draft-model",
    "spec_ngram_min": "--spec-ngram-min",
    "spec_ngram_max": "--spec-ngram-max",
    "per_request_metrics": "--per-request-metrics",
}


def unsupported(engine: str, knob: str, value: object) -> BackendError:
    flag = KNOB_FLAGS.get(knob, knob)
    return BackendError(
        f"{engine} has no native flag for {flag if value is True else f'{flag}={value}'}; drop it, or pass "
        f"the engine's own flag with --engine-arg"
    )


def in_container(spec: LaunchSpec, mount: str = "/model") -> tuple[LaunchSpec, list[str]]:
    """The spec as a container sees it, plus its volume flags. Inside, the server binds 0.0.0.0
    (its own network namespace); ``docker_run`` publishes the port on the host's 127.0.0.1 only.
    A local model folder/file is mounted read-only at ``mount``; a hub id is passed as is with
    the host's HF cache mounted. A local --spec-draft-model is mounted read-only too
    (speculation.DRAFT_MOUNT)."""
    path = Path(spec.model)
    if path.exists():
        source = path.parent if path.is_file() else path
        model = f"{mount}/{path.name}" if path.is_file() else mount
        volumes = ["-v", f"{source.resolve()}:{mount}:ro"]
    else:
        model = spec.model
        volumes = ["-v", f"{Path.home() / '.cache/huggingface'}:/root/.cache/huggingface"]
    knobs, draft_volumes = draft_in_container(spec.knobs)
    return replace(spec, model=model, host="0.0.0.0", executable=None, knobs=knobs), volumes + draft_volumes


def docker_run(
    spec: LaunchSpec,
    image: str,
    args: list[str],
    volumes: list[str],
    *,
    gpus: bool = True,
    env: Mapping[str, str] = {},
    extra_ports: tuple[int, ...] = (),
) -> Launch:
    """``docker run`` of an engine image, publishing its port (and ``extra_ports``, e.g. a
    separate metrics port) on loopback only."""
    argv = ["docker", "run", "--rm", "--ipc=host"]
    for port in (spec.port, *extra_ports):
        argv += ["-p", f"127.0.0.1:{port}:{port}"]
    if gpus:
        argv += ["--gpus", "all"]
    argv += volumes
    for key, value in {**env, **spec.knobs.engine_env}.items():
        argv += ["-e", f"{key}={value}"]
    return Launch(tuple(argv + [image, *args]))


def exe(spec: LaunchSpec, default: list[str]) -> list[str]:
    """The engine's command words, or the user's --engine-bin in their place. --engine-bin may be
    several words (``"/venv/bin/python -m vllm.entrypoints.cli.main serve"``): split like a shell
    would, but never run through one."""
    return shlex.split(spec.executable) if spec.executable else default
