"""Speculative decoding knobs and the engine's own per-request figures -> each engine's own flags:
``--spec-method`` (ngram, draft, eagle, eagle3, mtp), ``--spec-tokens K`` (tokens proposed per
step), ``--spec-draft-model`` (the draft model or head), ``--spec-ngram-min/--spec-ngram-max`` (the
n-gram sizes an ngram lookup matches) and ``--per-request-metrics`` (the engine's timing and
speculation figures in each response, read by clients/server_report.py). A knob an engine has no
flag for is refused, saying what the engine has instead.

Sources (names from each engine's code, not its docs):
- vLLM 0.32: one ``--speculative-config`` JSON (vllm/engine/arg_utils.py, parsed with json.loads
  into SpeculativeConfig: vllm/config/speculative.py) with ``method`` (SpeculativeMethod: "ngram",
  "draft_model", "eagle", "eagle3", "mtp", ...), ``num_speculative_tokens``, ``model`` (the draft
  model or head; mtp takes the target's own when not given), ``prompt_lookup_min`` /
  ``prompt_lookup_max`` (the ngram window; one given sets the other, none: 5 and 5).
  ``--enable-per-request-metrics`` (vllm/entrypoints/launchers/cli_args.py: "include per-request
  timing metrics in API responses"; refused with --disable-log-stats by that file's validation) and
  ``--per-request-spec-decode-metrics none|summary|detailed`` (arg_utils.py, ObservabilityConfig:
  ``metrics.speculative_decoding`` in the response; detailed adds the per-step arrays).
- SGLang: python/sglang/srt/server_args.py: ``--speculative-algorithm`` (EAGLE, EAGLE3, NEXTN,
  STANDALONE, NGRAM, ...), ``--speculative-draft-model-path``, ``--speculative-num-steps`` (draft
  steps), ``--speculative-eagle-topk`` (tokens per step: 1 is a chain) and
  ``--speculative-num-draft-tokens`` (the verify width: with topk 1 server_args resets it to num
  steps + 1, the last accepted token included; the NGRAM worker's draft_token_num is that width
  too). Its n-gram window flags (--speculative-ngram-min/max-match-window-size) are gone from
  current releases (a trie of --speculative-ngram-max-trie-depth instead): refused. No launch flag
  puts per-request figures in a response: a chat request's ``return_meta_info`` adds ``meta_info``
  to a non-streamed choice only (entrypoints/openai/protocol.py), so refused, naming /metrics'
  sglang:spec_accept_length and sglang:spec_accept_rate.
- llama.cpp (the xllamacpp wheel's build, common/arg.cpp in its library: the older --draft-max,
  --draft-min and --draft are removed there, "use --spec-draft-n-max or --spec-ngram-mod-n-max"):
  ``--spec-type`` (draft-simple, draft-eagle3, draft-mtp, ngram-simple, ...), ``--spec-draft-model``
  (alias --model-draft, -md), ``--spec-draft-n-max`` ("number of tokens to draft"),
  ``--spec-ngram-simple-size-n`` ("length of lookup n-gram") and ``--spec-ngram-simple-size-m``
  ("length of draft m-gram": the draft length of ngram-simple, which --spec-draft-n-max does not
  cap: measured, size m 4 with n max 2 gave a mean accepted length of 4.6). No EAGLE (1/2) type:
  eagle is refused. The response's ``timings`` carry ``draft_n`` and ``draft_n_accepted``
  always, so --per-request-metrics renders nothing.
- TensorRT-LLM: ``speculative_config`` in the ``--extra_llm_api_options`` YAML
  (tensorrt_llm/llmapi/llm_args.py: decoding_type NGram, Draft_Target, Eagle, Eagle3, MTP;
  max_draft_len; speculative_model_dir, an alias of speculative_model; NGram's
  max_matching_ngram_size; MTP's num_nextn_predict_layers). A profile renders argv and env and
  writes no file (trtllm.py), so the knobs are refused with the YAML to pass. Per-request figures
  are GET /perf_metrics (serve/openai_server.py, with return_perf_metrics), not the response.
- Ray Serve LLM: ``engine_kwargs`` go to vLLM's engine arguments, so ``speculative_config`` takes
  vLLM's object; the per-request flag is the OpenAI frontend's, which Serve LLM replaces: refused.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError

SPEC_KNOBS = (
    "spec_method",
    "spec_tokens",
    "spec_draft_model",
    "spec_ngram_min",
    "spec_ngram_max",
    "per_request_metrics",
)
KNOB_FLAGS = {k: "--" + k.replace("_", "-") for k in SPEC_KNOBS}

VLLM_METHODS = {"ngram": "ngram", "draft": "draft_model", "eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp"}
SGLANG_ALGORITHMS = {"ngram": "NGRAM", "draft": "STANDALONE", "eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN"}
LLAMACPP_TYPES = {"ngram": "ngram-simple", "draft": "draft-simple", "eagle3": "draft-eagle3", "mtp": "draft-mtp"}
TRTLLM_TYPES = {"ngram": "NGram", "draft": "Draft_Target", "eagle": "Eagle", "eagle3": "Eagle3", "mtp": "MTP"}

# Where a container sees a local --spec-draft-model (base.in_container mounts it read-only).
DRAFT_MOUNT = "/draft"


def asked(knobs: EngineKnobs) -> dict[str, object]:
    """The group's knobs that are set. --no-per-request-metrics is every engine's default: not asked."""
    data = knobs.model_dump(include=set(SPEC_KNOBS), exclude_none=True)
    if data.get("per_request_metrics") is False:
        del data["per_request_metrics"]
    return data


def _refuse(engine: str, knob: str, value: object, instead: str) -> BackendError:
    flag = KNOB_FLAGS[knob]
    return BackendError(f"{engine} has no native flag for {flag if value is True else f'{flag}={value}'}: {instead}")


def _flag_given(args: tuple[str, ...], *flags: str) -> bool:
    return any(a == f or a.startswith(f + "=") for a in args for f in flags)


def vllm_config(knobs: EngineKnobs) -> dict[str, object] | None:
    """vLLM's SpeculativeConfig as JSON data (module doc); None: no --spec-method."""
    if knobs.spec_method is None:
        return None
    config: dict[str, object] = {"method": VLLM_METHODS[knobs.spec_method]}
    for key, value in (
        ("num_speculative_tokens", knobs.spec_tokens),
        ("model", knobs.spec_draft_model),
        ("prompt_lookup_min", knobs.spec_ngram_min),
        ("prompt_lookup_max", knobs.spec_ngram_max),
    ):
        if value is not None:
            config[key] = value
    return config


def vllm_flags(knobs: EngineKnobs) -> list[str]:
    """``--speculative-config JSON``; ``--enable-per-request-metrics``, with speculation on also
    ``--per-request-spec-decode-metrics detailed``."""
    argv: list[str] = []
    config = vllm_config(knobs)
    own = knobs.engine_args
    if config is not None:
        if _flag_given(own, "--speculative-config", "-sc", "--spec-method", "--spec-model", "--spec-tokens"):
            raise BackendError(
                "--spec-method renders vLLM's --speculative-config, and --engine-arg gives vLLM's own speculative "
                "flags too: keep one of them"
            )
        argv += ["--speculative-config", json.dumps(config, separators=(",", ":"))]
    if knobs.per_request_metrics:
        if _flag_given(own, "--disable-log-stats"):
            raise BackendError(
                "vLLM refuses --enable-per-request-metrics (--per-request-metrics) with --disable-log-stats: "
                "drop one of them"
            )
        argv.append("--enable-per-request-metrics")
        speculating = config is not None or _flag_given(own, "--speculative-config", "-sc", "--spec-method")
        if speculating and not _flag_given(own, "--per-request-spec-decode-metrics"):
            argv += ["--per-request-spec-decode-metrics", "detailed"]
    return argv


def sglang_flags(knobs: EngineKnobs) -> list[str]:
    """``--speculative-algorithm`` and its draft flags (module doc: k tokens = k steps of one token,
    verify width k + 1)."""
    if knobs.spec_ngram_min is not None or knobs.spec_ngram_max is not None:
        knob = "spec_ngram_min" if knobs.spec_ngram_min is not None else "spec_ngram_max"
        raise _refuse(
            "SGLang",
            knob,
            getattr(knobs, knob),
            "its NGRAM lookup is a trie (--speculative-ngram-max-trie-depth; older releases: "
            "--speculative-ngram-min/max-match-window-size): pass those with --engine-arg",
        )
    if knobs.per_request_metrics:
        raise _refuse(
            "SGLang",
            "per_request_metrics",
            True,
            "its streamed responses carry no per-request figures (a non-streamed chat request's return_meta_info "
            "adds meta_info); its acceptance is in /metrics (sglang:spec_accept_length, sglang:spec_accept_rate): "
            "drop --per-request-metrics",
        )
    if knobs.spec_method is None:
        return []
    algorithm = SGLANG_ALGORITHMS[knobs.spec_method]
    argv = ["--speculative-algorithm", algorithm]
    if knobs.spec_draft_model is not None:
        argv += ["--speculative-draft-model-path", knobs.spec_draft_model]
    k = knobs.spec_tokens
    if k is not None:
        if algorithm != "NGRAM":
            argv += ["--speculative-num-steps", str(k), "--speculative-eagle-topk", "1"]
        argv += ["--speculative-num-draft-tokens", str(k + 1)]
    return argv


def llamacpp_flags(knobs: EngineKnobs) -> list[str]:
    """``--spec-type`` and its draft flags (module doc); the timings are always in the response."""
    method = knobs.spec_method
    if method is None:
        return []
    if method not in LLAMACPP_TYPES:
        raise _refuse(
            "llama.cpp",
            "spec_method",
            method,
            "its EAGLE type is draft-eagle3 (--spec-method eagle3 with an EAGLE-3 head)",
        )
    if knobs.spec_ngram_min is not None:
        raise _refuse(
            "llama.cpp",
            "spec_ngram_min",
            knobs.spec_ngram_min,
            "ngram-simple looks up one n-gram size (--spec-ngram-simple-size-n): set --spec-ngram-max only",
        )
    argv = ["--spec-type", LLAMACPP_TYPES[method]]
    if knobs.spec_draft_model is not None:
        argv += ["--spec-draft-model", knobs.spec_draft_model]
    if knobs.spec_tokens is not None:
        length = "--spec-ngram-simple-size-m" if method == "ngram" else "--spec-draft-n-max"
        argv += [length, str(knobs.spec_tokens)]
    if knobs.spec_ngram_max is not None:
        argv += ["--spec-ngram-simple-size-n", str(knobs.spec_ngram_max)]
    return argv


def trtllm_yaml(knobs: EngineKnobs) -> str:
    """The ``speculative_config`` of an LLM API YAML for the knobs (module doc)."""
    assert knobs.spec_method is not None
    fields: list[tuple[str, object]] = [("decoding_type", TRTLLM_TYPES[knobs.spec_method])]
    if knobs.spec_tokens is not None:  # MTP: "N modules produce N draft tokens"
        length = "num_nextn_predict_layers" if knobs.spec_method == "mtp" else "max_draft_len"
        fields.append((length, knobs.spec_tokens))
    if knobs.spec_draft_model is not None:
        fields.append(("speculative_model_dir", json.dumps(knobs.spec_draft_model)))
    if knobs.spec_ngram_max is not None:
        fields.append(("max_matching_ngram_size", knobs.spec_ngram_max))
    return "speculative_config: {" + ", ".join(f"{k}: {v}" for k, v in fields) + "}"


def trtllm_flags(knobs: EngineKnobs) -> list[str]:
    """Refused: the YAML to write and pass instead (module doc)."""
    if knobs.per_request_metrics:
        raise _refuse(
            "TensorRT-LLM",
            "per_request_metrics",
            True,
            "it reports per-request figures at GET /perf_metrics (an --extra_llm_api_options YAML with "
            "'return_perf_metrics: true'), not in the response: drop --per-request-metrics",
        )
    if knobs.spec_method is None:
        return []
    if knobs.spec_ngram_min is not None:
        raise _refuse(
            "TensorRT-LLM", "spec_ngram_min", knobs.spec_ngram_min, "NGram matches up to max_matching_ngram_size only"
        )
    raise BackendError(
        "trtllm-serve takes speculative decoding from an LLM API YAML, not flags: write "
        f"'{trtllm_yaml(knobs)}' to a file and pass it with --engine-arg=--extra_llm_api_options "
        "--engine-arg=FILE (drop the --spec-* knobs)"
    )


def ray_engine_kwargs(knobs: EngineKnobs) -> dict[str, object]:
    """Ray Serve LLM: vLLM's speculative_config inside engine_kwargs (module doc)."""
    if knobs.per_request_metrics:
        raise _refuse(
            "Ray Serve LLM",
            "per_request_metrics",
            True,
            "vLLM's --enable-per-request-metrics is its OpenAI server's, which Serve LLM's own ingress replaces",
        )
    config = vllm_config(knobs)
    return {} if config is None else {"speculative_config": config}


def draft_in_container(knobs: EngineKnobs) -> tuple[EngineKnobs, list[str]]:
    """A local --spec-draft-model as a container sees it (mounted read-only at DRAFT_MOUNT) and its
    volume flags; a hub id as it is (the HF cache is mounted with a hub --model)."""
    draft = knobs.spec_draft_model
    if draft is None or not Path(draft).exists():
        return knobs, []
    path = Path(draft)
    source = path.parent if path.is_file() else path
    inside = f"{DRAFT_MOUNT}/{path.name}" if path.is_file() else DRAFT_MOUNT
    return knobs.model_copy(update={"spec_draft_model": inside}), ["-v", f"{source.resolve()}:{DRAFT_MOUNT}:ro"]
