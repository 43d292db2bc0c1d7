"""`tokenbench capacity`: run's own options (shared, not copied: the command's signature is built
from `run`'s, without --users, --rate and run's --slo) plus the search's; flags -> RunConfig
(cli/run_flags.py), objectives and settings, then one call (capacity.search)."""

from __future__ import annotations

import inspect
from typing import Annotated, Any, get_type_hints

import typer
from pydantic import ValidationError

from . import run as run_cli
from .common import UsageError, err, exit_codes, fail, validation_message

# run's options that the search sets itself (the probed value) or that mean another thing here;
# a trace replays its own schedule (no rate or users to search): its flags are run's alone.
_NOT_SHARED = {
    "ctx",
    "users",
    "rate",
    "slo",
    *("replay_speed", "replay_start", "replay_end", "replay_jitter"),
    *("trace_format", "block_size", "trace_model", "trace_log_type"),
}
DEFAULT_DURATION_S = 20.0  # per probe, when neither --duration nor --max-requests is given


def capacity(
    ctx: typer.Context,
    slo: Annotated[
        str,
        typer.Option(
            help="Objectives over each point, all to be met: METRIC:STAT<=LIMIT (METRIC ttft, tpot, itl, e2e, "
            "queue; STAT mean, p50, p90, p95, p99) and errors<=PCT%, e.g. 'ttft:p90<=500ms,tpot:p90<=50ms,errors<=1%'.",
            rich_help_panel="Capacity search",
        ),
    ],
    variable: Annotated[
        str,
        typer.Option(
            help="The load searched: rate (open loop, req/s) or users (closed loop).", rich_help_panel="Capacity search"
        ),
    ] = "rate",
    tolerance: Annotated[
        float,
        typer.Option(
            help="Stop when (lowest failing - highest passing) / highest passing is at most this.",
            rich_help_panel="Capacity search",
        ),
    ] = 0.05,
    trials: Annotated[
        int,
        typer.Option(
            help="Points per probed value; the verdict is on the trial mean.", rich_help_panel="Capacity search"
        ),
    ] = 1,
    max_probes: Annotated[
        int,
        typer.Option(
            help="Probe budget: load values probed after the saturating probe.", rich_help_panel="Capacity search"
        ),
    ] = 8,
    saturate_users: Annotated[
        int,
        typer.Option(
            help="Users of the saturating probe (closed loop, no think time) that estimates the ceiling.",
            rich_help_panel="Capacity search",
        ),
    ] = 32,
    **shared: Any,
) -> None:
    """Find the highest load (req/s or users) whose point meets every objective of --slo: a
    saturating probe estimates the ceiling, then bracket and bisect to --tolerance. Every probe
    is a point of one run directory; the answer and the evidence go to capacity.json. A server
    that meets the SLO at no load is an answer too (exit 0)."""
    from ..procs import Interrupts

    Interrupts.install()
    config, objectives, settings = _settings(ctx.params)
    _search(config, objectives, settings)


def _settings(params: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The run's settings (with the probed load's template), the objectives and the search's
    settings, or exit 2 naming the flag to fix."""
    from ..capacity import CapacitySettings, ObjectiveError, parse_objectives
    from .run_flags import run_config

    if params["variable"] not in ("rate", "users"):
        fail(f"--variable must be rate or users, got {params['variable']!r}", 2)
    if params["dataset"] == "trace":
        fail("--dataset trace replays its own schedule: capacity searches a rate or users (tokenbench run replays)", 2)
    a = {**params, "slo": None, "users": None, "rate": None}
    a["users" if params["variable"] == "users" else "rate"] = "1"  # the template; each probe sets its own
    if a["duration"] is None and a["max_requests"] is None:
        a["duration"] = DEFAULT_DURATION_S
    try:
        objectives = parse_objectives(params["slo"])
        settings = CapacitySettings(
            variable=params["variable"],
            tolerance=params["tolerance"],
            trials=params["trials"],
            max_probes=params["max_probes"],
            saturate_users=params["saturate_users"],
        )
        return run_config(a), objectives, settings
    except (UsageError, ObjectiveError) as exc:
        fail(str(exc), 2)
    except ValidationError as exc:
        fail(validation_message(exc), 2)


def _search(config: Any, objectives: Any, settings: Any) -> None:
    """Run it; a failure exits 3 (the server) or 2 (bad input), an interrupt with its signal's code."""
    from ..capacity import CAPACITY_FILE, search
    from ..procs import Interrupts
    from ..rundir import default_run_dir

    config = config.model_copy(update={"out_dir": config.out_dir or default_run_dir()})
    run_dir = config.out_dir
    with exit_codes("interrupted before the search finished"):
        result = search(config, objectives, settings, console=err)
    err.print(f"capacity: {run_dir}/{CAPACITY_FILE}  results: {run_dir}/results.json")
    if result.stopped_by == "interrupted":
        err.print("[yellow]interrupted: the answer is what the probes so far showed[/]")
        err.print(result.answer)
        raise typer.Exit(Interrupts.exit_code())
    err.print(result.answer)


def _shared_signature() -> None:
    """capacity's signature: its own options, then run's (resolved annotations, so Typer reads
    them as it reads run's) except those the search sets."""
    own = inspect.signature(capacity, eval_str=True)
    mine = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    names = {p.name for p in mine}
    theirs = [
        p
        for p in inspect.signature(run_cli.run, eval_str=True).parameters.values()
        if p.name not in _NOT_SHARED | names
    ]
    hints = {**get_type_hints(run_cli.run, include_extras=True), **get_type_hints(capacity, include_extras=True)}
    mine_kw = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) if p.name != "ctx" else p for p in mine]
    params = mine_kw + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in theirs]
    capacity.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    capacity.__annotations__ = {p.name: hints[p.name] for p in params} | {"return": None}


_shared_signature()
