"""`tokenbench run`'s options -> RunConfig: the embedded default scenario, the load sweep and its
stop, the target, the dataset. Only what was given is passed on (the settings hold the defaults)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import (
    BackendConfig,
    DatasetConfig,
    DeadlinesConfig,
    LoadPoint,
    LoadSweep,
    ReplayLoad,
    RunConfig,
    SessionConfig,
    SLOConfig,
    StopConfig,
    TargetConfig,
    UsersLoad,
    WorkersConfig,
)
from ..cost import CostConfig
from ..units import parse_duration_s, parse_slo
from .common import UsageError, given, numbers
from .engine import backend_config

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


def _json_body(text: str | None) -> dict:
    from ..vllm_flags import FlagError, _json_object

    try:
        return _json_object(text) if text is not None else {}
    except FlagError as exc:
        raise UsageError(str(exc)) from None


# --replay-* flags by their ReplayLoad fields: given without --dataset trace, an error naming them.
_REPLAY_FLAGS = {
    "replay_speed": "speed",
    "replay_start": "start_s",
    "replay_end": "end_s",
    "replay_jitter": "jitter_s",
}
# The trace's own flags (DatasetConfig fields), equally meaningless without a trace.
_TRACE_FLAGS = ("trace_format", "block_size", "trace_model", "trace_log_type")


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


def run_config(a: dict[str, Any]) -> RunConfig:
    """`tokenbench run`'s options (by name; None: not given) -> RunConfig. Only what was given is
    passed on: every other value is the settings' own default (config.py)."""
    scenario = _scenario(a)
    loads = _loads(a, scenario)
    stop = _stop(a, scenario)
    _check_measured(loads, stop)
    slo = _slo(a["slo"])
    small = scenario.default and a["url"] is None and a["backend"] is None
    backend = backend_config(a)
    return RunConfig(
        **given(
            backend=backend,
            target=_target(a, backend),
            loads=loads,
            stop=stop,
            dataset=_dataset(a, small),
            slo=slo,
            deadlines=_deadlines(a.get("deadlines")),
            seed=a["seed"],
            window_s=a["window"],
            out_dir=a["out"],
            live=a["live"],
            keep_text=a["keep_text"],
            sessions=_sessions(a),
            prefix_cache=a.get("prefix_cache"),
            cost=_cost(a),
            workers=_workers(a),
        )
    )


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _scenario(a: dict[str, Any]) -> _Scenario:
    users, rates = numbers(a["users"], "--users", int), numbers(a["rate"], "--rate")
    duration, max_requests, ramp_up = a["duration"], a["max_requests"], a["ramp_up"]
    if a["dataset"] == "trace":
        # the flags that shape another schedule: a trace is its own
        other = [_flag(k) for k in ("users", "rate", "ramp_up", "think_time", "arrival", "burstiness") if a.get(k)]
        if other:
            raise UsageError(f"--dataset trace replays the trace's own schedule: drop {' and '.join(other)}")
        return _Scenario([], [], None, duration, max_requests, default=False, replay=True)
    stray = [_flag(k) for k in (*_REPLAY_FLAGS, *_TRACE_FLAGS) if a.get(k) is not None]
    if stray:
        raise UsageError(f"{', '.join(stray)} need a trace to replay: add --dataset trace --dataset-path FILE")
    if a["num_prompts"] is not None and duration is None and max_requests is None:
        max_requests = a["num_prompts"]  # vllm bench serve's meaning: N prompts, each sent once
        if a.get("multi_turn"):  # N conversations: every turn of each (synthetic's count is known)
            if not a.get("turns"):
                raise UsageError(
                    "--multi-turn --num-prompts N: set --duration or --max-requests (turns per conversation vary)"
                )
            max_requests *= a["turns"]
    default_scenario = not users and not rates
    if default_scenario:
        users, ramp_up = [DEFAULT_USERS], ramp_up if ramp_up else DEFAULT_RAMP_S
        if duration is None and max_requests is None:
            duration = DEFAULT_DURATION_S
    return _Scenario(users, rates, ramp_up, duration, max_requests, default_scenario)


def _loads(a: dict[str, Any], scenario: _Scenario) -> list[LoadPoint]:
    if scenario.replay:
        replay = {field: a.get(flag) for flag, field in _REPLAY_FLAGS.items()}
        return [ReplayLoad(**given(**replay, max_concurrency=a["max_concurrency"]))]
    sweep = LoadSweep(
        **given(
            users=scenario.users or None,
            rates=scenario.rates or None,
            ramp_up_s=scenario.ramp_up_s,
            think_time_s=a["think_time"],
            arrival=a["arrival"],
            burstiness=a["burstiness"],
            max_concurrency=a["max_concurrency"],
        )
    )
    return sweep.points()


def _stop(a: dict[str, Any], scenario: _Scenario) -> StopConfig:
    return StopConfig(
        **given(
            duration_s=scenario.duration_s,
            max_requests=scenario.max_requests,
            schedule_ends=True if scenario.replay else None,
            warmup_s=a["warmup"],
            drain_timeout_s=a["drain_timeout"],
        )
    )


def _check_measured(loads: list[LoadPoint], stop: StopConfig) -> None:
    """A users point whose ramp-up and warm-up fill its whole duration would measure nothing."""
    duration = stop.duration_s
    for load in loads:
        if isinstance(load, UsersLoad) and duration is not None and load.ramp_up_s + stop.warmup_s >= duration:
            raise UsageError(
                f"--duration {duration:g} must be longer than --ramp-up + --warmup "
                f"({load.ramp_up_s + stop.warmup_s:g}s), or nothing is measured"
            )


# --multi-turn's own flags (SessionConfig fields): given without it, an error naming them.
_SESSION_FLAGS = {
    "turns": "turns",
    "turn_think_time": "turn_think_time_s",
    "turn_think_dist": "turn_think_dist",
    "max_history_tokens": "max_history_tokens",
    "session_header": "header",
}


def _sessions(a: dict[str, Any]) -> SessionConfig | None:
    values = {field: a.get(flag) for flag, field in _SESSION_FLAGS.items()}
    if not a.get("multi_turn"):
        stray = [_flag(flag) for flag, field in _SESSION_FLAGS.items() if values[field] is not None]
        if stray:
            raise UsageError(f"{', '.join(stray)} shape multi-turn sessions: add --multi-turn")
        return None
    return SessionConfig(**given(**values))


def _workers(a: dict[str, Any]) -> WorkersConfig | None:
    """--workers N (processes), with --ray or --ray-address as Ray actors."""
    ray_cpus = a.get("ray_cpus_per_worker")
    on_ray = bool(a.get("ray")) or a.get("ray_address") is not None
    if ray_cpus is not None and not on_ray:
        raise UsageError("--ray-cpus-per-worker sizes Ray actors: add --ray or --ray-address")
    fields = given(count=a.get("workers"), ray=a.get("ray"), ray_address=a.get("ray_address"), cpus_per_worker=ray_cpus)
    return WorkersConfig(**fields) if fields else None


def _cost(a: dict[str, Any]) -> CostConfig | None:
    """--cost-per-hour (per GPU-hour) x --gpus; --gpus alone prices nothing: an error."""
    price, gpus = a.get("cost_per_hour"), a.get("gpus")
    if price is None:
        if gpus is not None:
            raise UsageError("--gpus counts the GPUs --cost-per-hour pays for: add --cost-per-hour USD")
        return None
    return CostConfig(**given(usd_per_gpu_hour=price, gpus=gpus))


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


def _target(a: dict[str, Any], backend: BackendConfig | None) -> TargetConfig:
    return TargetConfig(
        **given(
            url=a["url"],
            model=None if (backend and not a["url"]) else a["model"],
            api=a["api"],
            api_key_env=a["api_key_env"],
            request_timeout_s=a["timeout"],
            read_timeout_s=a["read_timeout"],
            ignore_eos=a["ignore_eos"],
            continuous_usage=a.get("continuous_usage"),
            headers=_headers(a["header"]),
            extra_body=_json_body(a["extra_body"]),
        )
    )


def _dataset(a: dict[str, Any], small: bool) -> DatasetConfig:
    """The dataset flags; the embedded default scenario (``small``) sends short synthetic prompts."""
    return DatasetConfig(
        **given(
            name=a["dataset"],
            path=a["dataset_path"],
            input_tokens=a["input_tokens"] or (DEFAULT_INPUT_TOKENS if small else None),
            output_tokens=a["output_tokens"] or (DEFAULT_OUTPUT_TOKENS if small else None),
            num_prompts=a["num_prompts"],
            min_prompt_tokens=a["min_prompt_tokens"],
            max_prompt_tokens=a["max_prompt_tokens"],
            system_prompt=a["system_prompt"],
            unique_prefix=a["unique_prefix"],
            tokenizer=a["tokenizer"],
            **{k: a.get(k) for k in _TRACE_FLAGS},
            **{k: a.get(k) for k in ("prefix_groups", "prefix_tokens", "prefix_skew")},
        )
    )
