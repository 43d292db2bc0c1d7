"""What every command shares: the error console, the one error formatter, flag parsing helpers,
and the engine knobs' options (shared by `run` and `backends show`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, NoReturn, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console

err = Console(stderr=True, soft_wrap=True)

# Settings fields as the flags that set them, so validation errors name the flag to fix.
_FLAGS = {
    "DatasetConfig.name": "--dataset",
    "DatasetConfig.input_tokens": "--input-tokens",
    "DatasetConfig.output_tokens": "--output-tokens",
    "DatasetConfig.num_prompts": "--num-prompts",
    "LoadSweep.users": "--users",
    "LoadSweep.rates": "--rate",
    "LoadSweep.ramp_up_s": "--ramp-up",
    "LoadSweep.think_time_s": "--think-time",
    "LoadSweep.arrival": "--arrival",
    "LoadSweep.burstiness": "--burstiness",
    "LoadSweep.max_concurrency": "--max-concurrency",
    "LoadSweep": "--users/--rate",
    "StopConfig.drain_timeout_s": "--drain-timeout",
    "TargetConfig.request_timeout_s": "--timeout",
    "TargetConfig.read_timeout_s": "--read-timeout",
    "UsersLoad.users": "--users",
    "UsersLoad.ramp_up_s": "--ramp-up",
    "UsersLoad.think_time_s": "--think-time",
    "RateLoad.rate_per_s": "--rate",
    "RateLoad.arrival": "--arrival",
    "RateLoad.burstiness": "--burstiness",
    "RateLoad.max_concurrency": "--max-concurrency",
    "ReplayLoad.speed": "--replay-speed",
    "ReplayLoad.start_s": "--replay-start",
    "ReplayLoad.end_s": "--replay-end",
    "ReplayLoad.jitter_s": "--replay-jitter",
    "ReplayLoad.max_concurrency": "--max-concurrency",
    "SessionConfig.turns": "--turns",
    "SessionConfig.turn_think_time_s": "--turn-think-time",
    "SessionConfig.turn_think_dist": "--turn-think-dist",
    "SessionConfig.max_history_tokens": "--max-history-tokens",
    "SessionConfig.header": "--session-header",
    "DatasetConfig.trace_format": "--trace-format",
    "RunConfig.prefix_cache": "--prefix-cache",
    "DatasetConfig.block_size": "--block-size",
    "DatasetConfig.prefix_groups": "--prefix-groups",
    "DatasetConfig.prefix_tokens": "--prefix-tokens",
    "DatasetConfig.prefix_skew": "--prefix-skew",
    "CapacitySettings.tolerance": "--tolerance",
    "CapacitySettings.trials": "--trials",
    "CapacitySettings.max_probes": "--max-probes",
    "CapacitySettings.saturate_users": "--saturate-users",
    "StopConfig.duration_s": "--duration",
    "StopConfig.max_requests": "--max-requests",
    "StopConfig.warmup_s": "--warmup",
    "TargetConfig.url": "--url",
    "TargetConfig.api": "--api",
    "RunConfig.window_s": "--window",
    "EngineKnobs.max_num_seqs": "--max-num-seqs",
    "EngineKnobs.kv_memory": "--kv-memory",
    "EngineKnobs.max_model_len": "--max-model-len",
    "EngineKnobs.tensor_parallel": "--tensor-parallel",
    "BackendConfig.port": "--engine-port",
    "BackendConfig.metrics_interval_s": "--metrics-interval",
    "BackendConfig.ready_timeout_s": "--ready-timeout",
    "CostConfig.usd_per_gpu_hour": "--cost-per-hour",
    "CostConfig.gpus": "--gpus",
}


class UsageError(Exception):
    """Bad input: the message names what to change."""


def fail(message: str, code: int) -> NoReturn:
    """The one way a command reports bad input or a failure: a red line (credentials masked), then
    the exit code (2: bad input, 3: the server)."""
    from ..redact import mask_text

    err.print(f"[bold red]error:[/] {mask_text(message)}")
    raise typer.Exit(code)


def validation_message(exc: ValidationError) -> str:
    """A pydantic error as the flags to fix."""
    parts = []
    for e in exc.errors():
        field = ".".join(str(x) for x in e["loc"])
        flag = _FLAGS.get(f"{exc.title}.{field}" if field else exc.title, field or exc.title)
        parts.append(f"{flag}: {e['msg'].removeprefix('Value error, ')}")
    return "invalid settings: " + "; ".join(parts)


def given(**values: Any) -> dict[str, Any]:
    """The options the user gave: None means not given, so the settings' own default applies
    (pydantic holds the only defaults; the options default to None)."""
    return {k: v for k, v in values.items() if v is not None}


M = TypeVar("M", bound=BaseModel)


def default(model: type[M], field: str) -> str:
    """`[default: X]` for an option's help, read from the settings model that holds it."""
    return f" \\[default: {model.model_fields[field].default}]"  # escaped: rich would read [..] as markup


def numbers(text: str | None, flag: str, cast: Any = float) -> list[Any]:
    if text is None:
        return []
    try:
        values = [cast(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"{flag} takes a comma-separated list of numbers, got {text!r}") from None
    if not values:
        raise UsageError(f"{flag} is empty")
    return values


@contextlib.contextmanager
def exit_codes(interrupted: str) -> Iterator[None]:
    """A benchmark's failures as exit codes: 3 the server (unreachable, did not start), 2 bad
    input, 1 every worker lost (--workers); an interrupt before the work finished says ``interrupted`` and exits with its signal's
    code (130, 143): what was measured is on disk."""
    from ..backends import BackendError
    from ..clients.stream import TargetUnreachable
    from ..procs import Interrupts
    from ..workers.pool import AllWorkersLost

    try:
        yield
    except (TargetUnreachable, BackendError) as exc:
        fail(str(exc), 3)
    except (FileNotFoundError, FileExistsError, ValueError) as exc:
        fail(str(exc), 2)
    except AllWorkersLost as exc:
        fail(f"{exc}; what was measured is on disk", 1)
    except KeyboardInterrupt:
        err.print(f"[yellow]{interrupted}; what was measured is on disk[/]")
        raise typer.Exit(Interrupts.exit_code()) from None
