"""Results as types: results.json (``run``: ``RunResults``, ``PointResult`` and their parts),
experiment.json (``experiment``: ``Experiment``, its server, cell and aggregate rows) and a
metric over trials (``trials``: ``TrialStat``, ``mean_ci95``); the JSON Schema committed in
``schemas/results.schema.json`` is made from them (``python -m tokenbench.results`` rewrites it).

Import from here: ``from tokenbench.results import RunResults, PointResult, mean_ci95``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .experiment import AggregateRow, CellRow, Experiment, ServerRow
from .run import (
    SCHEMA_VERSION,
    Clock,
    ComputedBy,
    Concurrency,
    DatasetFacts,
    Distribution,
    ExpectedReuse,
    Gauge,
    Gpu,
    Load,
    MatchedTtft,
    Number,
    PointResult,
    Populations,
    PrefixCache,
    Requests,
    RunResults,
    Server,
    ServerVsClient,
    Slo,
    Span,
    Target,
    Telemetry,
    TimeWindow,
    Tokens,
    Tool,
    TraceFacts,
    WindowSpan,
)
from .trials import NO_TRIALS, TrialStat, mean_ci95

SCHEMA_PATH = Path(__file__).resolve().parents[3] / "schemas" / "results.schema.json"

__all__ = [
    "NO_TRIALS",
    "AggregateRow",
    "CellRow",
    "Experiment",
    "ServerRow",
    "Clock",
    "ComputedBy",
    "Concurrency",
    "DatasetFacts",
    "Distribution",
    "ExpectedReuse",
    "Gauge",
    "Gpu",
    "Load",
    "MatchedTtft",
    "Number",
    "PointResult",
    "PrefixCache",
    "Populations",
    "Requests",
    "RunResults",
    "SCHEMA_PATH",
    "SCHEMA_VERSION",
    "Server",
    "ServerVsClient",
    "Slo",
    "Span",
    "Target",
    "Telemetry",
    "TimeWindow",
    "Tokens",
    "Tool",
    "TraceFacts",
    "TrialStat",
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
