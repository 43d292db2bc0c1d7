"""`tokenbench run`'s options -> RunConfig: the embedded default scenario, the load sweep and its
stop, the target, the dataset. Only what was given is passed on (the settings hold the defaults).

A flag whose value is its field's reaches the settings through ``flagged`` (cli/flags.py) with no
line here; this module holds what is more than that: the flags parsed from text (lists, headers,
JSON, durations), the ones that shape the scenario, and the flags that only mean something with
another (refused, naming it, without)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast, get_args

from tokenbench.cli.common import UsageError, err, given, numbers
from tokenbench.cli.engine import backend_config
from tokenbench.cli.flags import AUTO, Params, flag_names, flagged, options
from tokenbench.cli.vllm_flags import FlagError, json_object
from tokenbench.common.units import parse_duration_s
from tokenbench.config import (
    DEFAULT_MAX_DURATION_S,
    BackendConfig,
    DatasetConfig,
    DeadlinesConfig,
    LoadPoint,
    LoadSweep,
    ReplayLoad,
    RunConfig,
    SessionConfig,
    StagedLoad,
    StopConfig,
    TargetConfig,
    TraceFormat,
    UsersLoad,
    WorkersConfig,
)
from tokenbench.config.cost import CostConfig
from tokenbench.config.flags import TRACE
from tokenbench.config.mix import load_mix, parse_lora_mix
from tokenbench.config.slo import SLOConfig, parse_slo
from tokenbench.config.stages import Stage, trace_rate_stages, trace_shape_keys
from tokenbench.datasets.traces import TraceReader, TraceSelection

# The embedded default scenario (about a minute): a small ramp of chat users.
DEFAULT_USERS = 4
DEFAULT_RAMP_S = 10.0
DEFAULT_DURATION_S = 50.0
DEFAULT_INPUT_TOKENS = 64
DEFAULT_OUTPUT_TOKENS = 64


def _headers(items: list[str] | None) -> dict[str, str]:
    headers = {}
    for item in items or []:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"--header takes 'Name: value', got {item.split(':')[0]!r}...")
        headers[name.strip()] = value.strip()
    return headers


def _json_body(text: str | None) -> dict[str, Any]:
    try:
        return json_object(text) if text is not None else {}
    except FlagError as exc:
        raise UsageError(str(exc)) from None


def _trace_only() -> list[str]:
    """The flags that need a trace to replay: ReplayLoad's own (--replay-*) and the dataset's in
    the trace panel (--trace-format, --block-size, ...); given without --dataset trace, an error."""
    own = [o.param for o in options(ReplayLoad) if o.flag is not None]
    return own + [o.param for o in options(DatasetConfig) if o.flag is not None and o.flag.panel == TRACE]


@dataclass(frozen=True)
class _Scenario:
    """The load the flags ask for; when they name no users and no rate, the embedded default
    scenario (a small ramp of users for about a minute)."""

    users: list[int]
    rates: list[float]
    ramp_up_s: float | None
    duration_s: float | None
    max_requests: int | None
    default: bool
    replay: bool = False  # --dataset trace: one replay point, ended by the trace


def run_config(a: Params) -> RunConfig:
    """`tokenbench run`'s options (by parameter name; None or absent: not given) -> RunConfig.
    Only what was given is passed on: every other value is the settings' own default (config/)."""
    scenario = _scenario(a)
    loads = _loads(a, scenario)
    scenario = _staged_duration(loads, scenario)
    stop = _stop(a, scenario)
    _check_measured(a, loads, stop, scenario)
    slo = _slo(a.get("slo"))
    small = scenario.default and a.get("url") is None and a.get("backend") is None
    backend = backend_config(a)
    return RunConfig(
        **flagged(RunConfig, a),
        **given(
            backend=backend,
            target=_target(a, backend),
            loads=loads,
            stop=stop,
            dataset=_dataset(a, small),
            slo=slo,
            deadlines=_deadlines(a.get("deadlines")),
            sessions=_sessions(a),
            cost=_cost(a),
            workers=_workers(a),
            lora_mix=parse_lora_mix(a["lora_mix"]) if a.get("lora_mix") else None,
            mix=load_mix(a["mix"]) if a.get("mix") else None,
        ),
    )


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _scenario(a: Params) -> _Scenario:
    users, rates = numbers(a.get("users"), "--users", int), numbers(a.get("rate"), "--rate")
    duration, max_requests, ramp_up = a.get("duration"), a.get("max_requests"), a.get("ramp_up")
    if a.get("stages") or a.get("load_shape"):
        return _staged_scenario(a)
    if duration == AUTO:  # autostop: the ceiling is the deadline; a replay's trace ends it (auto ignored)
        duration = None if a.get("dataset") == "trace" else a.get("max_duration") or DEFAULT_MAX_DURATION_S
    if a.get("dataset") == "trace":
        # the flags that shape another schedule: a trace is its own
        other = [_flag(k) for k in ("users", "rate", "ramp_up", "think_time", "arrival", "burstiness") if a.get(k)]
        if other:
            raise UsageError(f"--dataset trace replays the trace's own schedule: drop {' and '.join(other)}")
        return _Scenario([], [], None, duration, max_requests, default=False, replay=True)
    replay_own = [o.param for o in options(ReplayLoad) if o.flag is not None]
    if a.get("dataset") == "programs" and any(a.get(k) is not None for k in replay_own):
        # agent programs on the recording's own clock: each session once, at its start
        other = [_flag(k) for k in ("users", "rate", "ramp_up", "think_time", "arrival", "burstiness") if a.get(k)]
        if other:
            raise UsageError(f"--replay-speed starts each session at its own time: drop {' and '.join(other)}")
        return _Scenario([], [], None, duration, max_requests, default=False, replay=True)
    stray = [_flag(k) for k in _trace_only() if a.get(k) is not None]
    if stray:
        raise UsageError(f"{', '.join(stray)} need a trace to replay: add --dataset trace --dataset-path FILE")
    if a.get("num_prompts") is not None and duration is None and max_requests is None:
        max_requests = a["num_prompts"]  # vllm bench serve's meaning: N prompts, each sent once
        if a.get("multi_turn"):  # N conversations: every turn of each (synthetic's count is known)
            if not a.get("turns"):
                raise UsageError(
                    "--multi-turn --num-prompts N: set --duration or --max-requests (turns per conversation vary)"
                )
            max_requests *= a["turns"]
    if any(not math.isfinite(r) for r in rates):
        return _all_at_once(a, rates, duration, max_requests)
    default_scenario = not users and not rates
    if default_scenario:
        users, ramp_up = [DEFAULT_USERS], ramp_up if ramp_up else DEFAULT_RAMP_S
        if duration is None and max_requests is None:
            duration = DEFAULT_DURATION_S
    return _Scenario(users, rates, ramp_up, duration, max_requests, default_scenario)


def _staged_scenario(a: Params) -> _Scenario:
    """--stages or --load-shape: one point whose load changes, as long as its stages (a longer
    --duration holds the last stage's level: StagedLoad.fitted)."""
    if a.get("stages") and a.get("load_shape"):
        raise UsageError("--stages and --load-shape both make the staged point's stages: give one")
    other = [_flag(k) for k in ("users", "rate", "ramp_up") if a.get(k)]
    if other:
        raise UsageError(
            f"--stages/--load-shape set the point's load over time: drop {' and '.join(other)} (a stage's own "
            "ramp= ramps it)"
        )
    if a.get("duration") == AUTO:
        raise UsageError("a staged point lasts its stages: drop --duration auto (or give a longer --duration)")
    return _Scenario([], [], None, a.get("duration"), a.get("max_requests"), default=False)


def _trace_curve(text: str) -> list[Stage] | None:
    """``--load-shape trace:path=FILE[,format=F][,window=10s][,scale=1]``: the trace's own rate
    curve (its arrivals per window) times ``scale``, as stages; None: another shape."""
    keys = trace_shape_keys(text)
    if keys is None:
        return None
    unknown = set(keys) - {"path", "format", "window", "scale"}
    if "path" not in keys or unknown:
        raise UsageError(
            f"--load-shape {text!r}: write trace:path=FILE[,format=mooncake|azure|burstgpt|bailian][,window=10s]"
            "[,scale=1]" + (f" (unknown: {', '.join(sorted(unknown))})" if unknown else "")
        )
    fmt = keys.get("format")
    if fmt is not None and fmt not in get_args(TraceFormat):
        raise UsageError(f"--load-shape {text!r}: format= is one of {', '.join(get_args(TraceFormat))}")
    try:
        window_s = parse_duration_s(keys.get("window", "10s"))
        scale = float(keys.get("scale", "1"))
        reader = TraceReader(TraceSelection(path=Path(keys["path"]), format=cast(TraceFormat | None, fmt)))
        times = [row.timestamp_s for row in reader.rows()]
        first = min(times, default=0.0)
        return trace_rate_stages([t - first for t in times], window_s, scale)
    except ValueError as exc:
        raise UsageError(f"--load-shape {text!r}: {exc}") from None


def _all_at_once(a: Params, rates: list[float], duration: float | None, max_requests: int | None) -> _Scenario:
    """``--rate inf`` as `vllm bench serve` means it: every request sent at t = 0 (at most
    --max-concurrency in flight, the next as soon as one ends). That is N closed-loop users with no
    ramp-up and no think time sending N requests in all: run as ``--users N --max-requests N``
    (``--users C`` with --max-concurrency C). It needs the number of requests."""
    if any(math.isnan(r) or r < 0 for r in rates) or len(rates) > 1:
        raise UsageError(f"--rate {a['rate']}: give requests/s above 0 (1,2,4), or inf alone (every request at once)")
    count = max_requests if max_requests is not None else a.get("num_prompts")
    if count is None:
        raise UsageError(
            "--rate inf sends every request at once: give how many with --max-requests N (or --num-prompts N); "
            "it runs as --users N --max-requests N"
        )
    if a.get("users"):
        raise UsageError("--rate inf and --users both set the load: give one")
    cap = a.get("max_concurrency")
    users = min(count, cap) if cap else count
    err.print(
        f"[dim]--rate inf: every request at once, run as --users {users} --max-requests {count} "
        "(closed loop, no ramp-up: each user sends its next request when its last one ends)[/]"
    )
    return _Scenario([users], [], a.get("ramp_up") or 0.0, duration, count, default=False)


def _loads(a: Params, scenario: _Scenario) -> list[LoadPoint]:
    if scenario.replay:
        return [ReplayLoad(**flagged(ReplayLoad, a))]
    curve = _trace_curve(a["load_shape"]) if a.get("load_shape") else None
    sweep = LoadSweep(
        **{
            **flagged(LoadSweep, a),
            **given(users=scenario.users or None, rates=scenario.rates or None, ramp_up_s=scenario.ramp_up_s),
            **given(stages=curve if curve is not None else a.get("stages")),
        }
    )
    return sweep.points()


def _staged_duration(loads: list[LoadPoint], scenario: _Scenario) -> _Scenario:
    """A staged point without --duration lasts its stages (with one, RunConfig fits them to it)."""
    if len(loads) == 1 and isinstance(loads[0], StagedLoad) and scenario.duration_s is None:
        return replace(scenario, duration_s=loads[0].duration_s)
    return scenario


def _stop(a: Params, scenario: _Scenario) -> StopConfig:
    """The flags' stop, with the scenario's duration and request count (its defaults, --num-prompts)."""
    fields = {**flagged(StopConfig, a), "duration_s": scenario.duration_s, "max_requests": scenario.max_requests}
    # autostop: --duration auto and --warmup auto (a replay ignores --duration auto: its trace ends it)
    if a.get("warmup") == AUTO:
        fields.update(warmup_s=None, warmup_auto=True)
    if a.get("duration") == AUTO:
        if scenario.replay:
            for key in ("precision", "max_duration_s", "min_requests"):
                fields.pop(key, None)
        else:
            fields["duration_auto"] = True
    return StopConfig(**given(**fields, schedule_ends=True if scenario.replay else None))


def _check_measured(a: Params, loads: list[LoadPoint], stop: StopConfig, scenario: _Scenario) -> None:
    """A users point whose ramp-up and warm-up fill its whole duration would measure nothing; the
    message names where each part came from (a default the user never typed included)."""
    duration = stop.duration_s
    for load in loads:
        if isinstance(load, UsersLoad) and duration is not None and load.ramp_up_s + stop.warmup_s >= duration:
            parts = []
            if load.ramp_up_s:
                given_ramp = a.get("ramp_up") is not None
                why = (
                    ""
                    if given_ramp
                    else (
                        f": the default scenario's ({DEFAULT_USERS} users over {DEFAULT_RAMP_S:g}s, as neither --users "
                        "nor --rate was given)"
                        if scenario.default
                        else ": the default"
                    )
                )
                parts.append(f"--ramp-up {load.ramp_up_s:g}s{why}")
            if stop.warmup_s:
                parts.append(f"--warmup {stop.warmup_s:g}s" + ("" if a.get("warmup") is not None else ": the default"))
            raise UsageError(
                f"--duration {duration:g} must be longer than ramp-up + warmup "
                f"({load.ramp_up_s + stop.warmup_s:g}s; {', '.join(parts)}), or nothing is measured: "
                f"set a longer --duration, or a shorter --ramp-up/--warmup (e.g. --ramp-up 0)"
            )


def _sessions(a: Params) -> SessionConfig | None:
    """--multi-turn and its own flags (SessionConfig's): given without it, an error naming them."""
    values = flagged(SessionConfig, a)
    if not a.get("multi_turn"):
        if values:
            raise UsageError(
                f"{', '.join(flag_names(SessionConfig, values))} shape multi-turn sessions: add --multi-turn"
            )
        return None
    return SessionConfig(**values)


def _workers(a: Params) -> WorkersConfig | None:
    """--workers N (processes), with --ray or --ray-address as Ray actors."""
    fields = flagged(WorkersConfig, a)
    on_ray = bool(fields.get("ray")) or fields.get("ray_address") is not None
    if "cpus_per_worker" in fields and not on_ray:
        raise UsageError("--ray-cpus-per-worker sizes Ray actors: add --ray or --ray-address")
    return WorkersConfig(**fields) if fields else None


def _cost(a: Params) -> CostConfig | None:
    """--cost-per-hour (per GPU-hour) x --gpus; --gpus alone prices nothing: an error."""
    fields = flagged(CostConfig, a)
    if "usd_per_gpu_hour" not in fields:
        if fields:
            raise UsageError("--gpus counts the GPUs --cost-per-hour pays for: add --cost-per-hour USD")
        return None
    return CostConfig(**fields)


def _slo(text: str | None) -> SLOConfig | None:
    try:
        return parse_slo(text) if text else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _deadlines(text: str | None) -> DeadlinesConfig | None:
    """--deadlines 'ttft=100ms,tbt=50ms' (either may be left out: Etalon's default)."""
    if not text:
        return None
    fields: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, value = part.partition("=")
        if not eq or name.strip().lower() not in ("ttft", "tbt"):
            raise UsageError(
                f"--deadlines part {part!r}: write ttft=DURATION and/or tbt=DURATION, e.g. ttft=100ms,tbt=50ms"
            )
        try:
            seconds = parse_duration_s(value)
        except ValueError as exc:
            raise UsageError(f"--deadlines {name.strip()}: {exc}") from None
        if seconds <= 0:
            raise UsageError(f"--deadlines {name.strip()}: a deadline must be above 0, not {value.strip()!r}")
        fields[name.strip().lower() + "_s"] = seconds
    return DeadlinesConfig(**fields)


def _target(a: Params, backend: BackendConfig | None) -> TargetConfig:
    """The target flags; with a launched backend (no --url) --model is what the engine loads."""
    fields = flagged(TargetConfig, a)
    if backend and not a.get("url"):
        fields.pop("model", None)
    structure = given(response_format=a.get("response_format"), tools=a.get("tools"))  # parsed by the settings
    return TargetConfig(
        **fields, **structure, headers=_headers(a.get("header")), extra_body=_json_body(a.get("extra_body"))
    )


def _dataset(a: Params, small: bool) -> DatasetConfig:
    """The dataset flags; the embedded default scenario (``small``) sends short synthetic prompts."""
    fields = flagged(DatasetConfig, a)
    if small:
        fields["input_tokens"] = a.get("input_tokens") or DEFAULT_INPUT_TOKENS
        fields["output_tokens"] = a.get("output_tokens") or DEFAULT_OUTPUT_TOKENS
    return DatasetConfig(**fields)
