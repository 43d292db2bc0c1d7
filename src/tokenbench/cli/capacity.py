"""`tokenbench capacity`: run's flags (cli/flags.py) but the load values, run's --slo and the
trace's, plus the search's own (CapacitySettings' fields, capacity/plan.py); flags -> RunConfig
(cli/run_flags.py), objectives and settings, then one call (capacity.search)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from tokenbench.capacity.plan import CapacitySettings
from tokenbench.cli.common import UsageError, err, exit_codes, validation_message
from tokenbench.cli.flags import RUN_FLAGS, FlagCommand, Option, Params, flag_of, given_fields, options, run_options
from tokenbench.cli.help import GroupedCommand
from tokenbench.config import LoadSweep, ReplayLoad, RunConfig
from tokenbench.config.flags import DATASET, OUTPUT, SEARCH, STOPPING, TARGET, TRACE
from tokenbench.results.capacity import Objective
from tokenbench.results.layout import CAPACITY

DEFAULT_DURATION_S = 20.0  # per probe, when neither --duration nor --max-requests is given

# The search's own options: CapacitySettings' fields (capacity/plan.py declares their flags and defaults).
SEARCH_OPTIONS = options(CapacitySettings)


def _shared(option: Option) -> bool:
    """run's flags but those the search sets itself (the probed value; a staged point's load is its own),
    run's --slo and --trials
    (the search's own) and a trace's (a trace replays its own schedule: no rate or users to search)."""
    if option.model is LoadSweep and option.field in ("users", "rates", "stages", "shape"):
        return False
    if option.model is RunConfig and option.field in ("slo", "trials"):  # the search's own --trials
        return False
    trace = option.flag is not None and option.flag.panel == TRACE
    return option.model is not ReplayLoad and not trace


OPTIONS = [*SEARCH_OPTIONS, *filter(_shared, run_options())]
FLAGS = {**RUN_FLAGS, **flag_of(SEARCH_OPTIONS)}


def capacity(
    ctx: typer.Context,
    slo: Annotated[
        str,
        typer.Option(
            help="Objectives over each point, all to be met: METRIC:STAT<=LIMIT (METRIC ttft, tpot, itl, e2e, "
            "queue; STAT mean, p50, p90, p95, p99) and errors<=PCT%, e.g. 'ttft:p90<=500ms,tpot:p90<=50ms,errors<=1%'.",
            rich_help_panel=SEARCH,
        ),
    ],
    predict: Annotated[
        Path | None,
        typer.Option(
            help="Search a model from `tokenbench model fit` instead of a server: every probe simulated (seconds).",
            rich_help_panel=SEARCH,
            metavar="MODEL",
        ),
    ] = None,
) -> None:
    """Find the highest load (req/s or users) whose point meets every objective of --slo: a
    saturating probe estimates the ceiling, then bracket and bisect to --tolerance. Every probe
    is a point of one run directory; the answer and the evidence go to capacity.json. A server
    that meets the SLO at no load is an answer too (exit 0)."""
    from tokenbench.common.procs import Interrupts

    Interrupts.install()
    config, objectives, settings = _settings(ctx.params)
    if predict is not None:  # the server model: the model's answer (cli/model.py)
        from tokenbench.cli.model import predicted_capacity
        from tokenbench.rundir import default_run_dir

        config = config.model_copy(update={"out_dir": config.out_dir or default_run_dir()})
        predicted_capacity(predict, config, objectives, settings, (config.backend.replicas if config.backend else 1))
        return
    _search(config, objectives, settings)


command = FlagCommand(capacity, OPTIONS)


class CapacityCommand(GroupedCommand):
    """``tokenbench capacity``: its --help shows the search's options and the groups a first search needs."""

    first = (SEARCH, TARGET, DATASET, STOPPING, OUTPUT)


def _settings(a: Params) -> tuple[RunConfig, list[Objective], CapacitySettings]:
    """The run's settings (with the probed load's template), the objectives and the search's
    settings; bad input raises, naming the flag to fix."""
    from tokenbench.capacity import parse_objectives
    from tokenbench.capacity.objectives import class_objectives
    from tokenbench.cli.run_flags import run_config

    if a.get("variable") not in (None, "rate", "users"):
        raise UsageError(f"--variable must be rate or users, got {a['variable']!r}")
    if a.get("dataset") == "trace":
        raise UsageError(
            "--dataset trace replays its own schedule: capacity searches a rate or users (tokenbench run replays)"
        )
    objectives = parse_objectives(a["slo"])
    try:
        settings = CapacitySettings(**given_fields(SEARCH_OPTIONS, a))
    except ValidationError as exc:
        raise UsageError(validation_message(exc, FLAGS)) from None
    template: dict[str, Any] = {**a, "slo": None, "users": None, "rate": None}
    template[settings.variable] = "1"  # the template; each probe sets its own
    if a.get("duration") is None and a.get("max_requests") is None:
        template["duration"] = DEFAULT_DURATION_S
    if a.get("stop_oversaturated") is None:  # autostop: a probe past capacity stops in seconds
        template["stop_oversaturated"] = True
    config = run_config(template)
    return config, objectives + class_objectives(config.mix), settings


def _search(config: RunConfig, objectives: list[Objective], settings: CapacitySettings) -> None:
    """Run it; a failure exits 3 (the server) or 2 (bad input), an interrupt with its signal's code."""
    from tokenbench.capacity import search
    from tokenbench.common.procs import Interrupts
    from tokenbench.rundir import default_run_dir

    config = config.model_copy(update={"out_dir": config.out_dir or default_run_dir()})
    run_dir = config.out_dir
    with exit_codes("interrupted before the search finished"):
        result = search(config, objectives, settings, console=err)
    err.print(f"capacity: {run_dir}/{CAPACITY}  results: {run_dir}/results.json")
    if result.stopped_by == "interrupted":
        err.print("[yellow]interrupted: the answer is what the probes so far showed[/]")
        err.print(result.answer)
        raise typer.Exit(Interrupts.exit_code())
    err.print(result.answer)
