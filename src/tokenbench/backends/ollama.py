"""Ollama (`ollama serve`): configured by environment variables; native /api + OpenAI /v1; no
Prometheus endpoint.

Facts and their sources (ollama/ollama unless a URL is given):
- Settings are environment variables read by envconfig/config.go and listed in docs/faq.mdx:
  OLLAMA_HOST (bind address, default 127.0.0.1:11434), OLLAMA_NUM_PARALLEL ("maximum number of
  parallel requests each model will process at the same time"), OLLAMA_CONTEXT_LENGTH (the default
  context window of a request, docs/faq.mdx "How can I specify the context window size?";
  "Required RAM will scale by OLLAMA_NUM_PARALLEL * OLLAMA_CONTEXT_LENGTH"), OLLAMA_MAX_QUEUE
  (default 512; beyond it the server answers 503), OLLAMA_KV_CACHE_TYPE (f16 / q8_0 / q4_0: the
  K/V cache's quantization, global to all models), OLLAMA_FLASH_ATTENTION, OLLAMA_KEEP_ALIVE
  (default 5m; "Negative values are treated as infinite").
- Knob mapping (all to Launch.env): max_num_seqs -> OLLAMA_NUM_PARALLEL, max_model_len ->
  OLLAMA_CONTEXT_LENGTH. Refused: kv_memory (no memory-fraction setting), prefix_caching (no
  switch), tensor_parallel (none; OLLAMA_SCHED_SPREAD spreads layers, it is not TP), quantization:
  the weights' quantization is the model tag (e.g. llama3.2:3b-instruct-q4_K_M), and
  OLLAMA_KV_CACHE_TYPE quantizes the KV cache only, a different thing; pass it with --engine-env.
- tokenbench sets OLLAMA_KEEP_ALIVE=-1 so the model is not unloaded between load points (an
  --engine-env OLLAMA_KEEP_ALIVE=... overrides it).
- The model must already be pulled (`ollama pull MODEL`); models load lazily on the first request
  that names them (docs/faq.mdx "How can I preload a model"). Requests name the model tag: there is
  no alias, so the served name is the model.
- Readiness: GET /api/version -> {"version": "..."} (docs/api.md "Version") answers as soon as the
  HTTP server is up, before any model is loaded.
- Metrics: none. There is no Prometheus endpoint in ollama; issue #3144 ("add /metrics endpoint")
  is open and the PRs adding one (#3529 closed; #6537, #16998, #18508 open) are not merged.
- APIs: native POST /api/generate and /api/chat (newline-delimited JSON; the last object has
  done=true, prompt_eval_count, eval_count and durations in ns), OpenAI-compatible /v1/completions
  and /v1/chat/completions with stream_options.include_usage
  (https://docs.ollama.com/api/openai-compatibility). No ignore_eos option.
- Models live in ~/.ollama/models for a user's `ollama serve` but in /usr/share/ollama/.ollama/models
  for the Linux service (docs/faq.mdx "Where are models stored?"; OLLAMA_MODELS overrides).
- Image: ollama/ollama; models persist in a volume at /root/.ollama (docs/docker.mdx:
  ``docker run -d --gpus=all -v ollama:/root/.ollama -p 11434:11434 ollama/ollama``).
"""

from __future__ import annotations

from dataclasses import replace

from tokenbench.backends.base import Launch, LaunchSpec, Profile, docker_run, exe, unsupported
from tokenbench.errors import BackendError

IMAGE = "ollama/ollama:latest"
MODELS_VOLUME = ["-v", "ollama:/root/.ollama"]  # docs/docker.mdx: the named volume holds pulled models

# knob -> environment variable (envconfig/config.go, docs/faq.mdx)
KNOB_ENV = {
    "max_num_seqs": "OLLAMA_NUM_PARALLEL",
    "max_model_len": "OLLAMA_CONTEXT_LENGTH",
}
REFUSED = {  # why the other knobs have no variable (envconfig/config.go AsMap descriptions)
    "kv_memory": "it has no memory-fraction setting (OLLAMA_GPU_OVERHEAD reserves bytes of VRAM per GPU)",
    "prefix_caching": "prompt caching has no on/off variable",
    "tensor_parallel": "it has no tensor parallelism (OLLAMA_SCHED_SPREAD spreads a model's layers over all GPUs)",
}
DEFAULT_ENV = {"OLLAMA_KEEP_ALIVE": "-1"}  # keep the model loaded for the whole run


def _env(spec: LaunchSpec) -> dict[str, str]:
    env = {"OLLAMA_HOST": f"{spec.host}:{spec.port}", **DEFAULT_ENV}
    knobs = spec.knobs
    if knobs.quantization is not None:
        raise BackendError(
            "Ollama takes the weights' quantization from the model tag: pass e.g. --model "
            "llama3.2:3b-instruct-q4_K_M instead of --quantization. To quantize the KV cache instead, "
            "use --engine-env OLLAMA_KV_CACHE_TYPE=q8_0 (--engine-arg does not apply: ollama serve "
            "takes no flags)"
        )
    for knob, value in knobs.model_dump(exclude={"engine_args", "engine_env"}, exclude_none=True).items():
        if knob == "per_request_metrics" and value is False:
            continue  # off: every engine's default
        if knob not in KNOB_ENV:
            why = REFUSED.get(knob, "it has no variable for it")
            raise BackendError(
                f"{unsupported('Ollama', knob, value)}. Ollama is configured by "
                f"environment variables (--engine-env KEY=VALUE); {why}"
            )
        env[KNOB_ENV[knob]] = str(value)
    return {**env, **knobs.engine_env}


def local(spec: LaunchSpec) -> Launch:
    return Launch((*exe(spec, ["ollama", "serve"]), *spec.knobs.engine_args), _env(spec))


def container(spec: LaunchSpec) -> Launch:
    # Inside its own network namespace the server binds 0.0.0.0; docker_run publishes the port on
    # the host's loopback only. The image's entrypoint is the ollama binary: "serve" is its
    # argument. docker_run adds engine_env itself, so only the rendered variables are passed here.
    env = _env(replace(spec, host="0.0.0.0", executable=None))
    rendered = {k: v for k, v in env.items() if k not in spec.knobs.engine_env}
    return docker_run(spec, IMAGE, ["serve", *spec.knobs.engine_args], MODELS_VOLUME, env=rendered)


PROFILE = Profile(
    name="ollama",
    title="Ollama",
    apis=("ollama", "chat", "completions"),
    default_port=11434,
    ready_path="/api/version",
    local=local,
    container=container,
    metrics=None,  # no Prometheus endpoint (ollama issue #3144 open)
    version_path="/api/version",
    version_field="version",
    version_package=None,
    ignore_eos=False,
    usage="native: prompt_eval_count / eval_count on the final done=true object; /v1: final chunk "
    "with stream_options.include_usage",
    quirks=(
        "the model must be pulled first: ollama pull MODEL talks to a running server; models pulled "
        "through the Linux service live in /usr/share/ollama/.ollama/models, which a user's ollama "
        "serve does not read unless --engine-env OLLAMA_MODELS=... points there; for the container, "
        "pull into the 'ollama' volume (docker exec <container> ollama pull MODEL)",
        "ready (GET /api/version) means the HTTP server is up, not that the model is loaded: Ollama "
        "loads it on the first request, so warm up before measuring",
        "OLLAMA_CONTEXT_LENGTH is per request; memory is reserved for NUM_PARALLEL x CONTEXT_LENGTH",
        "more than OLLAMA_MAX_QUEUE (default 512) waiting requests are rejected with 503",
        "OLLAMA_KEEP_ALIVE=-1 is set so the model stays loaded between points",
        "requests name the model tag; the served name cannot be changed",
        "no Prometheus metrics",
        "the container command asks for --gpus all (NVIDIA, as in docs/docker.mdx); on a CPU-only "
        "host run ollama serve locally instead",
    ),
    cold_start_includes="server start only (GET /api/version); the model loads on the first request",
    docs=(
        "envconfig/config.go",
        "docs/faq.mdx",
        "docs/api.md",
        "docs/docker.mdx",
        "https://docs.ollama.com/api/openai-compatibility",
    ),
)
