"""What the report shows, as typed rows (pure data): one ``PointRow`` per configuration and load,
the time series of each run (``RunSeries`` of ``PointSpan``), and the facts of each input
(``RunHeader``, ``ExperimentHeader``), gathered in one ``ReportData``. ``load.py`` makes them from
the input directories; everything else in report/ reads them.

Every missing number stays ``None`` (shown as "–"), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenbench.results import ErrorSeen, ProgramStats, StageResult, StoppedEarly, TimeWindow, TrialStat
from tokenbench.results.agreement import Agreement
from tokenbench.results.capacity import CapacityResult
from tokenbench.results.imported import Imported
from tokenbench.results.scaling import Scaling

LoadKey = tuple[str, float | str]  # (load kind, users or rate; the label when it has no number)
Slo = dict[str, float | None]  # objective ("ttft_s", "tpot_s", "e2e_s") -> seconds, None when not set


@dataclass(frozen=True)
class PointRow:
    """One load point of one configuration (trials folded into TrialStats)."""

    source: str  # the run directory's or experiment's name
    config: str  # unique display label: backend configuration (+ dataset variant)
    backend: str | None
    swept: dict[str, Any]  # the knobs' values as the spec's YAML gave them (any YAML scalar)
    variant: str | None
    point: int
    label: str  # "16 users", "2 req/s"
    load_kind: str  # "users" | "rate"
    load_value: float | None  # users, or offered requests per second
    metrics: dict[str, TrialStat]  # catalogue key -> over trials
    outcomes: dict[str, int]  # request outcomes summed over trials, "ok" included
    num_trials: int
    upstream: str | None = None  # a serving layer's engine (experiment.json's server upstream)
    server: str | None = None  # the server configuration's label (an experiment's; a run's: None)
    api: str | None = None  # the request API its requests went by (results.json target.api)
    # a run's point: what the server said when requests failed, and whether the breaker stopped it
    errors_seen: tuple[ErrorSeen, ...] = ()
    stopped_early: StoppedEarly | None = None

    def mean(self, name: str) -> float | None:
        stat = self.metrics.get(name)
        return None if stat is None else stat.mean

    def summed(self, name: str) -> int | None:
        """A count's sum over the trials (a proportion's correct or graded); None where none counted."""
        stat = self.metrics.get(name)
        return round(sum(stat.values)) if stat is not None and stat.values else None

    def proportion(self, counts: tuple[str, str]) -> tuple[int, int] | None:
        """A proportion's successes and trials (a catalogue metric's ``counts`` keys), each summed
        over the trials; None where either was not counted."""
        hits, n = (self.summed(k) for k in counts)
        return (hits, n) if hits is not None and n is not None else None


def load_key(row: PointRow) -> LoadKey:
    """Rows at the same load across configurations share this key."""
    return (row.load_kind, row.load_value if row.load_value is not None else row.label)


@dataclass(frozen=True)
class PointSpan:
    """One point's stretch of a run's clock and its time-series windows (as written)."""

    index: int
    label: str
    load_kind: str
    start_s: float
    ramp_end_s: float
    measure_start_s: float  # end of ramp + warm-up: where the measurement window starts
    load_end_s: float
    end_s: float
    windows: tuple[TimeWindow, ...]


@dataclass(frozen=True)
class RunSeries:
    """The time series of one run directory (a plain run, or one cell of an experiment)."""

    title: str
    config: str
    trial: int | None
    run_dir: Path
    points: tuple[PointSpan, ...]


@dataclass(frozen=True)
class RunHeader:
    """What a reader needs to know about one run: what was benchmarked, with what."""

    path: Path
    name: str
    config: str
    backend: str | None
    engine: str | None
    engine_version: str | None
    cold_start_s: float | None
    model: str | None
    api: str | None
    dataset: str
    slo: Slo
    interrupted: bool
    num_points: int
    url: str | None = None  # where the server was reached (results' target.url)
    imported: Imported | None = None  # a run imported from another tool's file: its figures beside ours


@dataclass(frozen=True)
class ServerInfo:
    label: str
    config: str
    backend: str | None
    swept: dict[str, Any]  # the knobs' values as the spec's YAML gave them (any YAML scalar)
    status: str | None
    error: str | None
    cold_start_s: float | None
    engine_version: str | None
    upstream: str | None = None  # a serving layer's engine


@dataclass(frozen=True)
class CellInfo:
    cell_id: str
    server: str
    variant: str | None
    trial: int | None
    status: str | None
    error: str | None


@dataclass(frozen=True)
class ExperimentHeader:
    path: Path
    name: str
    description: str
    complete: bool
    trials: int | None
    load: str
    model: str | None
    dataset: str
    slo: Slo
    servers: tuple[ServerInfo, ...]
    cells: tuple[CellInfo, ...]
    # trials: auto: how many trials each configuration needed, and why it stopped ("a · default: 4 (precision)")
    trials_needed: tuple[str, ...] = ()


@dataclass(frozen=True)
class TurnRow:
    """One turn index of one multi-turn session point (results' ``by_turn``): TTFT by turn is
    what prefix caching changes."""

    config: str
    label: str  # the point's
    turn_index: int
    count: int
    ttft_mean_s: float | None
    ttft_p90_s: float | None
    prompt_tokens_mean: float | None


@dataclass(frozen=True)
class ImageRow:
    """One point that sent images (results' ``images``; images): what they cost."""

    config: str
    label: str  # the point's
    requests: int
    images_per_request: float
    pixels_per_image: float | None
    images_per_s: float | None
    prompt_tokens_mean: float | None  # the server's, images included
    ttft_mean_s: float | None  # the point's, over every successful request


@dataclass(frozen=True)
class ScalingRow:
    """One point of a run that polled a scaler (results' ``scaling``): its replica timeline and
    scale-ups, as the results have them (times on the run's clock)."""

    config: str
    label: str
    start_s: float  # the point's start, which the section shows times from
    scaling: Scaling


@dataclass(frozen=True)
class PhaseRow:
    """Where one point's requests spent their time (results' ``server_phases``): the
    share joined to a server span, each phase's median, and its mean over the slowest 1%."""

    config: str
    label: str
    requests: int
    joined_share: float | None
    p50_s: dict[str, float | None]
    slowest_s: dict[str, float | None]
    slowest_requests: int
    clock_offset_s: float
    # the stacked breakdown's segments: each phase's mean over the joined requests, and the
    # client's own share (its queue delay: scheduled -> sent, the point's queue_s mean)
    mean_s: dict[str, float | None] = field(default_factory=dict)
    client_s: float | None = None


@dataclass(frozen=True)
class SlowRow:
    """One of a run's slowest requests by client TTFT (records.jsonl joined to server_spans.jsonl,
    ), with its phases; a phase is None where no span joined or the span lacks it."""

    config: str
    label: str  # its point's
    worker: int | None
    id: int
    ttft_s: float
    phases_s: dict[str, float | None]


@dataclass(frozen=True)
class GroupRow:
    """One adapter's, class's or tenant's share of one point (results' by_adapter, by_class,
    by_tenant; routing), with the point's Jain's index on a tenant's row."""

    config: str
    label: str  # the point's
    kind: str  # adapter, class or tenant
    name: str
    requests: int
    share: float | None
    ttft_p50_s: float | None
    ttft_p90_s: float | None
    tpot_p50_s: float | None
    e2e_p90_s: float | None
    output_tokens_per_s: float | None
    good_fraction: float | None
    jain_index: float | None = None


@dataclass(frozen=True)
class ReplicaRow:
    """One replica of a fleet at one point (results' ``fleet``): the requests that named it and
    their latency, the router's count, its own counters, and the point's imbalance beside."""

    config: str
    label: str  # the point's
    replica: str
    requests: int | None  # records naming it (None: the stack did not say)
    routed_requests: float | None
    ttft_p50_s: float | None
    ttft_p90_s: float | None
    e2e_p90_s: float | None
    output_tokens_per_s: float | None
    good_fraction: float | None
    running_mean: float | None
    kv_usage_mean: float | None
    prefix_cache_hit_rate: float | None
    generated_tokens: float | None
    imbalance_max_over_mean: float | None  # the point's, over imbalance_over
    imbalance_over: str | None


@dataclass(frozen=True)
class ProgramRow:
    """One agent-programs point (results' ``programs``): its sessions, their latency and critical
    path, its calls by role and depth, as results.json has them."""

    config: str
    label: str  # the point's
    stats: ProgramStats


@dataclass(frozen=True)
class StageRow:
    """One staged point (results' ``stages``): its stages as results.json has them."""

    config: str
    label: str  # the point's
    stages: tuple[StageResult, ...]


@dataclass(frozen=True)
class SessionRow:
    """One completed session of a programs point, from its records (metrics.programs.sessions, the
    results' own): its latency, calls, the calls on its critical path and the path's parts
    (seconds; they add up to the latency). ``measured``: started in the window, so one of the
    results' measured sessions."""

    config: str
    label: str  # its point's
    session: str
    program: str
    latency_s: float
    calls: int
    path_calls: int
    parts: dict[str, float]
    measured: bool
    prompt_tokens: int = 0
    output_tokens: int = 0
    expected_reuse: float | None = None
    measured_reuse: float | None = None


@dataclass(frozen=True)
class CallSpan:
    """One call of a session's timeline, on the run clock (seconds): what it waited on (its
    parent's anchor, from which the recorded wait counts; a root: the session's start), when its
    parents allowed it (ready), when it was sent and when its stream ended; whether it is on the
    session's critical path."""

    call: str
    role: str | None
    depth: int | None
    after: str | None  # the parent that allowed it last (None: a root)
    anchor: str | None  # what of that parent it waited on: end, start, first_token
    waited_from_s: float
    ready_s: float
    sent_s: float
    closed_s: float
    on_path: bool


@dataclass(frozen=True)
class SessionTimeline:
    """A programs point's slowest completed session, call by call (in the order they were sent;
    ``left_out``: calls past the timeline's limit)."""

    config: str
    label: str  # its point's
    session: str
    program: str
    start_s: float
    latency_s: float
    calls: tuple[CallSpan, ...]
    left_out: int = 0


@dataclass(frozen=True)
class CapacityEntry:
    """One capacity search: its configuration's display label and its capacity.json."""

    config: str
    result: CapacityResult


@dataclass(frozen=True)
class ReportData:
    """Everything the report shows, read from the input directories in the order given."""

    runs: tuple[RunHeader, ...]
    experiments: tuple[ExperimentHeader, ...]
    rows: tuple[PointRow, ...]
    series: tuple[RunSeries, ...]
    slos: tuple[Slo, ...] = field(default=())  # distinct SLOs of the inputs
    turns: tuple[TurnRow, ...] = ()  # multi-turn session runs' points, by turn index
    capacities: tuple[CapacityEntry, ...] = ()  # capacity searches (capacity.json), in input order
    images: tuple[ImageRow, ...] = ()  # images: the points that sent images
    groups: tuple[GroupRow, ...] = ()  # points' requests by adapter, class and tenant
    phases: tuple[PhaseRow, ...] = ()  # server spans: points with server spans
    slowest: tuple[SlowRow, ...] = ()  # server spans: each run's slowest requests with their phases
    programs: tuple[ProgramRow, ...] = ()  # agent programs: the points with sessions
    sessions: tuple[SessionRow, ...] = ()  # agent programs: each point's slowest sessions
    timelines: tuple[SessionTimeline, ...] = ()  # agent programs: each point's slowest session, call by call
    replicas: tuple[ReplicaRow, ...] = ()  # fleets: each point's replicas
    stages: tuple[StageRow, ...] = ()  # staged points, stage by stage
    scaling: tuple[ScalingRow, ...] = ()  # autoscaling: the points of runs that polled a scaler
    agreements: tuple[Agreement, ...] = ()  # paired outputs: the inputs' agreement.json


@dataclass
class Part:
    """What one input directory contributes, before configuration labels are made unique."""

    name: str
    runs: list[RunHeader]
    experiments: list[ExperimentHeader]
    rows: list[PointRow]
    series: list[RunSeries]
    slos: list[Slo]
    turns: list[TurnRow] = field(default_factory=list)
    capacities: list[CapacityEntry] = field(default_factory=list)
    images: list[ImageRow] = field(default_factory=list)  # images
    groups: list[GroupRow] = field(default_factory=list)  # routing
    replicas: list[ReplicaRow] = field(default_factory=list)  # fleets
    phases: list[PhaseRow] = field(default_factory=list)  # server spans: server spans
    slowest: list[SlowRow] = field(default_factory=list)  # server spans: the slowest requests
    programs: list[ProgramRow] = field(default_factory=list)  # agent programs
    sessions: list[SessionRow] = field(default_factory=list)
    timelines: list[SessionTimeline] = field(default_factory=list)
    stages: list[StageRow] = field(default_factory=list)  # staged points
    scaling: list[ScalingRow] = field(default_factory=list)  # autoscaling

    def configs(self) -> list[str]:
        seen: list[str] = []
        for r in self.rows:
            if r.config not in seen:
                seen.append(r.config)
        for h in self.runs:
            if h.config not in seen:
                seen.append(h.config)
        for e in self.experiments:
            for s in e.servers:
                if s.config not in seen:
                    seen.append(s.config)
        return seen
