"""Results as types: results.json (``run``: ``RunResults``, ``PointResult`` and their parts),
experiment.json (``experiment``: ``Experiment``, its server, cell and aggregate rows) and a
metric over trials (``trials``: ``TrialStat``, ``mean_ci95``); the JSON Schema committed in
``schemas/results.schema.json`` is made from them (``python -m tokenbench.results`` rewrites it).

Import from here: ``from tokenbench.results import RunResults, PointResult, mean_ci95``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenbench.results.base import Number
from tokenbench.results.client import Client, WindowHealth, WorkerClock, WorkerLoss, Workers
from tokenbench.results.cost import Cost, Energy
from tokenbench.results.experiment import AggregateRow, CapacityRow, CellRow, Experiment, ServerRow, TrialsRow
from tokenbench.results.failures import ErrorSeen, StoppedEarly, point_failed
from tokenbench.results.run import (
    SCHEMA_VERSION,
    CallGroup,
    Clock,
    ComputedBy,
    Concurrency,
    CriticalPath,
    Distribution,
    Fluidity,
    Gauge,
    Gpu,
    Images,
    Load,
    MatchedTtft,
    PointResult,
    Pooling,
    Populations,
    PositionAcceptance,
    Predicted,
    ProgramCounts,
    ProgramStats,
    Reasoning,
    Requests,
    RunResults,
    Server,
    ServerCpu,
    ServerSpeculation,
    ServerTimingStats,
    ServerVsClient,
    SessionCounts,
    Slo,
    Span,
    SpeculationStats,
    StageResult,
    Target,
    Telemetry,
    TimeWindow,
    Tokens,
    Tool,
    TurnStats,
    WindowSpan,
)
from tokenbench.results.trials import NO_TRIALS, TrialStat, mean_ci95
from tokenbench.results.workload import (
    DatasetFacts,
    ExpectedReuse,
    PrefixCache,
    ProgramFacts,
    SessionFacts,
    SharedPrefixFacts,
    TraceFacts,
    TracePointFacts,
)

SCHEMA_PATH = Path(__file__).resolve().parents[3] / "schemas" / "results.schema.json"

__all__ = [
    "NO_TRIALS",
    "Predicted",
    "AggregateRow",
    "CapacityRow",
    "CellRow",
    "Client",
    "Experiment",
    "ServerRow",
    "TrialsRow",
    "Clock",
    "ComputedBy",
    "Concurrency",
    "Cost",
    "DatasetFacts",
    "Distribution",
    "Energy",
    "ErrorSeen",
    "Fluidity",
    "ExpectedReuse",
    "Gauge",
    "Gpu",
    "ServerCpu",
    "Load",
    "MatchedTtft",
    "Number",
    "PointResult",
    "PrefixCache",
    "Populations",
    "Pooling",
    "Reasoning",
    "Images",
    "Requests",
    "RunResults",
    "SCHEMA_PATH",
    "StageResult",
    "StoppedEarly",
    "point_failed",
    "SCHEMA_VERSION",
    "Server",
    "ServerVsClient",
    "ServerSpeculation",
    "ServerTimingStats",
    "SpeculationStats",
    "PositionAcceptance",
    "SharedPrefixFacts",
    "SessionCounts",
    "CallGroup",
    "CriticalPath",
    "ProgramCounts",
    "ProgramFacts",
    "ProgramStats",
    "SessionFacts",
    "Slo",
    "Span",
    "Target",
    "Telemetry",
    "TimeWindow",
    "Tokens",
    "Tool",
    "TraceFacts",
    "TracePointFacts",
    "TurnStats",
    "TrialStat",
    "WindowHealth",
    "WorkerClock",
    "WorkerLoss",
    "Workers",
    "WindowSpan",
    "mean_ci95",
    "schema",
]


def schema() -> dict[str, Any]:
    """The JSON Schema of results.json, as committed in schemas/results.schema.json."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://tokenbench.dev/schemas/results.schema.json",
        **RunResults.model_json_schema(),
    }
