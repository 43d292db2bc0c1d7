"""`tokenbench run --config FILE`: a run file, YAML or TOML, whose keys are `run`'s flags, and the
resolved settings written back as one (``--print-config``).

The key rule: a key is a flag's long name without ``--`` (``url``, ``rate``, ``max-requests``),
dashes or underscores alike (``max_requests``), or one of the flag's declared aliases. The keys
come from the settings' own ``Flag`` declarations (config/): there is no table of file keys. A
key that is no flag is an error naming the nearest one.

A value is what the flag takes on the command line (``duration: 2m``, ``rate: 1,2,4``), parsed
by the option's own parser, or a YAML/TOML native: a number, a boolean, a list (a list flag's
items, or a repeated flag's values), a mapping (``slo: {ttft: 500ms}`` as ``ttft=500ms``,
``extra-body`` as its JSON, ``header`` as ``Name: value`` each). ``tools`` and
``response-format`` also take the structure the settings hold (a list of tool definitions, the
constraint's fields). The command line wins over the file, flag by flag.

A run directory's config.json (or the directory) reads as a run file too: its settings are
written back as flags (``as_run_file``), so ``tokenbench run --config RUN_DIR`` runs the same
settings again, in a fresh directory (``out`` is not carried over). Header values and
credential-like engine environment values are masked in config.json: the file says the mask,
and a masked value is refused until the command line gives it again.
"""

from __future__ import annotations

import difflib
import json
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

import typer
import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML is not a dependency)
from pydantic import BaseModel

from tokenbench.cli.common import UsageError
from tokenbench.cli.flags import Option, Params, run_options
from tokenbench.common.redact import MASK, mask
from tokenbench.config import (
    BackendConfig,
    EngineKnobs,
    LoadPoint,
    RateLoad,
    ReplayLoad,
    RunConfig,
    SessionConfig,
    StagedLoad,
    UsersLoad,
)
from tokenbench.config.stages import Stage
from tokenbench.results.layout import CONFIG
from tokenbench.results.manifest import load_manifest

# A repeated flag whose values are NAME SEP VALUE pairs: the separator a mapping's items take.
_PAIRS = {"header": ": ", "engine_env": "="}
# Flags whose settings take a structure as it is (a list of tools, a constraint's fields).
_STRUCTURED = ("tools", "response_format")


def file_key(option: Option) -> str:
    """The option's key in a run file: its flag's name without ``--``."""
    return option.name.removeprefix("--")


def _keys() -> dict[str, Option]:
    """Every accepted key, normalised (dashes), -> its option: the flag's name and its aliases."""
    found: dict[str, Option] = {}
    for option in run_options():
        assert option.flag is not None
        for name in (option.name, *option.flag.aliases):
            found[_normal(name.removeprefix("--"))] = option
    return found


def _normal(key: str) -> str:
    return key.strip().replace("_", "-")


def read_run_file(path: Path) -> dict[str, Any]:
    """The file's keys and values as written (a config.json: its settings as flags). A run
    directory reads as its config.json."""
    if path.is_dir():
        path = path / CONFIG
    if not path.is_file():
        raise UsageError(f"--config {path}: no such file (a YAML or TOML run file, or a run directory)")
    text = path.read_text()
    try:
        if path.suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif path.suffix == ".json":
            data = json.loads(text)
            if isinstance(data, dict) and "loads" in data and "stop" in data:  # a run's config.json
                written = as_run_file(load_manifest(path).config)
                written.pop("out", None)  # a run again goes to a fresh directory
                return written
        else:
            data = yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"--config {path}: not readable ({first})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(
            f"--config {path}: a run file maps flag names to values (rate: 4), not a {type(data).__name__}"
        )
    return data


def file_params(data: Mapping[str, Any], ctx: typer.Context, source: Path) -> dict[str, Any]:
    """A run file's keys and values -> `run`'s values by parameter name, each through its option's
    own parser (as the command line gives them); an unknown key names the nearest one."""
    keys = _keys()
    by_param = {p.name: p for p in ctx.command.params if p.name}
    values: dict[str, Any] = {}
    for key, value in data.items():
        option = keys.get(_normal(str(key)))
        if option is None:
            raise UsageError(_unknown(str(key), keys, source))
        if value is None:
            continue
        if option.param in _STRUCTURED and isinstance(value, dict | list):
            values[option.param] = value  # the settings read the structure themselves
            continue
        param = by_param[option.param]
        text = _as_flag(value, option, repeat=param.multiple)
        try:
            values[option.param] = param.process_value(ctx, text)
        except typer.BadParameter as exc:
            raise UsageError(f"--config {source}: {key}: {exc.message}") from None
    return values


def _unknown(key: str, keys: Mapping[str, Option], source: Path) -> str:
    near = difflib.get_close_matches(_normal(key), list(keys), n=1, cutoff=0.5)
    hint = f": did you mean {file_key(keys[near[0]])}?" if near else " (keys are run's flags without --, e.g. rate)"
    return f"--config {source}: unknown key {key!r}{hint}"


def _as_flag(value: Any, option: Option, repeat: bool) -> Any:
    """A native value as the command line would give it: text, or a list of texts for a repeated flag."""
    if repeat:
        if isinstance(value, dict):
            sep = _PAIRS.get(option.param, "=")
            return [f"{k}{sep}{_text(v)}" for k, v in value.items()]
        return [_text(v) for v in (value if isinstance(value, list) else [value])]
    if isinstance(value, dict):
        if get_args(option.info.annotation) == (str, Any):  # a JSON object (--extra-body)
            return json.dumps(value)
        return ",".join(f"{k}={_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ",".join(_text(v) for v in value)
    return _text(value)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return str(value)


def merged(ctx: typer.Context, config: Path | None) -> Params:
    """`run`'s values: the run file's under the ones the command line gave (flag by flag: Click
    says which were given), every other option not given (None)."""
    if config is None:
        return dict(ctx.params)
    from_file = file_params(read_run_file(config), ctx, config)
    masked = [k for k, v in from_file.items() if isinstance(v, list | tuple) and any(_is_masked(x) for x in v)]
    typed = {k: v for k, v in ctx.params.items() if _typed(ctx, k)}
    for param in masked:
        if param not in typed:
            flag = next(o.name for o in run_options() if o.param == param)
            raise UsageError(
                f"--config {config}: {flag}'s values are masked there ({MASK}): give them again with {flag}"
            )
    return {**ctx.params, **from_file, **typed}


def _typed(ctx: typer.Context, param: str) -> bool:
    """The option was given on the command line (Click's parameter source, by its name: Typer's
    own copy of Click has its own enum)."""
    source = ctx.get_parameter_source(param)
    return source is not None and source.name != "DEFAULT"


def _is_masked(item: object) -> bool:
    return isinstance(item, str) and item.replace(":", "=").partition("=")[2].strip() == MASK


# --- the settings as a run file ------------------------------------------------------------------


def as_run_file(config: RunConfig) -> dict[str, Any]:
    """The settings as a run file's keys and values: every flag whose value differs from its
    default, the load's and stop's always; read back through `run` they give these settings."""
    written: dict[str, Any] = {}
    backend = config.backend
    parts: dict[type[BaseModel], BaseModel | None] = {
        type(config.target): config.target,
        type(config.stop): config.stop,
        type(config.dataset): config.dataset,
        RunConfig: config,
        BackendConfig: backend,
        EngineKnobs: backend.knobs if backend is not None else None,
        SessionConfig: config.sessions,
        type(config.workers): config.workers,
        ReplayLoad: config.loads[0] if isinstance(config.loads[0], ReplayLoad) else None,
    }
    if config.cost is not None:
        parts[type(config.cost)] = config.cost
    for option in run_options():
        part = parts.get(option.model)
        if part is None or not option.plain:
            continue
        value = getattr(part, option.field)
        if value != option.info.get_default(call_default_factory=True):
            written[file_key(option)] = str(value) if isinstance(value, Path) else value
    written.pop("duration", None)  # the stop's, below
    if config.target.model is None and backend is not None and backend.model is not None:
        written["model"] = backend.model  # what a launched engine loads
    written.update(_structured(config))
    written.update(_load(config.loads))
    written.update(_stop(config))
    order = {file_key(o): i for i, o in enumerate(run_options())}  # as --help lists them
    return dict(sorted(written.items(), key=lambda item: order.get(item[0], len(order))))


def _structured(config: RunConfig) -> dict[str, Any]:
    """The flags the command parses from text, as text or natives it reads back."""
    t = config.target
    written: dict[str, Any] = {}
    if t.extra_body:
        written["extra-body"] = dict(t.extra_body)
    if t.headers:
        written["header"] = [f"{k}: {MASK}" for k in t.headers]  # masked, as in config.json
    if t.response_format is not None:
        rf = t.response_format
        text = {
            "json_object": "json_object",
            "json_schema": f"json_schema:{rf.source}" if rf.source else None,
            "grammar": f"grammar:{rf.source}" if rf.source else None,
            "choice": f"choice:{','.join(rf.choices or [])}",
            "regex": f"regex:{rf.pattern}",
        }.get(rf.kind)
        written["response-format"] = text or rf.model_dump(mode="json", exclude_none=True)
    if t.tools:
        written["tools"] = [dict(tool) for tool in t.tools]
    slo = {k.removesuffix("_s"): v for k, v in config.slo.model_dump().items() if v is not None}
    if slo:
        written["slo"] = ",".join(f"{k}={_seconds(v)}" for k, v in slo.items())
    if config.deadlines != type(config.deadlines)():
        written["deadlines"] = f"ttft={_seconds(config.deadlines.ttft_s)},tbt={_seconds(config.deadlines.tbt_s)}"
    if config.sessions is not None:
        written["multi-turn"] = True
    if config.lora_mix:
        written["lora-mix"] = dict(config.lora_mix)
    if config.mix is not None:
        raise UsageError("--mix's classes are not written back as a run file: give --mix FILE with the run file")
    b = config.backend
    if b is not None:
        for key, items in (
            ("layer-arg", b.layer_args),
            ("replica-url", b.replica_urls),
            ("engine-arg", b.knobs.engine_args),
            ("lora-modules", b.knobs.lora_modules or ()),
        ):
            if items:
                written[key] = list(items)
        if b.knobs.engine_env:
            written["engine-env"] = dict(b.knobs.engine_env)
        if b.name is not None:
            written["backend"] = b.name
    return written


def _seconds(value: float) -> str:
    return f"{value!r}s"


def _load(loads: list[LoadPoint]) -> dict[str, Any]:
    """The load points as the flags that make them (one sweep: every point of one kind)."""
    first = loads[0]
    if all(isinstance(p, UsersLoad) for p in loads):
        users = [p.users for p in loads if isinstance(p, UsersLoad)]
        assert isinstance(first, UsersLoad)
        written: dict[str, Any] = {"users": users if len(users) > 1 else users[0], "ramp-up": first.ramp_up_s}
        return written | ({"think-time": first.think_time_s} if first.think_time_s else {})
    if all(isinstance(p, RateLoad) for p in loads):
        assert isinstance(first, RateLoad)
        rates = [p.rate_per_s for p in loads if isinstance(p, RateLoad)]
        written = {"rate": rates if len(rates) > 1 else rates[0], "arrival": first.arrival}
        return written | _open_loop(first.burstiness, first.max_concurrency)
    if len(loads) == 1 and isinstance(first, ReplayLoad):
        return {"max-concurrency": first.max_concurrency} if first.max_concurrency else {}
    if len(loads) == 1 and isinstance(first, StagedLoad):
        written = {"load-shape": first.shape} if first.shape else {"stages": _stages_text(first.stages)}
        if first.open_loop:
            written |= {"arrival": first.arrival} | _open_loop(first.burstiness, first.max_concurrency)
        return written | ({"think-time": first.think_time_s} if first.think_time_s else {})
    raise UsageError("these load points are not one sweep of run's flags: not written as a run file")


def _open_loop(burstiness: float, max_concurrency: int | None) -> dict[str, Any]:
    written: dict[str, Any] = {"burstiness": burstiness} if burstiness != 1.0 else {}
    return written | ({"max-concurrency": max_concurrency} if max_concurrency else {})


def _stages_text(stages: tuple[Stage, ...]) -> str:
    parts = []
    for s in stages:
        level = f"rate={s.rate_per_s!r}" if s.rate_per_s is not None else f"users={s.users}"
        parts.append(f"{level}:{_seconds(s.duration_s)}" + (f" ramp={_seconds(s.ramp_s)}" if s.ramp_s else ""))
    return ", ".join(parts)


def _stop(config: RunConfig) -> dict[str, Any]:
    """How a point ends: --duration (or auto), --warmup auto; a replay's trace needs neither."""
    stop = config.stop
    written: dict[str, Any] = {}
    if stop.duration_auto:
        written["duration"] = "auto"
    elif stop.duration_s is not None:
        written["duration"] = stop.duration_s
    if stop.warmup_auto:
        written["warmup"] = "auto"
    return written


def run_file_yaml(config: RunConfig) -> str:
    """``--print-config``: the settings as a YAML run file, credentials masked as in config.json."""
    text: str = yaml.safe_dump(mask(as_run_file(config)), sort_keys=False, allow_unicode=True)
    return text
