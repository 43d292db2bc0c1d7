"""results.json as types: a run (``RunResults``: its header and points), a point (``PointResult``)
and everything in it, with one ``to_json``/``from_json`` pair.

results.json's keys are a public interface: these models declare every key it has, and a key the
models do not declare is an error (``extra="forbid"``), so nothing is added, renamed or dropped by
accident. ``schemas/results.schema.json`` is generated from them (``python -m tokenbench.results``
rewrites it; a test fails when it is stale or when a written results.json does not validate).
``SCHEMA_VERSION`` counts changes to the layout: 1 is the layout of tokenbench 0.2.x.

Numbers keep the type they were computed with (``Number``: an int stays an int), so a results.json
written through these types is the same JSON as before them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from tokenbench.common.frozen import FrozenModel
from tokenbench.results.base import AS_WRITTEN, Number, OptionalParts
from tokenbench.results.client import Client, WindowHealth, WorkerLoss, Workers
from tokenbench.results.cost import Cost, Energy
from tokenbench.results.failures import ErrorSeen, StoppedEarly
from tokenbench.results.imported import Imported
from tokenbench.results.scaling import Scaling
from tokenbench.results.served_model import ServedModel
from tokenbench.results.stopping import AutoStop, OverSaturated, SteadyState
from tokenbench.results.workload import DatasetFacts, PrefixCache, TracePointFacts

SCHEMA_VERSION = 1


class Tool(FrozenModel):
    name: str
    version: str | None


class ComputedBy(Tool):
    how: Literal["run", "recompute"]


class Target(FrozenModel):
    """The server measured, and what tokenbench knows of it (launched: the command and its facts)."""

    url: str | None
    model: str | None
    api: str | None
    ignore_eos: bool
    backend: str | None = None  # a profile name, or "attached" for a server tokenbench knows nothing of
    engine: str | None = None
    engine_version: str | None = None
    cold_start_s: Number | None = None
    cold_start_includes: str | None = None
    command: list[str] | None = None
    command_env: dict[str, str] | None = None
    knobs: dict[str, Any] | None = None
    engine_model: str | None = None
    log: str | None = None
    # a serving layer's engine, launched before it (--upstream): the same facts as above for the
    # engine (backend, engine, engine_version, cold_start_s, command, knobs, log) plus its url
    upstream: dict[str, Any] | None = None
    # a router's replicas, launched before it (--replicas N): each one's facts as above, plus its url
    replicas: list[dict[str, Any]] | None = None
    # which model it served, as far as the server told (/v1/models' card, llama.cpp's /props) and
    # its greedy answers' fingerprint (clients/served_model.py); absent before runs asked
    served_model: ServedModel | None = None


class Slo(OptionalParts):
    ttft_s: Number | None
    tpot_s: Number | None
    e2e_s: Number | None
    session_s: Number | None = None  # agent programs: a session's latency limit (absent when not set)


class Clock(FrozenModel):
    origin_monotonic_s: Number
    origin_unix_s: Number
    unit: str


class Telemetry(FrozenModel):
    samples: str
    metrics_url: str | None
    interval_s: Number


class Distribution(FrozenModel):
    """A per-request distribution (metrics.stats.distribution): None where undefined."""

    count: int
    mean: Number | None
    std: Number | None
    min: Number | None
    p50: Number | None
    p90: Number | None
    p95: Number | None
    p99: Number | None
    p999: Number | None
    max: Number | None


class StageLoad(FrozenModel):
    """A staged point's stage as asked (config.stages.Stage): its length, its level (requests/s or
    users) and the ramp to it from the level before."""

    duration_s: Number
    rate_per_s: Number | None = None
    users: int | None = None
    ramp_s: Number


class Load(FrozenModel):
    """The point's load (config.UsersLoad, RateLoad, ReplayLoad or StagedLoad) and its stop settings."""

    kind: Literal["users", "rate", "replay", "staged"]
    users: int | None = None
    ramp_up_s: Number | None = None
    think_time_s: Number | None = None
    rate_per_s: Number | None = None
    arrival: str | None = None
    burstiness: Number | None = None
    max_concurrency: int | None = None
    speed: Number | None = None  # replay: trace time / speed
    start_s: Number | None = None  # replay: the window of trace time replayed
    end_s: Number | None = None
    jitter_s: Number | None = None
    stages: list[StageLoad] | None = None  # staged: its stages, in order
    start_level: Number | None = None  # staged: the level before the first stage (its ramp's start)
    shape: str | None = None  # staged: the --load-shape its stages came from
    warmup_s: Number
    duration_s: Number | None
    max_requests: int | None

    @property
    def open_loop(self) -> bool:
        """Its requests arrived whatever the responses (config.open_loop, as written)."""
        return self.kind in ("rate", "replay") or bool(self.stages and self.stages[0].rate_per_s is not None)


class Span(FrozenModel):
    start_s: Number
    ramp_end_s: Number
    load_end_s: Number
    end_s: Number


class WindowSpan(FrozenModel):
    start_s: Number
    end_s: Number


class Populations(FrozenModel):
    distributions: str
    rates: str
    goodput: str


class Requests(FrozenModel):
    total: int
    ok: int
    by_outcome: dict[str, int]
    retries: int
    retried_requests: int
    ok_without_end_marker: int


class Concurrency(FrozenModel):
    mean: Number | None
    peak: int


class ServerVsClient(FrozenModel):
    compared: int
    mismatched: int
    mean_client_minus_server: Number | None


class Tokens(FrozenModel):
    output_tokens_source: dict[str, int]
    eos_counted_not_streamed: int
    server_vs_client: ServerVsClient


class Reasoning(FrozenModel):
    """Reasoning content over a point's population (metrics.reasoning; only on a point where
    some request streamed reasoning)."""

    requests: int  # requests that streamed reasoning content
    chunks: int  # their reasoning chunks
    reasoning_only: int  # successful requests whose whole reply was reasoning: no TTFO
    reasoning_tokens: int | None  # the server's count, summed over successful requests that gave it
    reasoning_tokens_reported: int  # how many successful requests' usage gave it


class Pooling(FrozenModel):
    """A pooling point's work (--api embeddings, rerank, score; metrics.pooling).
    Latency is ``e2e_s`` (sent -> the answer complete); the generative metrics are absent."""

    population: str  # which requests the rates count, and over which period
    requests: int  # successful requests of the population
    inputs: int  # their inputs (strings embedded, documents scored)
    inputs_per_request: Number | None  # their mean
    inputs_per_s: Number | None  # inputs of the requests request rate counts, over rate_period_s
    prompt_tokens_per_s: Number | None  # their prompt tokens (the server's usage), over rate_period_s
    prompt_tokens_source: dict[str, int]  # where those counts came from: server, dataset, unknown


class Images(FrozenModel):
    """Images sent in chat content parts over a point's population (metrics.images
    images; only on a point where some request carried images)."""

    requests: int  # requests of the population that carried images
    images: int  # the images they carried
    images_per_request: Number  # images / requests
    image_pixels: int | None  # their pixels in all; None: some image's size was not known (a URL)
    pixels_per_image: Number | None
    # requests_per_s x the mean images of the successful requests: images served per second, by
    # the request rate's own rule (METRICS.md)
    images_per_s: Number | None
    ok_requests: int  # successful requests that carried images
    # the server's usage.prompt_tokens over the successful requests with images (images included)
    prompt_tokens: Distribution


# structured output: (metrics/validity.py)
class StructuredOutput(FrozenModel):
    """Replies under --response-format over a point's population (only on a point where some
    request asked for structure). valid_fraction's population: the successful requests that asked
    for a constraint the client can check (a grammar cannot be: counted in ``requests`` only)."""

    kind: str  # the constraint asked (json_object, json_schema, choice, regex, grammar)
    requests: int  # requests that asked for it
    checked: int  # of them, successful ones whose reply was checked
    parsed: int | None  # of those, replies that parsed as JSON (None: not a JSON kind)
    valid: int  # replies that met the constraint
    valid_fraction: Number | None  # valid / checked (None: nothing checked)


class Accuracy(FrozenModel):
    """A graded dataset's replies over a point's population (only on a point where some request
    carried an expected answer: metrics/accuracy.py). accuracy's population: the graded requests,
    the successful ones of the population that carried an expected answer; a failed one has no
    reply to grade and is counted apart (``not_graded``), never as wrong. The interval: Wilson's
    score interval at 95% for the proportion correct / graded."""

    grader: str  # the graders the rows named (comma-separated)
    requests: int  # requests of the population that carried an expected answer
    graded: int  # of them, successful ones whose reply was graded
    not_graded: int  # of them, failed ones (no reply to grade): requests - graded
    correct: int  # graded replies that gave the expected answer
    accuracy: Number | None  # correct / graded (None: nothing graded)
    ci_low: Number | None  # Wilson 95% interval of accuracy
    ci_high: Number | None
    interval: str  # how the interval was made: "wilson 95%"


class ToolCalls(FrozenModel):
    """Tool calls over a point's population (only on a point whose requests offered --tools)."""

    requests: int  # successful requests that offered tools
    with_calls: int  # of them, replies that made at least one call
    calls: int  # calls made in all
    args_parsed: int  # replies with calls whose every call's arguments parsed as a JSON object
    args_parsed_fraction: Number | None  # args_parsed / with_calls
    call_chunks: int  # chunks that carried a call's name or arguments
    args_tokens: int | None  # the arguments' tokens by the client tokenizer (None: no tokenizer)


class Fluidity(FrozenModel):
    """Etalon's fluidity index over a point's successful requests (metrics.pertoken): each token
    has a deadline, ``ttft_deadline_s`` after the send for the first, ``tbt_deadline_s`` after the
    one before for each later one; slack carries forward, a stall misses several."""

    ttft_deadline_s: Number
    tbt_deadline_s: Number
    index: Distribution  # over requests: 1 - missed / (missed + met) of each
    miss_rate: Number | None  # sum of missed / sum of deadlines over the requests (Etalon's service level)
    # requests by where their tokens' arrivals came from: "chunk_tokens" (the server's count per
    # chunk) or "one_per_chunk" (no counts: one token a chunk)
    tokens_from: dict[str, int]


class Gauge(FrozenModel):
    mean: Number
    max: Number


class MatchedTtft(FrozenModel):
    mean: Number | None
    count: int
    period_s: list[Number] | None = None
    uncertain: int | None = None


# speculative decoding: the server's counters over a period (telemetry.summary.point_server)
class ServerSpeculation(FrozenModel):
    """Speculation by the server's own counters, increased over the period (vLLM's
    ``vllm:spec_decode_*``): verify steps (``drafts``), draft tokens proposed, of them accepted, and
    accepted at each draft position (index i: position i), with what they give: acceptance rate =
    accepted / draft tokens, acceptance length = 1 + accepted / drafts (the bonus token included),
    and by position accepted_i / drafts (vLLM's own formula: every step proposes every position)."""

    drafts: Number | None
    draft_tokens: Number | None
    accepted_tokens: Number | None
    accepted_by_position: list[Number] | None
    acceptance_rate: Number | None
    acceptance_length: Number | None
    acceptance_rate_by_position: list[Number | None] | None


class Server(FrozenModel):
    """The server's own counters and gauges over a period (telemetry.summary.point_server)."""

    period_s: list[Number]
    scrapes: int
    failed_scrapes: int
    first_scrape_error: str | None
    bracket_s: list[Number] | None
    bracket_received_s: list[Number] | None = None
    bracketed: bool
    preemptions: Number | None
    generated_tokens: Number | None
    prefix_cache_hits: Number | None
    prefix_cache_queries: Number | None
    prefix_cache_hit_rate: Number | None
    running: Gauge | None
    waiting: Gauge | None
    kv_usage: Gauge | None
    ttft_s_mean: Number | None
    ttft_count: Number | None
    itl_s_mean: Number | None
    itl_count: Number | None
    client_ttft_s_matched: MatchedTtft | None = None  # over the window only
    # speculative decoding: only when the server counts it (unset, so absent, otherwise)
    speculation: ServerSpeculation | None = None
    # requests the engine finished over the period: only when it counts them (vLLM's request_success);
    # prompt tokens it computed, not found cached: only when it counts them apart (llama.cpp)
    requests_finished: Number | None = None
    prompt_tokens_computed: Number | None = None

    def with_matched_ttft(self, matched: MatchedTtft | None) -> Server:
        """These figures with the client's TTFT over the requests the server counted."""
        return self.model_copy(update={"client_ttft_s_matched": matched})


class Gpu(FrozenModel):
    available: bool
    reason: str | None = None
    util_pct: Gauge | None = None
    power_w: Gauge | None = None
    mem_used_bytes_max: Number | None = None


class ServerCpu(FrozenModel):
    """The CPU a launched server's processes used over a point: the CPU seconds their trees used
    between the scrapes that bracket the window, over that bracket's length (so a mean in cores:
    1.0 = one core busy). What it costs the host to serve the load, beside the client's own CPU."""

    period_s: list[Number] = Field(description="the bracketing scrapes' times: the CPU is over this stretch")
    cpu_s: Number = Field(description="CPU seconds (user + system) of every process of the server's trees")
    cores_mean: Number | None = Field(description="cpu_s / the period: the cores it kept busy on average")
    processes: int = Field(description="the most processes of its trees seen alive in the period")
    bracketed: bool = Field(description="False: no reading at or before the start, or at or after the end")


class WindowClient(FrozenModel):
    """A time-series window as the client saw it (metrics.timeseries)."""

    start_s: Number
    end_s: Number
    ramp: bool
    active_users: int | None
    in_flight: Number | None
    requests_per_s: Number
    output_tokens_per_s: Number
    ttft_s_mean: Number | None
    ttft_s_p90: Number | None
    errors: int
    cancelled: int
    target_level: Number | None = None  # a staged point: its level (req/s or users) at the window's start


class Backlog(FrozenModel):
    """A stage's backlog: the requests scheduled and not yet ended (in flight, or waiting client-side
    for a --max-concurrency slot), counted over the whole point's records."""

    at_start: int  # just before the stage's start (what the stage before left it)
    at_end: int  # just before its end (what it leaves the next: a request due at the boundary is the next's)
    peak: int  # the most at once within it
    growth_per_s: Number  # (at_end - at_start) / the stage's length
    # only a stage right after one whose backlog grew: seconds from its start until the backlog was
    # back at the level it had when that stage began (null: it never got back there, to the point's end)
    drain_s: Number | None = None


class StageResult(FrozenModel):
    """One stage of a staged point (metrics.stages): its window on the point's clock (seconds from
    the point's start), its target, and what its requests met."""

    index: int
    start_s: Number
    end_s: Number
    target_rate_per_s: Number | None = None  # open loop: the stage's level (reached after ramp_s)
    target_users: int | None = None  # closed loop
    ramp_s: Number
    population: str  # which requests and which period each figure counts
    requests: int  # scheduled in the stage, whatever their outcome
    ok: int
    failed: int  # ended in failure (the run's own cuts, cancelled or never sent, are neither)
    offered_per_s: Number  # requests / the stage's length
    requests_per_s: Number  # ok requests that ended within the stage's window / its length
    output_tokens_per_s: Number  # output tokens that arrived within the stage's window / its length
    good_fraction: Number | None  # SLO attainment: of its requests that ended, the share meeting --slo
    ttft_s: Distribution
    itl_s: Distribution
    e2e_s: Distribution
    backlog: Backlog


class WindowServer(FrozenModel):
    """A time-series window as the server and the GPU saw it (telemetry.summary.window_server):
    absent from a window of a run that scraped no server."""

    server_running: Number | None = None
    server_waiting: Number | None = None
    server_kv_usage: Number | None = None
    server_preemptions: Number | None = None
    gpu_util_pct: Number | None = None


# The client's figures first, then the server's, then the client's health (the last base's fields
# come first).
class TimeWindow(WindowHealth, WindowServer, WindowClient):
    """One fixed window of the time series (metrics.timeseries + telemetry.summary.window_server
    + telemetry.client_health.window_client)."""

    @classmethod
    def of(cls, client: WindowClient, server: WindowServer | None, health: WindowHealth | None = None) -> TimeWindow:
        """The window's client figures with the server's and the client's health beside them (the
        keys each one set)."""
        parts = [p for p in (client, server, health) if p is not None]
        return cls(**{k: getattr(part, k) for part in parts for k in part.model_fields_set})


class TurnStats(FrozenModel):
    """One turn index of a session point's window population (metrics.sessions.by_turn): its
    requests, and over the ok ones TTFT, E2E and prompt tokens (the server's, else the dataset's)."""

    turn_index: int
    count: int
    ttft_s: Distribution
    e2e_s: Distribution
    prompt_tokens: Distribution


class SessionCounts(FrozenModel):
    """A session point's conversations over the whole point, as the load generator ran them: a
    conversation that ended by none of these was cut by the point's end (deadline, max-requests,
    interrupt)."""

    started: int
    completed: int
    ended_by_error: int
    ended_by_history_limit: int
    ended_by_stop: int


# agent programs (--dataset programs): a point's sessions, the critical path through each and
# where its time went (metrics/programs.py)
class ProgramCounts(FrozenModel):
    """A programs point's sessions over the whole point, as the load generator ran them."""

    started: int
    completed: int
    ended_by_error: int
    ended_by_stop: int
    calls_not_sent: int = Field(description="calls of sessions that ended before their parents allowed them")


class CallGroup(FrozenModel):
    """The calls of one role or depth in the point's window population: their count, ok ones,
    and over those TTFT, E2E and the schedule's lag (sent - when the parents allowed)."""

    count: int
    ok: int
    ttft_s: Distribution
    e2e_s: Distribution
    schedule_lag_s: Distribution


class CriticalPath(FrozenModel):
    """The measured sessions' critical paths: from the last call's end back through, at each call,
    the parent whose anchor plus delay allowed it last, to the session's start. Each part's mean
    seconds a session, and its share of the sessions' summed latency (the parts add up to it).
    Parts: dispatch (client to server, the server's frontend: with server spans), queue (with
    spans the server's queue; with llama.cpp's timings all of TTFT before its prefill), prefill,
    delivery (server first token to the client: spans), ttft (time to first token not split: no
    server timing), decode, tool (a tool's run), think (the rest of a recorded wait; a root's
    offset), lag (the schedule's: sent later than the parents allowed)."""

    calls: Distribution
    mean_s: dict[str, Number]
    share: dict[str, Number | None]


class ProgramStats(OptionalParts):
    """A programs point: its sessions (the whole point), and over the measured sessions (completed,
    started in the window) their latency (last call's end - the session's scheduled start), rate
    (measured sessions / the window; within ``--slo session=``: goodput) and critical path; the calls of the window population by role and depth, the schedule's lag
    over them, and the prefix reuse the programs imply against what the server reported."""

    sessions: ProgramCounts | None
    measured_sessions: int
    session_s: Distribution
    sessions_per_s: Number | None
    # with --slo session=LIMIT: the measured sessions within it, a second of the window, and of all
    good_sessions_per_s: Number | None = None
    good_sessions_fraction: Number | None = None
    calls_per_session: Distribution
    schedule_lag_s: Distribution
    critical_path: CriticalPath
    by_role: dict[str, CallGroup]
    by_depth: dict[str, CallGroup]
    expected_reuse: Number | None = Field(
        description="prompt tokens that repeat a parent's prompt and reply (PromptOf + Output leading a prompt), "
        "of the ok calls' prompt tokens"
    )
    measured_reuse: Number | None = Field(
        description="the server's cached prompt tokens of the ok calls' prompt tokens"
    )


class PointHead(FrozenModel):
    """Which point: its index, load and span (derive.point_result, from the run's ``point`` event)."""

    index: int
    label: str
    load: Load
    span: Span
    interrupted: bool


# speculative decoding and the server's own timing, from each request's response (metrics/speculation.py)
class PositionAcceptance(FrozenModel):
    """One draft position (0: the first token a step proposes) over a point's requests: how often
    it was proposed and accepted, and the rate (None: proposals not known by position)."""

    position: int
    accepted: int
    drafted: int | None
    rate: Number | None


class SpeculationStats(FrozenModel):
    """Speculative decoding over a point's successful requests that reported it (population: the
    point's window population, ok, with the server's per-request figures). Each rate is named by
    its weight: ``token_weighted`` pools the draft tokens (sum accepted / sum drafted: a long reply
    weighs more), ``request_weighted`` averages each request's own (each weighs one);
    acceptance length (tokens a verify step gives, the bonus included: 1 + accepted / steps)
    likewise ``step_weighted`` and ``request_weighted``. ``by_position``: the acceptance of each
    draft position pooled over the requests. ``server``: the same from the server's counters over
    the point's window (points[].server.speculation), beside it. ``from``: the engine shape read."""

    requests: int
    source: str | None
    steps: int | None
    draft_tokens: int | None
    accepted_tokens: int | None
    acceptance_rate_token_weighted: Number | None
    acceptance_rate_request_weighted: Number | None
    acceptance_rate: Distribution  # over requests: each one's accepted / drafted
    acceptance_length_step_weighted: Number | None
    acceptance_length_request_weighted: Number | None
    by_position: list[PositionAcceptance] | None
    server: ServerSpeculation | None


class ServerTimingStats(FrozenModel):
    """The server's own per-request timing, from its responses (records' ServerTiming), over a
    point's successful requests that carried it: its queue, its prefill, its TTFT from its queue
    (queue + prefill: after the API server's tokenizing), the client's TTFT less that
    (``ttft_outside_server_s``: the network, HTTP, the API server, delivery), its decode and its
    mean ITL per request. ``source``: the engine shape read."""

    requests: int
    source: str | None
    queue_s: Distribution
    prefill_s: Distribution
    ttft_s: Distribution
    ttft_outside_server_s: Distribution
    decode_s: Distribution
    itl_s: Distribution


class PointMetrics(FrozenModel):
    """A point's metrics over its window, from its records (metrics.summarize_point)."""

    window_s: Number
    window: WindowSpan
    populations: Populations
    rate_period_s: Number | None
    backlog_growth_s: Number | None
    offered_per_s: Number | None
    requests: Requests
    requests_in_window: Requests
    ttft_s: Distribution
    tpot_s: Distribution
    decode_speed_tokens_per_s: Distribution
    itl_s: Distribution
    # each chunk gap split over its tokens (counts 0 without per-chunk counts); absent before it existed
    itl_per_token_s: Distribution | None = None
    # the output tokens each chunk carried, over the chunks of requests with per-chunk counts
    # (usage on every chunk): only on a point with such requests
    tokens_per_chunk: Distribution | None = None
    e2e_s: Distribution
    queue_s: Distribution
    queue_s_censored: int
    normalized_latency_s: Distribution
    fluidity: Fluidity | None = None  # absent from results written before it existed
    output_tokens: Number
    # of output_tokens, those of streams cancelled mid-reply, and how many streams: request rate
    # counts completed requests only (metrics.point.cancelled_output); only on a point with some
    cancelled_output_tokens: Number | None = None
    cancelled_streams: int | None = None
    output_tokens_per_s: Number | None
    total_tokens_per_s: Number | None
    prompt_tokens_source: dict[str, int]
    requests_per_s: Number | None
    goodput_per_s: Number | None
    good_fraction: Number | None
    concurrency: Concurrency
    tokens: Tokens
    # only on a point where reasoning streamed (a run without keeps its results.json shape)
    ttfo_s: Distribution | None = None
    reasoning: Reasoning | None = None
    # pooling APIs: only on a point of pooling requests (a run without keeps its shape)
    pooling: Pooling | None = None
    # images: only on a point where some request carried images
    images: Images | None = None
    # structured output: only on a point where a request asked for structure /
    # offered tools (a run without keeps its results.json shape); ttftc_s: time to the first
    # tool-call token, over the successful requests whose reply made a call
    structured: StructuredOutput | None = None
    tool_calls: ToolCalls | None = None
    ttftc_s: Distribution | None = None
    # a graded dataset: only on a point where some request carried an expected answer
    accuracy: Accuracy | None = None

    def fields(self) -> dict[str, Any]:
        """Its fields by name, as the PointResult that holds them takes them (derive.point_result)."""
        return {name: getattr(self, name) for name in PointMetrics.model_fields}


# A point's parts are declared once, where they are computed. Pydantic puts a base's fields before
# its subclass's and the last base's first: results.json's key order is PointHead's, PointMetrics',
# then the server's and the GPU's figures and the time series (derive.point_result joins them).
# routing: a point's requests by group (metrics/groups.py)
class GroupSlo(FrozenModel):
    """The per-request objectives a group's goodput counts (a class's own, else the run's --slo)."""

    ttft_s: Number | None = None
    tpot_s: Number | None = None
    e2e_s: Number | None = None


class GroupStats(FrozenModel):
    """One adapter's, class's or tenant's requests of the point's window population: its latency
    distributions (successful requests), its rates over the point's rate period, and its goodput
    and SLO attainment (good_fraction: met every objective, of those that ended)."""

    requests: int  # in the window population, whatever their outcome
    ok: int
    failed: int
    share: Number | None  # of the population's requests
    requests_per_s: Number | None
    output_tokens_per_s: Number | None
    goodput_per_s: Number | None = None  # only with objectives (the class's or the run's)
    good_fraction: Number | None = None
    slo: GroupSlo | None = None
    priority: int | None = None  # a class's
    tenant: str | None = None  # a class's
    ttft_s: Distribution
    tpot_s: Distribution
    e2e_s: Distribution
    queue_s: Distribution
    normalized_latency_s: Distribution


# what a fleet's imbalance is measured over (FleetStats.imbalance_over)
ImbalanceBasis = Literal["requests", "routed_requests", "generated_tokens", "requests_finished"]


class ReplicaStats(FrozenModel):
    """One replica of a fleet over the point's window (metrics/fleet.py). ``requests``: the window
    population's requests that named it as the one that served them (records' ``replica``), with
    their latencies and rates as a group's (None: no record named a replica); ``routed_requests``:
    the router's count of requests it sent there, its per-replica counter's increase over the
    window (None: the router does not count them); ``server``: the replica's own counters and
    gauges over the window (running, waiting, KV use, prefix hits, generated and finished)."""

    replica: str  # host:port
    requests: GroupStats | None
    routed_requests: Number | None
    server: Server | None
    # its prefix-cache hit rate by its counters: hits / queries, or where the engine counts the prompt
    # tokens it computed instead of those it looked up (llama.cpp), hits / (hits + computed)
    prefix_cache_hit_rate: Number | None = None


class FleetStats(FrozenModel):
    """A fleet behind a router over the point's window (metrics/fleet.py): each replica's figures,
    how the records were attributed (``attributed_from``: "header", a router's or proxy's response
    header; "span", the replica its joined span's resource named; "mixed"; None: none were), and the load imbalance across replicas over one basis, named in
    ``imbalance_over``: "requests" (the records' replicas, when every record named one), else
    "routed_requests" (the router's counts), else "generated_tokens" or "requests_finished" (the
    replicas' own counters). ``imbalance_max_over_mean``: the busiest replica's over the mean (1:
    even; N replicas: one took all); ``imbalance_cv``: their standard deviation over their mean."""

    replicas: list[ReplicaStats]
    attributed: int  # window population requests naming their replica
    unattributed: int
    attributed_from: str | None
    imbalance_over: ImbalanceBasis | None
    imbalance_max_over_mean: Number | None
    imbalance_cv: Number | None


class Fairness(FrozenModel):
    """Jain's index across tenants: J = (sum x)^2 / (n * sum x^2) over the n tenants of the point's
    window population, 1 when all get the same, 1/n when one gets everything."""

    jain_index: Number | None
    # x per tenant: "goodput_per_share" (its goodput / its share of the requests: demand-normalised
    # goodput), or without objectives "inverse_normalized_latency" (1 / its mean E2E per output token)
    over: Literal["goodput_per_share", "inverse_normalized_latency"]
    tenants: int
    values: dict[str, Number | None]


# server spans: a point's per-request phases: the client's HTTP phases (every run) and the server's own,
# joined from its spans (--server-traces)
class ClockOffset(FrozenModel):
    """How a server's wall-clock time was placed on the run's clock: run time = server unix time -
    the run's origin_unix_s + ``offset_s``. ``low_s``/``high_s``: the offsets the join allows
    (each joined request: server arrival no earlier than the client sent its headers, server first
    token no later than the client's first chunk); None without a joined request."""

    offset_s: Number
    low_s: Number | None
    high_s: Number | None
    method: str


class SlowestPhases(FrozenModel):
    """Where the slowest 1% of joined requests (by client TTFT, at least one) spent their time:
    each phase's mean over them."""

    requests: int
    ttft_from_s: Number | None = Field(description="the client TTFT at and above which a request is among them")
    mean_s: dict[str, Number | None]


class ServerPhases(FrozenModel):
    """The server's per-request phases over the point's window population, from its spans."""

    requests: int = Field(description="ok requests of the population (each could have a span)")
    joined: int = Field(description="of those, requests joined to their server span by trace id")
    joined_share: Number | None
    spans: int = Field(description="spans naming a request of this point (joined or not)")
    failed_with_span: int = Field(description="spans of requests that failed or were cut")
    late_spans: int = Field(description="spans received after the point's results were due (left unjoined)")
    unknown_spans: int = Field(description="spans naming no request of this point, received during it")
    unknown_attributes: dict[str, int] = Field(description="attribute names not known, and the spans carrying each")
    receiver: dict[str, int | str | None] | None = Field(description="the receiver's own counts (drops, refusals)")
    clock: ClockOffset
    phases: dict[str, Distribution]
    slowest: SlowestPhases | None


# A point's part built as None is absent (OptionalParts): derive.point_result gives every part by name.
class PointResult(PointMetrics, PointHead, OptionalParts):
    """One load point: its load and span, then its metrics over the window (METRICS.md)."""

    server: Server | None
    server_whole_point: Server | None
    gpu: Gpu
    gpu_whole_point: Gpu
    server_cpu: ServerCpu | None = None  # only a server tokenbench launched (its processes' CPU)
    timeseries: list[TimeWindow]
    by_turn: list[TurnStats] | None = None  # only a --multi-turn point has these two keys
    sessions: SessionCounts | None = None
    programs: ProgramStats | None = None  # only an agent-programs point
    # speculative decoding / the server's own timing: only on a point whose responses reported them
    # (metrics/speculation.py); speculation's ``server`` is ``server.speculation`` beside it
    speculation: SpeculationStats | None = None
    server_timing: ServerTimingStats | None = None
    trace: TracePointFacts | None = None  # only a replay point: the trace's rows it sent, left out, its expected reuse
    prefix_cache: PrefixCache | None = None  # absent from results written before it existed
    cost: Cost | None = None  # only on a run given a price (--cost-per-hour)
    energy: Energy | None = None  # absent from results written before it existed
    client: Client | None = None  # the client's own health; absent from runs before it was sampled
    workers_lost: list[WorkerLoss] | None = None  # only on a point during which a worker died
    # only on a point with failed requests: the first distinct error texts (results.failures)
    errors_seen: list[ErrorSeen] | None = None
    stopped_early: StoppedEarly | None = None  # only on a point the circuit breaker stopped
    # routing: only on a point whose requests had adapters, classes or tenants
    by_adapter: dict[str, GroupStats] | None = None
    by_class: dict[str, GroupStats] | None = None
    by_tenant: dict[str, GroupStats] | None = None
    fairness: Fairness | None = None
    fleet: FleetStats | None = None  # only a point against a fleet (a router and its replicas)
    # autostop: (results/stopping.py): where the figures stopped drifting (every point since), how a
    # point that judged itself stopped, and an over-saturated point's evidence (only such points)
    steady_state: SteadyState | None = None
    auto_stop: AutoStop | None = None
    over_saturated: OverSaturated | None = None
    # server spans: distributions of the client's HTTP phases (absent from runs before them), and the
    # server's phases joined from its spans (only a --server-traces run)
    http_phases: dict[str, Distribution] | None = None
    server_phases: ServerPhases | None = None
    stages: list[StageResult] | None = None  # only a staged point: one per stage (metrics.stages)
    # autoscaling: only a point of a run that polled a scaler (--scaler-url; results/scaling.py)
    scaling: Scaling | None = None


class Predicted(FrozenModel):
    """A results.json that no server produced: a model's prediction (tokenbench.model).
    ``interval``: the relative half-width of the prediction interval the model gives its mean
    figures (its fit's residuals and its last validation, whichever is larger); ``validation_error``:
    the largest relative error of its last validation against a run it was not fitted on (None:
    never validated)."""

    model: str
    replicas: int
    routing: str
    knobs: dict[str, Number | None]
    interval: Number | None
    validation_run: str | None
    validation_error: Number | None
    simulated_s: Number
    preemptions: int


# An optional part built as None (``workers``, ``interrupted``, ``predicted``) is absent: OptionalParts.
class RunResults(OptionalParts):
    """results.json: the run's header, its points as they finished, and whether it was stopped."""

    schema_version: int = Field(default=SCHEMA_VERSION, description="the layout's version (SCHEMA_VERSION)")
    tool: Tool
    computed_by: ComputedBy
    target: Target
    dataset: DatasetFacts | None
    slo: Slo
    clock: Clock | None
    telemetry: Telemetry | None
    workers: Workers | None = None  # only a run whose load came from several workers
    points: list[PointResult]
    interrupted: bool | None = None  # None while the run goes on
    predicted: Predicted | None = None  # the server model: only a model's prediction (tokenbench model predict)
    imported: Imported | None = None  # only a run imported from another tool's file (tokenbench import)

    def with_point(self, point: PointResult) -> RunResults:
        """These results with one more point, as it finished."""
        return self.model_copy(update={"points": [*self.points, point]})

    def finished(self, interrupted: bool) -> RunResults:
        """These results once the run ended (``interrupted`` is absent until then)."""
        return self.model_copy(update={"interrupted": interrupted})

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)  # the keys it was given: same shape

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResults:
        """A results.json, with the keys it has; one written before ``schema_version`` existed reads
        as version 1."""
        return cls.model_validate({"schema_version": SCHEMA_VERSION, **data}, context={AS_WRITTEN: True})
