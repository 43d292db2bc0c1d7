"""capacity.json as types: the answer of a capacity search (``CapacityResult``), the objectives it
was searched under (``Objective``), every probe and every decision, and the figures at the answer.

Units: an objective's ``limit``, ``measured`` and ``margin`` are in seconds for latencies and a
fraction of requests (0.01 = 1 %) for ``errors``; ``margin = limit - measured`` (>= 0 passes).
``schemas/capacity.schema.json`` is generated from these types (``python -m tokenbench.results``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import SerializerFunctionWrapHandler, model_serializer

from tokenbench.common.frozen import FrozenModel
from tokenbench.results.base import Number
from tokenbench.results.trials import TrialStat

CAPACITY_SCHEMA_VERSION = 1

Variable = Literal["rate", "users"]
ObjectiveName = Literal["ttft", "tpot", "itl", "e2e", "queue", "session", "errors"]
ObjectiveStat = Literal["mean", "p50", "p90", "p95", "p99", "fraction"]
# Why a search ended: the gap reached the tolerance; the probe budget was spent; the lowest load
# tried failed (no load meets the SLO); loads far above the ceiling still passed; the saturating
# probe completed nothing (no ceiling to start from); the run was interrupted.
StoppedBy = Literal["tolerance", "budget", "no_passing", "all_passing", "no_ceiling", "interrupted"]


class Objective(FrozenModel):
    """One objective of ``--slo``: ``stat`` of ``name`` over a point <= ``limit`` (METRICS.md)."""

    name: ObjectiveName
    stat: ObjectiveStat  # "fraction" for errors
    limit: Number  # seconds, or a fraction of requests for errors
    # routing: a workload mix class's own objective, measured on its by_class figures
    # (absent from capacity.json when None: a search without classes keeps its shape)
    request_class: str | None = None

    @model_serializer(mode="wrap")
    def _without_class(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("request_class") is None:
            data.pop("request_class", None)
        return data

    def label(self) -> str:
        """'ttft p90 ≤ 500 ms', 'errors ≤ 1%' ('ttft p90 ≤ 500 ms [high]' for a class's)."""
        own = f" [{self.request_class}]" if self.request_class is not None else ""
        if self.name == "errors":
            return f"errors ≤ {self.limit * 100:g}%{own}"
        return f"{self.name} {self.stat} ≤ {show_seconds(self.limit)}{own}"


class ObjectiveCheck(Objective):
    """An objective at one probe: the measured value (a trial mean over a value's trials),
    ``margin = limit - measured``; None measured (nothing to measure it on) fails."""

    measured: Number | None
    margin: Number | None
    passed: bool

    def shown(self) -> str:
        """'ttft p90 0.83 s', 'errors 4%'."""
        if self.measured is None:
            return f"{self.name} {self.stat} not measured"
        if self.name == "errors":
            return f"errors {self.measured * 100:.3g}%"
        return f"{self.name} {self.stat} {self.measured:.3g} s"


class Probe(FrozenModel):
    """One point of the run directory at one load value and trial (0-based)."""

    value: Number
    trial: int
    point_index: int
    requests: int  # the point's window population (a verdict on few requests is a weak one)
    passed: bool  # this trial alone (the decision is the trial mean's: ``decisions``)
    objectives: list[ObjectiveCheck]


class Decision(FrozenModel):
    """A load value's verdict over its trials: each objective on the trial mean of its measure."""

    value: Number
    passed: bool
    point_indices: list[int]
    objectives: list[ObjectiveCheck]
    # autostop: True when a trial of this value was stopped over-saturated (its backlog grew without
    # bound), which fails the value whatever its objectives measured; absent before it existed
    over_saturated: bool | None = None


class Ceiling(FrozenModel):
    """The saturating probe (a closed loop of ``users`` users) and the first upper guess it gives:
    rate: its requests/s; users: ceil(requests/s x its shortest E2E), Little's law at the unqueued
    service time."""

    users: int
    point_index: int
    requests_per_s: Number | None
    min_e2e_s: Number | None
    estimate: Number | None  # None: it completed nothing


class AtAnswer(FrozenModel):
    """The figures at ``max_passing`` over its trials (mean and 95 % CI)."""

    value: Number
    requests_per_s: TrialStat
    goodput_per_s: TrialStat  # requests meeting every per-request limit of the objectives
    output_tokens_per_s: TrialStat
    usd_per_million_output_tokens: Number | None = (
        None  # priced runs (--cost-per-hour): USD/h / 3600 / mean tok/s x 1e6
    )


class CapacityResult(FrozenModel):
    """capacity.json: the highest load that met every objective, the lowest that failed, and the
    evidence (every probe and decision)."""

    schema_version: int = CAPACITY_SCHEMA_VERSION
    variable: Variable
    max_passing: Number | None
    max_rate_per_s: Number | None = None  # variable rate: max_passing
    max_users: int | None = None  # variable users: max_passing
    min_failing: Number | None
    tolerance: Number
    trials: int
    max_probes: int
    slo: list[Objective]
    ceiling: Ceiling | None
    probes: list[Probe]
    decisions: list[Decision]
    at_answer: AtAnswer | None
    stopped_by: StoppedBy | None  # None while the search goes on
    answer: str  # the console's last line

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def show_seconds(seconds: float) -> str:
    """A limit as written: milliseconds under a second ('500 ms'), else seconds ('2 s')."""
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def capacity_schema() -> dict[str, Any]:
    """The JSON Schema of capacity.json, as committed in schemas/capacity.schema.json."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://tokenbench.dev/schemas/capacity.schema.json",
        **CapacityResult.model_json_schema(),
    }
