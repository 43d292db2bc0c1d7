"""`tokenbench capacity --predict MODEL`: the capacity search's own plan (capacity.CapacityPlan:
the saturating probe, then bracket and bisect) with each probe simulated (predict.py) instead of
sent: capacity.json and results.json as a real search writes them, in seconds."""

from __future__ import annotations

import time

from ..capacity import CAPACITY_FILE, CapacityPlan, CapacitySettings
from ..capacity.objectives import goodput_slo
from ..config import RateLoad, RunConfig, UsersLoad
from ..errors import BadInput
from ..results.capacity import CapacityResult, Objective
from ..rundir import default_run_dir, write_json
from .engine import Routing
from .params import ServerModel
from .predict import predict


def search(
    model: ServerModel,
    model_name: str,
    config: RunConfig,
    objectives: list[Objective],
    settings: CapacitySettings,
    replicas: int = 1,
    routing: Routing = "round-robin",
) -> tuple[CapacityResult, float]:
    """The search against the model; returns the answer and the seconds it took."""
    began = time.perf_counter()
    template = config.loads[0]
    kind = RateLoad if settings.variable == "rate" else UsersLoad
    if not isinstance(template, kind):
        raise BadInput(
            f"--variable {settings.variable} searches a {settings.variable} load, not a {template.kind} load"
        )
    out = config.out_dir or default_run_dir()

    def written(result: CapacityResult) -> None:
        write_json(out / CAPACITY_FILE, result.to_json())

    plan = CapacityPlan(template, objectives, settings, on_change=written)
    config = config.model_copy(
        update={"loads": [plan.saturating_load()], "slo": goodput_slo(objectives), "out_dir": out}
    )
    predict(config, model, model_name, out, replicas, routing, plan=plan)
    result = plan.result()
    written(result)
    return result, time.perf_counter() - began
