"""Capacity search: the highest load (request rate or users) whose point meets every objective.

``search(config, objectives, settings)`` runs it as one run (runner.run with a ``CapacityPlan``):
every probe is a full point in one run directory (records.jsonl, results.json: ``tokenbench
report`` and ``recompute`` read it as any run), and capacity.json beside them holds the answer
and the evidence, rewritten after every point. The parts: objectives.py (``--slo``'s syntax and
checks), decide.py (the next value, pure), plan.py (the points and the evidence).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import RateLoad, RunConfig, UsersLoad
from ..errors import BadInput
from ..results.capacity import CAPACITY_FILE, CapacityResult, Objective
from .objectives import ObjectiveError, goodput_slo, parse_objectives
from .plan import CapacityPlan, CapacitySettings

# issue 23 embeddings: the objectives only a streamed reply has (a pooling answer is whole)
STREAMED_OBJECTIVES = ("ttft", "tpot", "itl")

if TYPE_CHECKING:
    from rich.console import Console

    from ..backends.server import ServerUnderTest

__all__ = ["CapacityPlan", "CapacitySettings", "ObjectiveError", "parse_objectives", "search", "CAPACITY_FILE"]


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
    from ..rundir import default_run_dir, write_json
    from ..runner import run

    streamed = [o.name for o in objectives if o.name in STREAMED_OBJECTIVES]
    if config.target.pooling and streamed:  # issue 23 embeddings: a pooling answer has no stream
        raise ObjectiveError(
            f"--slo {streamed[0]}: --api {config.target.api} answers whole, with no {streamed[0]}: "
            "bound e2e (send to the answer), queue or errors instead"
        )
    template = _template(config, objectives, settings)
    out = config.out_dir or default_run_dir()

    def written(result: CapacityResult) -> None:
        write_json(out / CAPACITY_FILE, result.to_json())

    plan = CapacityPlan(template, objectives, settings, on_change=written)
    # The run's own loads: the saturating probe (a launched engine sizes its slots from them);
    # per-request goodput counts the objectives' ttft/tpot/e2e limits.
    config = config.model_copy(
        update={"loads": [plan.saturating_load()], "slo": goodput_slo(objectives), "out_dir": out}
    )
    outcome = run(config, console, server, plan=plan)
    result = plan.result(interrupted=outcome.interrupted)
    written(result)
    return result


def _template(config: RunConfig, objectives: list[Objective], settings: CapacitySettings) -> RateLoad | UsersLoad:
    """The probed load, checked: its kind is the variable's; with a client-side concurrency cap,
    a queue objective (TTFT counts from the send: the wait for a slot would go unjudged)."""
    load = config.loads[0]
    kind = RateLoad if settings.variable == "rate" else UsersLoad
    if not isinstance(load, kind):
        raise BadInput(f"--variable {settings.variable} searches a {settings.variable} load, not a {load.kind} load")
    if isinstance(load, RateLoad) and load.max_concurrency is not None and all(o.name != "queue" for o in objectives):
        raise BadInput(
            "--max-concurrency holds requests on the client, and TTFT counts from the send: "
            "add a queue objective to --slo (e.g. queue:p90<=100ms) or drop --max-concurrency"
        )
    return load
