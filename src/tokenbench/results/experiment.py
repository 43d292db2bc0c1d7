"""experiment.json as types: the experiment's state (``Experiment``): its spec, one row per server
configuration (``ServerRow``), one per cell (``CellRow``, a run directory under ``cells/``) and
the aggregates over trials (``AggregateRow``: the catalogue's ``aggregates`` view as TrialStats).

The experiment runner writes the file through these types after every cell, ``tokenbench
recompute`` rewrites its aggregates, and the report reads it back through them. A key the models
do not declare is an error (``extra="forbid"``); ``to_json`` writes the keys it was given, so a
file read and written again is the same JSON.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from tokenbench.common.frozen import FrozenModel
from tokenbench.results.base import Number
from tokenbench.results.capacity import StoppedBy, Variable
from tokenbench.results.run import ComputedBy, Load, Tool
from tokenbench.results.trials import TrialStat

ServerStatus = Literal["pending", "ok", "failed"]
CellStatus = Literal["running", "ok", "failed", "interrupted"]


class ServerRow(FrozenModel):
    """One server configuration: launched (or attached to) once for all its cells."""

    label: str
    backend: str | None  # a profile name, or "attached"
    swept: dict[str, Any]  # the knobs this configuration sets, as swept by the spec
    status: ServerStatus
    error: str | None
    cold_start_s: Number | None = None  # set once the server started
    engine_version: str | None = None
    # a serving layer's engine (the entry's upstream, e.g. llamacpp): the report compares the
    # layer with the configuration that runs that engine alone; written only when set
    upstream: str | None = None


class CellRow(FrozenModel):
    """One cell: (server configuration, dataset variant, trial), a run directory of its own."""

    server: str  # its ServerRow's label
    variant: str
    trial: int
    status: CellStatus
    error: str | None
    run_dir: str  # relative to the experiment directory
    wall_s: Number | None = None  # how long the cell took (not set when it failed to run)


class AggregateRow(FrozenModel):
    """One (server configuration, variant, load point) over its successful trials."""

    server: str
    backend: str | None
    swept: dict[str, Any]
    variant: str
    point: int  # the point's index in each trial's results.json
    label: str
    load: Load
    metrics: dict[str, TrialStat]  # catalogue key -> mean ± 95% CI over trials


class CapacityRow(FrozenModel):
    """A search experiment's answer for one (server configuration, variant): its cell's
    capacity.json in short. ``max_passing`` is the highest probed value whose decision (the trial
    mean of each objective) passed, ``min_failing`` the lowest that failed; with trials the CI is
    on the figures measured at the answer (``requests_per_s``, ``output_tokens_per_s``)."""

    server: str
    backend: str | None
    swept: dict[str, Any]
    variant: str
    run_dir: str  # the cell's, relative to the experiment directory (capacity.json there)
    variable: Variable
    max_passing: Number | None  # None: no load met the SLO
    min_failing: Number | None  # None: no probe failed
    stopped_by: StoppedBy | None
    trials: int
    requests_per_s: TrialStat | None  # at max_passing: mean ± 95% CI over its trials
    output_tokens_per_s: TrialStat | None
    usd_per_million_output_tokens: Number | None  # at max_passing, priced configurations only
    answer: str  # the search's one-line answer


class TrialsRow(FrozenModel):
    """``trials: auto``: how many trials one (server configuration, variant) needed, and why it
    stopped: its metric's 95% CI within the precision at every load ("precision"), or apart from
    every other configuration's at some load where it was not precise ("separated"), the ceiling
    ("ceiling"), or no trial finished ("no results")."""

    server: str
    variant: str
    trials: int
    stopped_by: Literal["precision", "separated", "ceiling", "no results"]
    metric: str
    worst_precision: Number | None  # the widest CI half-width / |mean| over its loads


class Experiment(BaseModel):
    """experiment.json. Mutable: the runner updates it as cells finish (every assignment is
    validated)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str
    description: str = ""
    spec: dict[str, Any]  # the spec as given (masked), to refuse resuming with other settings
    tool: Tool | None = None
    created_unix_s: Number | None = None
    servers: list[ServerRow]
    cells: dict[str, CellRow]
    aggregates: list[AggregateRow]
    capacity: list[CapacityRow] = []  # a search experiment's answers (search:), one per cell
    trials_needed: list[TrialsRow] = []  # trials: auto: each configuration's trials (only then written)
    complete: bool = False
    computed_by: ComputedBy | None = None  # set by `tokenbench recompute`

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Experiment:
        return cls.model_validate(data)

    def server(self, label: str) -> ServerRow | None:
        return next((s for s in self.servers if s.label == label), None)

    def set_server(self, row: ServerRow) -> None:
        """Replace the row of the same label, or append it."""
        self.servers = [row if s.label == row.label else s for s in self.servers]
        if self.server(row.label) is None:
            self.servers = [*self.servers, row]
