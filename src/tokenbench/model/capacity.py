"""`tokenbench capacity --predict MODEL`: the capacity search's own plan (capacity.CapacityPlan:
the saturating probe, then bracket and bisect) with each probe simulated (predict.py) instead of
sent: capacity.json and results.json as a real search writes them, in seconds."""

from __future__ import annotations

import time

from tokenbench.capacity import CapacitySettings, prepare
from tokenbench.config import RunConfig
from tokenbench.model.engine import Routing
from tokenbench.model.params import ServerModel
from tokenbench.model.predict import predict
from tokenbench.results.capacity import CapacityResult, Objective


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
    prepared = prepare(config, objectives, settings)
    predict(prepared.config, model, model_name, prepared.out, replicas, routing, plan=prepared.plan)
    result = prepared.finish()
    return result, time.perf_counter() - began
