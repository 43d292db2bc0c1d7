"""What the engine options become (their flags are EngineKnobs' and BackendConfig's fields): the
engine's knobs, shared by `run` and `backends show`, and the backend to launch or attach to."""

from __future__ import annotations

from typing import Any

from tokenbench.cli.common import UsageError
from tokenbench.cli.flags import Option, Params, flagged, options
from tokenbench.config import BackendConfig, EngineKnobs

# `backends show`'s engine options: the knobs and the executable (its other options are its own).
SHOW_OPTIONS: list[Option] = [
    *(o for o in options(EngineKnobs) if o.flag is not None),
    *(o for o in options(BackendConfig) if o.field == "executable"),
]
# What the embedded default backend takes besides the knobs (no profile of its own to pass more to).
_EMBEDDED_FIELDS = ("model", "executable", "port", "metrics_interval_s", "metrics_url")


def knobs(a: Params) -> EngineKnobs:
    env = {}
    for item in a.get("engine_env") or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UsageError(f"--engine-env takes KEY=VALUE, got {item!r}")
        env[key] = value
    lora: dict[str, Any] = {"lora_modules": tuple(a["lora_modules"])} if a.get("lora_modules") else {}
    return EngineKnobs(**flagged(EngineKnobs, a), **lora, engine_args=tuple(a.get("engine_arg") or ()), engine_env=env)


def backend_config(a: Params) -> BackendConfig | None:
    """The backend to launch (--backend, or the embedded one when only engine options are given),
    the profile of an attached server (--url --backend), or where to scrape (--metrics-url)."""
    engine = knobs(a)
    fields = flagged(BackendConfig, a)
    fields.pop("name", None)
    if a.get("replica_url"):  # a repeated flag: not a plain one
        fields["replica_urls"] = tuple(a["replica_url"])
    # what a server tokenbench knows nothing of still takes: where to scrape, a fleet's replicas
    common = {k: v for k, v in fields.items() if k in ("metrics_interval_s", "metrics_url", "replicas", "replica_urls")}
    if a.get("backend") is None:
        if a.get("upstream"):
            raise UsageError("--upstream names the engine a serving layer serves from: add --backend triton (or ray)")
        if a.get("layer_arg"):
            raise UsageError("--layer-arg sets a serving layer tokenbench launches: add --backend ray (or triton)")
        if engine != EngineKnobs() or a.get("engine_bin") or a.get("engine_port"):
            if a.get("url") is not None:
                raise UsageError(
                    "engine knobs (--max-num-seqs, --engine-arg, ...) need a launched "
                    "backend: drop --url and pass --backend NAME --model M"
                )
            from tokenbench.backends import EMBEDDED

            # the embedded default backend takes the knobs too
            embedded = {k: v for k, v in fields.items() if k in _EMBEDDED_FIELDS}
            config = BackendConfig(name=EMBEDDED, knobs=engine, **embedded)
            _check_backend(config, launch=False)
            return config
        return BackendConfig(**common) if common else None
    if a.get("url") is not None and engine != EngineKnobs():
        raise UsageError("engine knobs are for a server tokenbench launches; with --url they would be ignored")
    config = BackendConfig(name=a["backend"], knobs=engine, **fields, layer_args=tuple(a.get("layer_arg") or ()))
    _check_backend(config, launch=a.get("url") is None)
    return config


def _check_backend(config: BackendConfig, launch: bool) -> None:
    """Bad input before anything starts: an unknown profile, a knob it cannot map, an API it
    does not serve."""
    from tokenbench.backends import get_profile
    from tokenbench.backends.server import check_launch
    from tokenbench.errors import BackendError

    try:
        profile = get_profile(config.name or "")
        if launch:
            check_launch(profile, config)
    except BackendError as exc:
        raise UsageError(str(exc)) from None
