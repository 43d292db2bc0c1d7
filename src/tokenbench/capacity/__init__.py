"""Capacity search: the highest load (request rate or users) whose point meets every objective.

``search(config, objectives, settings)`` runs it as one run (runner.run with a ``CapacityPlan``):
every probe is a full point in one run directory (records.jsonl, results.json: ``tokenbench
report`` and ``recompute`` read it as any run), and capacity.json beside them holds the answer
and the evidence, rewritten after every point. The parts: objectives.py (``--slo``'s syntax and
checks), decide.py (the next value, pure), plan.py (the points and the evidence).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tokenbench.capacity.objectives import ObjectiveError, goodput_slo, parse_objectives
from tokenbench.capacity.plan import CapacityPlan, CapacitySettings
from tokenbench.config import RateLoad, RunConfig, UsersLoad
from tokenbench.errors import BadInput
from tokenbench.results.capacity import CapacityResult, Objective
from tokenbench.results.layout import CAPACITY

# pooling APIs: the objectives only a streamed reply has (a pooling answer is whole)
STREAMED_OBJECTIVES = ("ttft", "tpot", "itl")

if TYPE_CHECKING:
    from rich.console import Console

    from tokenbench.backends.server import ServerUnderTest

__all__ = [
    "CapacityPlan",
    "CapacitySettings",
    "ObjectiveError",
    "Prepared",
    "parse_objectives",
    "prepare",
    "search",
    "CAPACITY",
]


def search(
    config: RunConfig,
    objectives: list[Objective],
    settings: CapacitySettings,
    server: ServerUnderTest | None = None,
    console: Console | None = None,
) -> CapacityResult:
    """Search ``config``'s target for its capacity under ``objectives``: ``config.loads[0]`` is
    the probed load (a rate or a users load, the kind ``settings.variable`` names; its rate or
    users are replaced by each probe's value). ``server``: a server the caller holds (as
    runner.run). The run directory is ``config.out_dir`` (default runs/<timestamp>); the answer
    is returned and written there as capacity.json, after every point."""
    from tokenbench.run import run

    streamed = [o.name for o in objectives if o.name in STREAMED_OBJECTIVES]
    if config.target.pooling and streamed:  # pooling APIs: a pooling answer has no stream
        raise ObjectiveError(
            f"--slo {streamed[0]}: --api {config.target.api} answers whole, with no {streamed[0]}: "
            "bound e2e (send to the answer), queue or errors instead"
        )
    prepared = prepare(config, objectives, settings)
    outcome = run(prepared.config, console, server, plan=prepared.plan)
    return prepared.finish(interrupted=outcome.interrupted)


@dataclass(frozen=True)
class Prepared:
    """A search ready to run: its plan (capacity.json rewritten after every point) and the run's
    config (the saturating probe as its load, the objectives' goodput SLO, the run directory)."""

    plan: CapacityPlan
    config: RunConfig
    out: Path

    def finish(self, interrupted: bool = False) -> CapacityResult:
        """The answer once the run ended, written as capacity.json."""
        result = self.plan.result(interrupted=interrupted)
        _write(self.out, result)
        return result


def prepare(config: RunConfig, objectives: list[Objective], settings: CapacitySettings) -> Prepared:
    """The plan and the run's config for a search of ``config.loads[0]``: what a live search
    (``search``) and a predicted one (model/capacity.py) run the same way."""
    from tokenbench.rundir import default_run_dir

    template = _template(config, objectives, settings)
    out = config.out_dir or default_run_dir()
    plan = CapacityPlan(template, objectives, settings, on_change=lambda result: _write(out, result))
    # The run's own loads: the saturating probe (a launched engine sizes its slots from them);
    # per-request goodput counts the objectives' ttft/tpot/e2e limits.
    config = config.model_copy(
        update={"loads": [plan.saturating_load()], "slo": goodput_slo(objectives), "out_dir": out}
    )
    return Prepared(plan, config, out)


def _write(out: Path, result: CapacityResult) -> None:
    from tokenbench.rundir import write_json

    write_json(out / CAPACITY, result.to_json())


def _template(config: RunConfig, objectives: list[Objective], settings: CapacitySettings) -> RateLoad | UsersLoad:
    """The probed load, checked: its kind is the variable's; with a client-side concurrency cap,
    a queue objective (TTFT counts from the send: the wait for a slot would go unjudged)."""
    load = config.loads[0]
    kind = RateLoad if settings.variable == "rate" else UsersLoad
    if not isinstance(load, kind):
        raise BadInput(f"--variable {settings.variable} searches a {settings.variable} load, not a {load.kind} load")
    # a session's latency counts from its scheduled start, its calls' waits for a slot included
    judged = ("queue", "session")
    if (
        isinstance(load, RateLoad)
        and load.max_concurrency is not None
        and all(o.name not in judged for o in objectives)
    ):
        raise BadInput(
            "--max-concurrency holds requests on the client, and TTFT counts from the send: "
            "add a queue objective to --slo (e.g. queue:p90<=100ms) or drop --max-concurrency"
        )
    return load
