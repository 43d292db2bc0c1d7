"""The engine options `run` and `backends show` share, and what they become: the engine's knobs
and the backend to launch or attach to."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..config import BackendConfig, EngineKnobs
from .common import UsageError, given

# The common engine knobs, shared by `run` and `backends show` (backends/*.py map them to flags).
MaxNumSeqs = Annotated[
    int | None, typer.Option(help="Engine: max concurrent sequences (batch size).", rich_help_panel="Engine")
]
KVMemory = Annotated[
    float | None,
    typer.Option(
        help="Engine: fraction (0..1] of accelerator memory for weights + KV cache.", rich_help_panel="Engine"
    ),
]
MaxModelLen = Annotated[
    int | None, typer.Option(help="Engine: max model length (prompt + output tokens).", rich_help_panel="Engine")
]
PrefixCaching = Annotated[
    bool | None,
    typer.Option(
        "--prefix-caching/--no-prefix-caching",
        help="Engine: prefix caching on/off (default: the engine's).",
        rich_help_panel="Engine",
    ),
]
Quantization = Annotated[
    str | None, typer.Option(help="Engine: quantization method, in the engine's own words.", rich_help_panel="Engine")
]
TensorParallel = Annotated[int | None, typer.Option(help="Engine: tensor-parallel size.", rich_help_panel="Engine")]
EngineArg = Annotated[
    list[str] | None,
    typer.Option(
        help="Engine: a native flag passed through verbatim (repeat; use --engine-arg=--flag).",
        rich_help_panel="Engine",
    ),
]
EngineEnv = Annotated[
    list[str] | None,
    typer.Option(help="Engine: KEY=VALUE set in the engine's environment (repeat).", rich_help_panel="Engine"),
]
Upstream = Annotated[
    str | None,
    typer.Option(
        help="Serving layer (--backend triton/ray): the engine it serves from, launched first on its own port "
        "with --model and the engine options (llamacpp = the embedded llama.cpp server, vllm, ...). "
        "Default for triton: llamacpp; 'none': the layer's own engine (Triton + TensorRT-LLM).",
        rich_help_panel="Engine",
    ),
]
ServedModelName = Annotated[
    str | None,
    typer.Option(help="Engine: the model name requests use (default from --model).", rich_help_panel="Engine"),
]
EngineBin = Annotated[
    str | None,
    typer.Option(
        help="Engine: the executable to run instead of the profile's command (e.g. a venv's bin/vllm).",
        rich_help_panel="Engine",
    ),
]


def knobs(a: dict[str, Any]) -> EngineKnobs:
    env = {}
    for item in a.get("engine_env") or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"--engine-env takes KEY=VALUE, got {item!r}")
        env[key] = value
    return EngineKnobs(
        max_num_seqs=a["max_num_seqs"],
        kv_memory=a["kv_memory"],
        max_model_len=a["max_model_len"],
        prefix_caching=a["prefix_caching"],
        quantization=a["quantization"],
        tensor_parallel=a["tensor_parallel"],
        engine_args=tuple(a.get("engine_arg") or ()),
        engine_env=env,
    )


def backend_config(a: dict[str, Any]) -> BackendConfig | None:
    """The backend to launch (--backend, or the embedded one when only engine options are given),
    the profile of an attached server (--url --backend), or where to scrape (--metrics-url)."""
    engine = knobs(a)
    common = given(metrics_interval_s=a["metrics_interval"], metrics_url=a["metrics_url"])
    if a["backend"] is None:
        if a.get("upstream"):
            raise UsageError("--upstream names the engine a serving layer serves from: add --backend triton (or ray)")
        if engine != EngineKnobs() or a["engine_bin"] or a["engine_port"]:
            if a["url"] is not None:
                raise UsageError(
                    "engine knobs (--max-num-seqs, --engine-arg, ...) need a launched "
                    "backend: drop --url and pass --backend NAME --model M"
                )
            from ..backends import EMBEDDED

            # the embedded default backend takes the knobs too
            config = BackendConfig(
                name=EMBEDDED,
                knobs=engine,
                **given(model=a["model"], executable=a["engine_bin"], port=a["engine_port"], **common),
            )
            _check_backend(config, launch=False)
            return config
        return BackendConfig(**common) if common else None
    if a["url"] is not None and engine != EngineKnobs():
        raise UsageError("engine knobs are for a server tokenbench launches; with --url they would be ignored")
    config = BackendConfig(
        name=a["backend"],
        knobs=engine,
        **given(
            model=a["model"],
            served_model_name=a["served_model_name"],
            executable=a["engine_bin"],
            ready_timeout_s=a["ready_timeout"],
            port=a["engine_port"],
            upstream=a.get("upstream"),
            **common,
        ),
    )
    _check_backend(config, launch=a["url"] is None)
    return config


def _check_backend(config: BackendConfig, launch: bool) -> None:
    """Bad input before anything starts: an unknown profile, a knob it cannot map, an API it
    does not serve."""
    from ..backends import BackendError, get_profile
    from ..backends.server import check_launch

    try:
        profile = get_profile(config.name or "")
        if launch:
            check_launch(profile, config)
    except BackendError as exc:
        raise UsageError(str(exc)) from None
