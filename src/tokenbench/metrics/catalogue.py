"""The metric catalogue: every headline number of a load point, declared once (pure data).

A ``Metric`` says how to read one number from a results.json point (a typed ``PointResult``), how
to show it (unit, scale, digits, title), which way is better, which requests it counts and over
which period (METRICS.md, "Populations and periods"), and where it is shown (``views``). The
experiment aggregates, the report's headline table, compare, the console tables and the verdict
take their metric lists, titles, units, scales and directions from ``METRICS``: a new headline
metric is one entry here.

``key`` is the metric's name in experiment.json's ``aggregates`` and in compare: a public
interface, so a key is added, never renamed or dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from tokenbench.metrics.point import error_rate
from tokenbench.results import PointResult
from tokenbench.telemetry.client_health import CLIENT_METRICS, CLIENT_POPULATION

Getter = Callable[[PointResult], float | None]

# Where a metric is shown:
#   aggregates  experiment.json's aggregates (mean ± 95% CI over trials) and so the report's rows
#   console     the summary table at the end of `tokenbench run` (a distribution: one row)
#   experiment  the console table at the end of `tokenbench experiment run`
#   report      the headline table of report.html and report.md
#   compare     `tokenbench compare` (each one is a test in the Holm-adjusted family)
View = Literal["aggregates", "console", "experiment", "report", "compare"]

# Periods. The window runs from the end of ramp-up + warm-up to the end of the load.
WINDOW = "the window"
RATE_PERIOD = "the window (open loop: rate_period_s, the window stretched by the backlog's growth)"
SCRAPED = "the window, between the scrapes that bracket it"
SCRAPES_IN = "the scrapes inside the window"

SUCCESSFUL = "successful requests sent in the window (open loop: scheduled in it)"  # a population
GRADED = (  # accuracy's population
    "graded requests: successful requests sent in the window (open loop: scheduled in it) that carried an "
    "expected answer; failed ones are not graded (accuracy.not_graded)"
)


def path(dotted: str) -> Getter:
    """A getter for the number at a dotted attribute path of a point ("ttft_s.mean"): None when
    a step is None (no server figures) or the value is not a number."""
    names = tuple(dotted.split("."))

    def read(point: PointResult) -> float | None:
        value: object = point
        for name in names:
            value = getattr(value, name, None)
            if value is None:
                return None
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    return read


@dataclass(frozen=True)
class Distribution:
    """A per-request distribution of a results.json point (count, mean, std, min, p50, p90, p95,
    p99, p999, max); its statistics are metrics (``stat``)."""

    key: str  # the point's field: "ttft_s" (and the prefix of its metrics' keys: "ttft_s_p99")
    name: str  # "TTFT"
    unit: str  # shown unit
    scale: float  # stored unit -> shown unit
    higher_is_better: bool
    population: str
    period: str = WINDOW
    optional: bool = False  # only some points have it (TTFO: reasoning); views skip it when none do
    at: str | None = None  # where a part of the point holds it ("programs.session_s"); None: at key

    @property
    def field(self) -> str:
        """Its dotted path in a point."""
        return self.at or self.key

    def read(self, point: PointResult, stat: str) -> float | None:
        return path(f"{self.field}.{stat}")(point)

    def stat(self, stat: str, digits: int, views: frozenset[View]) -> Metric:
        """The metric ``<key>_<stat>`` ("ttft_s_p99"), titled "<name> <stat>"."""
        return Metric(
            key=f"{self.key}_{stat}",
            title=f"{self.name} {stat}",
            unit=self.unit,
            scale=self.scale,
            digits=digits,
            higher_is_better=self.higher_is_better,
            population=self.population,
            period=self.period,
            get=path(f"{self.field}.{stat}"),
            views=views,
            distribution=self,
        )


@dataclass(frozen=True)
class Metric:
    """One headline number of a load point: where it is read, how it is shown, which way is better."""

    key: str  # name in experiment.json's aggregates and in compare (public: never renamed)
    title: str  # "TTFT p99"
    unit: str  # shown unit: "ms", "tok/s", "req/s", "%", "" (a count)
    scale: float  # stored unit (s, fraction) -> shown unit (ms, %)
    digits: int  # decimals shown
    higher_is_better: bool
    population: str  # which requests (or tokens) it counts
    period: str  # over which stretch of the point
    get: Getter  # from a results.json point; None when the point does not have it
    views: frozenset[View]
    distribution: Distribution | None = None  # set when it is one statistic of a distribution
    optional: bool = False  # only some runs have it (a price, a GPU); views skip it when none do
    # a proportion: the keys of the metrics holding its successes and its trials (accuracy:
    # correct of graded), so compare and the gate test it as two proportions
    counts: tuple[str, str] | None = None

    @property
    def label(self) -> str:
        """The title with its unit: "TTFT p99 (ms)"."""
        return f"{self.title} ({self.unit})" if self.unit else self.title


def _views(*views: View) -> frozenset[View]:
    return frozenset(views)


# Shorthands for the usual sets of views.
_ALL = _views("aggregates", "console", "report", "compare")
_AGGREGATED = _views("aggregates")

TTFT = Distribution("ttft_s", "TTFT", "ms", 1e3, False, SUCCESSFUL)
# Time to first output (reasoning models): first_output_s - sent_s, the first chunk that is not
# reasoning content (metrics.reasoning). Only on points where reasoning streamed (``optional``).
TTFO = Distribution(
    "ttfo_s", "TTFO", "ms", 1e3, False, SUCCESSFUL + " with an output chunk (not all reasoning)", optional=True
)
TPOT = Distribution("tpot_s", "TPOT", "ms", 1e3, False, SUCCESSFUL + " with a TPOT (at least 2 chunk times)")
DECODE_SPEED = Distribution(
    "decode_speed_tokens_per_s", "decode speed per user", "tok/s", 1.0, True, TPOT.population + ", each 1 / its TPOT"
)
ITL = Distribution("itl_s", "ITL", "ms", 1e3, False, "gaps between consecutive chunks of " + SUCCESSFUL)
# Per-token ITL: each chunk gap over its tokens (metrics.pertoken), with per-chunk token counts only.
ITL_PER_TOKEN = Distribution(
    "itl_per_token_s",
    "ITL per token",
    "ms",
    1e3,
    False,
    "each chunk gap split over its tokens, of " + SUCCESSFUL + " with per-chunk token counts",
    optional=True,
)
E2E = Distribution("e2e_s", "E2E", "ms", 1e3, False, SUCCESSFUL)
QUEUE = Distribution(
    "queue_s",
    "queue delay",
    "ms",
    1e3,
    False,
    "requests sent in the window (open loop: scheduled in it; one never sent counts its wait to the point's end)",
)

# agent programs (--dataset programs): a session's latency, its last call's stream end - its
# scheduled start (metrics/programs.py), over the point's measured sessions
MEASURED_SESSIONS = "sessions that completed (every call sent and ok) and started in the window"
SESSION = Distribution(
    "session_s", "session latency", "s", 1.0, False, MEASURED_SESSIONS, optional=True, at="programs.session_s"
)

# speculative decoding: the tokens each chunk carried (several when a verify step accepts drafts;
# per-chunk ITL is then per-token ITL x that), with per-chunk counts only (metrics.pertoken)
TOKENS_PER_CHUNK = Distribution(
    "tokens_per_chunk",
    "tokens per chunk",
    "tok",
    1.0,
    True,
    "chunks that carried tokens, of " + SUCCESSFUL + " with per-chunk token counts",
    optional=True,
)
# the server's own per-request timing from its responses (metrics/speculation.py): the client's TTFT
# less the server's (from its queue), over the successful requests whose response carried it
WITH_SERVER_TIMING = SUCCESSFUL + " whose response carried the server's own timing"
TTFT_OUTSIDE_SERVER = Distribution(
    "ttft_outside_server_s",
    "TTFT outside the server",
    "ms",
    1e3,
    False,
    WITH_SERVER_TIMING,
    optional=True,
    at="server_timing.ttft_outside_server_s",
)
SERVER_QUEUE = Distribution(
    "reported_queue_s",
    "server queue, reported",
    "ms",
    1e3,
    False,
    WITH_SERVER_TIMING,
    optional=True,
    at="server_timing.queue_s",
)
WITH_SPECULATION = SUCCESSFUL + " whose response carried speculation figures"

# pooling APIs: the distributions a pooling request (one answer, no stream) never has;
# tables of pooling points only leave them out
STREAMED = frozenset({TTFT.key, TTFO.key, TPOT.key, DECODE_SPEED.key, ITL.key, ITL_PER_TOKEN.key})

_METRICS: tuple[Metric, ...] = (
    Metric(
        key="output_tokens_per_s",
        title="output throughput",
        unit="tok/s",
        scale=1.0,
        digits=1,
        higher_is_better=True,
        population="output tokens that arrived in the window (open loop: all of the requests scheduled in it)",
        period=RATE_PERIOD,
        get=path("output_tokens_per_s"),
        views=_ALL | _views("experiment"),
    ),
    Metric(
        key="total_tokens_per_s",
        title="total throughput",
        unit="tok/s",
        scale=1.0,
        digits=1,
        higher_is_better=True,
        population="output throughput's tokens, plus the prompt tokens of the requests request rate counts",
        period=RATE_PERIOD,
        get=path("total_tokens_per_s"),
        views=_views("console"),
    ),
    Metric(
        key="requests_per_s",
        title="request rate",
        unit="req/s",
        scale=1.0,
        digits=2,
        higher_is_better=True,
        population="successful requests, each by its share of life in the window (open loop: those scheduled in it)",
        period=RATE_PERIOD,
        get=path("requests_per_s"),
        views=_ALL,
    ),
    # pooling APIs: a pooling point's throughput (metrics.pooling), beside its request rate
    Metric(
        key="inputs_per_s",
        title="input rate",
        unit="inputs/s",
        scale=1.0,
        digits=1,
        higher_is_better=True,
        population="inputs (strings embedded, documents scored) of the requests request rate counts",
        period=RATE_PERIOD,
        get=path("pooling.inputs_per_s"),
        views=_ALL | _views("experiment"),
        optional=True,
    ),
    Metric(
        key="prompt_tokens_per_s",
        title="prompt throughput",
        unit="tok/s",
        scale=1.0,
        digits=1,
        higher_is_better=True,
        population="prompt tokens (the server's usage) of the requests request rate counts",
        period=RATE_PERIOD,
        get=path("pooling.prompt_tokens_per_s"),
        views=_views("aggregates", "console", "report"),
        optional=True,
    ),
    Metric(
        key="offered_per_s",
        title="offered rate, scheduled in window",
        unit="req/s",
        scale=1.0,
        digits=2,
        higher_is_better=True,  # the load, not a result: no view ranks it
        population="requests scheduled in the window, sent or not (open loop only)",
        period=WINDOW,
        get=path("offered_per_s"),
        views=_views("aggregates", "console"),
    ),
    # the experiment's console table: p50 beside the mean and p99 (a queueing server's p50 of 53 ms
    # hid its mean of 147 ms and p99 of 251 ms)
    TTFT.stat("mean", 1, _ALL | _views("experiment")),
    TTFT.stat("p50", 1, _views("aggregates", "console", "experiment", "report")),
    TTFT.stat("p99", 1, _ALL | _views("experiment")),
    TTFO.stat("mean", 1, _views("aggregates", "console", "report")),
    TTFO.stat("p99", 1, _views("aggregates", "report")),
    # beside TTFT: what prefix caching did for it (METRICS.md "Prefix cache")
    Metric(
        key="prefix_cache_hit_rate",
        title="prefix-cache hit rate",
        unit="%",
        scale=100.0,
        digits=1,
        higher_is_better=True,
        population="prompt tokens served from the prefix cache / prompt tokens, from the best signal there is "
        "(prefix_cache.hit_rate_source: the server's counters, else ok requests' llama.cpp timings or usage)",
        period=SCRAPED,
        get=path("prefix_cache.hit_rate"),
        views=_views("aggregates", "console", "report"),
    ),
    Metric(
        key="prefix_cache_expected_reuse",
        title="expected reuse",
        unit="%",
        scale=100.0,
        digits=1,
        higher_is_better=True,  # the workload, not a result: no view ranks it
        population="prompt tokens an infinite prefix cache would reuse over the workload (a trace's hash ids)",
        period="the whole workload",
        get=path("prefix_cache.expected_reuse"),
        views=_views("aggregates", "report"),
    ),
    TPOT.stat("mean", 2, _ALL | _views("experiment")),
    TPOT.stat("p50", 2, _AGGREGATED),  # median and tail: a serving layer's overhead (report.layers)
    TPOT.stat("p99", 2, _AGGREGATED),
    DECODE_SPEED.stat("mean", 1, _ALL),
    ITL.stat("mean", 2, _views("aggregates", "console")),
    ITL_PER_TOKEN.stat("mean", 2, _views("aggregates", "console", "report")),  # beside ITL, where counts are known
    Metric(
        key="fluidity_index_mean",
        title="fluidity index mean",
        unit="",
        scale=1.0,
        digits=3,
        higher_is_better=True,
        population=SUCCESSFUL + ", each 1 - missed / all of its token deadlines (Etalon; fluidity's deadlines)",
        period=WINDOW,
        get=path("fluidity.index.mean"),
        views=_views("aggregates", "console", "report"),
    ),
    E2E.stat("mean", 1, _ALL),
    E2E.stat("p50", 1, _AGGREGATED),
    E2E.stat("p99", 1, _AGGREGATED),
    QUEUE.stat("mean", 2, _views("aggregates", "console", "report")),
    # agent programs: only on programs points
    SESSION.stat("mean", 3, _views("aggregates", "console", "compare")),
    SESSION.stat("p50", 3, _views("aggregates", "console")),
    SESSION.stat("p90", 3, _views("aggregates", "compare")),
    SESSION.stat("p99", 3, _views("aggregates", "console")),
    Metric(
        key="sessions_per_s",
        title="session rate",
        unit="sessions/s",
        scale=1.0,
        digits=3,
        higher_is_better=True,
        population=MEASURED_SESSIONS,
        period=WINDOW,
        get=path("programs.sessions_per_s"),
        views=_views("aggregates", "console", "compare"),
        optional=True,
    ),
    # speculative decoding: each rate named by its weight (metrics/speculation.py), and the server's
    # counters over the same window beside them
    TOKENS_PER_CHUNK.stat("mean", 2, _views("aggregates", "console", "report")),
    TTFT_OUTSIDE_SERVER.stat("p50", 1, _views("aggregates", "console")),
    SERVER_QUEUE.stat("p50", 1, _views("aggregates", "console")),
    Metric(
        key="acceptance_rate_token_weighted",
        title="draft acceptance, token-weighted",
        unit="%",
        scale=100.0,
        digits=1,
        higher_is_better=True,
        population=WITH_SPECULATION + ": sum accepted / sum drafted",
        period=WINDOW,
        get=path("speculation.acceptance_rate_token_weighted"),
        views=_ALL | _views("experiment"),
        optional=True,
    ),
    Metric(
        key="acceptance_rate_request_weighted",
        title="draft acceptance, request-weighted",
        unit="%",
        scale=100.0,
        digits=1,
        higher_is_better=True,
        population=WITH_SPECULATION + ": the mean of each one's accepted / drafted",
        period=WINDOW,
        get=path("speculation.acceptance_rate_request_weighted"),
        views=_views("aggregates", "console", "report"),
        optional=True,
    ),
    Metric(
        key="acceptance_length_step_weighted",
        title="acceptance length, step-weighted",
        unit="tok/step",
        scale=1.0,
        digits=2,
        higher_is_better=True,
        population=WITH_SPECULATION + ": 1 + sum accepted / sum verify steps",
        period=WINDOW,
        get=path("speculation.acceptance_length_step_weighted"),
        views=_ALL,
        optional=True,
    ),
    Metric(
        key="server_acceptance_rate",
        title="server draft acceptance",
        unit="%",
        scale=100.0,
        digits=1,
        higher_is_better=True,
        population="every draft token the server proposed (its spec-decode counters)",
        period=SCRAPED,
        get=path("speculation.server.acceptance_rate"),
        views=_views("aggregates", "console", "report"),
        optional=True,
    ),
    Metric(
        key="goodput_per_s",
        title="goodput",
        unit="req/s",
        scale=1.0,
        digits=2,
        higher_is_better=True,
        population="as request rate, over the requests that met every objective",
        period=RATE_PERIOD,
        get=path("goodput_per_s"),
        views=_ALL,
    ),
    Metric(
        key="good_fraction",
        title="good",
        unit="%",
        scale=100.0,
        digits=1,
        higher_is_better=True,
        population="requests that ended, each by its share of life in the window (open loop: those scheduled in it)",
        period=WINDOW,
        get=path("good_fraction"),
        views=_views("aggregates", "console", "experiment", "report"),  # the experiment's: where an SLO is set
    ),
    # structured output: replies that met --response-format (metrics/validity.py)
    Metric(
        key="valid_fraction",
        title="valid",
        unit="%",
        scale=100.0,
        digits=1,
        higher_is_better=True,
        population="successful requests of the population that asked for a constraint the client can check "
        "(--response-format: json_object, json_schema, choice, regex)",
        period=WINDOW,
        get=path("structured.valid_fraction"),
        views=_views("aggregates", "console", "experiment", "report"),
        optional=True,
    ),
    # a graded dataset: replies that gave the expected answer (metrics/accuracy.py)
    Metric(
        key="accuracy",
        title="accuracy",
        unit="%",
        scale=100.0,
        digits=1,
        higher_is_better=True,
        population=GRADED,
        period=WINDOW,
        get=path("accuracy.accuracy"),
        views=_views("aggregates", "console", "experiment", "report", "compare"),
        optional=True,
        counts=("accuracy_correct", "accuracy_graded"),
    ),
    Metric(
        key="accuracy_correct",
        title="correct",
        unit="",
        scale=1.0,
        digits=0,
        higher_is_better=True,
        population=GRADED,
        period=WINDOW,
        get=path("accuracy.correct"),
        views=_AGGREGATED,
        optional=True,
    ),
    Metric(
        key="accuracy_graded",
        title="graded",
        unit="",
        scale=1.0,
        digits=0,
        higher_is_better=True,
        population="successful requests of the population that carried an expected answer (failed ones: not graded)",
        period=WINDOW,
        get=path("accuracy.graded"),
        views=_AGGREGATED,
        optional=True,
    ),
    Metric(
        key="accuracy_not_graded",
        title="not graded",
        unit="",
        scale=1.0,
        digits=0,
        higher_is_better=False,
        population="requests of the population that carried an expected answer and failed (no reply to grade)",
        period=WINDOW,
        get=path("accuracy.not_graded"),
        views=_AGGREGATED,
        optional=True,
    ),
    Metric(
        key="error_rate",
        title="errors",
        unit="%",
        scale=100.0,
        digits=1,
        higher_is_better=False,
        population="requests sent in the window (open loop: scheduled in it) that ended: not cancelled or never sent",
        period=WINDOW,
        get=error_rate,
        views=_views("aggregates", "experiment", "report", "compare"),
    ),
    # a run given a price (--cost-per-hour) and a machine with a GPU: docs/usage.md, "Cost and energy"
    Metric(
        key="usd_per_million_output_tokens",
        title="cost per 1M output tokens",
        unit="USD",
        scale=1.0,
        digits=3,
        higher_is_better=False,
        population="output throughput's tokens, priced at --cost-per-hour x --gpus",
        period=RATE_PERIOD,
        get=path("cost.usd_per_million_output_tokens"),
        views=_views("aggregates", "console", "report"),
        optional=True,
    ),
    Metric(
        key="joules_per_output_token",
        title="energy per output token",
        unit="J",
        scale=1.0,
        digits=3,
        higher_is_better=False,
        population="every GPU's mean power over the window (NVML) / output throughput",
        period=WINDOW,
        get=path("energy.joules_per_output_token"),
        views=_views("aggregates", "console", "report"),
        optional=True,
    ),
    Metric(
        key="server_preemptions",
        title="server preemptions",
        unit="",
        scale=1.0,
        digits=0,
        higher_is_better=False,
        population="every request the server ran (its counter)",
        period=SCRAPED,
        get=path("server.preemptions"),
        views=_views("aggregates", "experiment", "report"),
    ),
    Metric(
        key="server_ttft_s_mean",
        title="server TTFT mean",
        unit="ms",
        scale=1e3,
        digits=1,
        higher_is_better=False,
        population="every request the server gave a first token (its histogram)",
        period=SCRAPED,
        get=path("server.ttft_s_mean"),
        views=_AGGREGATED,
    ),
    Metric(
        key="server_kv_usage_max",
        title="server KV usage max",
        unit="%",
        scale=100.0,
        digits=1,
        higher_is_better=False,
        population="the server's KV-cache usage gauge",
        period=SCRAPES_IN,
        get=path("server.kv_usage.max"),
        views=_views("aggregates", "report"),
    ),
    Metric(
        key="server_prefix_cache_hit_rate",
        title="server prefix-cache hit rate",
        unit="%",
        scale=100.0,
        digits=1,
        higher_is_better=True,
        population="prompt tokens the server looked up in its prefix cache (its hit and query counters)",
        period=SCRAPED,
        get=path("server.prefix_cache_hit_rate"),
        views=_views("aggregates", "report"),
    ),
    # what the launched server's processes cost the host (common.procs.tree_cpu_s)
    Metric(
        key="server_cpu_cores_mean",
        title="server CPU",
        unit="cores",
        scale=1.0,
        digits=2,
        higher_is_better=False,
        population="every process of the server tokenbench launched (its trees: engine, layer, replicas, router)",
        period=SCRAPED,
        get=path("server_cpu.cores_mean"),
        views=_views("aggregates", "console", "report"),
        optional=True,
    ),
    # the client's own health, declared beside its rule (telemetry.client_health.CLIENT_METRICS)
    *(
        Metric(k, t, u, scale, 1, False, CLIENT_POPULATION, WINDOW, get, _views("aggregates", "report"), None, True)
        for k, t, u, scale, get in CLIENT_METRICS
    ),
)

METRICS: dict[str, Metric] = {m.key: m for m in _METRICS}


# the distributions a statistic of which may be named by key ("ttft_s_p90") without an entry of its own
STAT_DISTRIBUTIONS: tuple[Distribution, ...] = (TTFT, TTFO, TPOT, DECODE_SPEED, ITL, E2E, QUEUE, SESSION)
STAT_NAMES = ("mean", "std", "min", "p50", "p90", "p95", "p99", "p999", "max")


def metric_of(key: str) -> Metric | None:
    """The catalogue's metric ``key``, or one statistic of a distribution without an entry of its
    own ("ttft_s_p90": the gate's and an imported report's); None for any other key."""
    if key in METRICS:
        return METRICS[key]
    for d in STAT_DISTRIBUTIONS:
        stat = key.removeprefix(d.key + "_")
        if stat != key and stat in STAT_NAMES:
            return d.stat(stat, 2, frozenset())
    return None


def shown_in(view: View) -> tuple[Metric, ...]:
    """The metrics a view shows, in catalogue order."""
    return tuple(m for m in METRICS.values() if view in m.views)


# The metrics code refers to by role (the verdict's picks, the saturation rule, the charts).
OUTPUT_TOKENS_PER_S = METRICS["output_tokens_per_s"]
REQUESTS_PER_S = METRICS["requests_per_s"]
OFFERED_PER_S = METRICS["offered_per_s"]
TTFT_MEAN = METRICS["ttft_s_mean"]
TTFT_P50 = METRICS["ttft_s_p50"]
GOODPUT_PER_S = METRICS["goodput_per_s"]
GOOD_FRACTION = METRICS["good_fraction"]
SERVER_PREEMPTIONS = METRICS["server_preemptions"]
SERVER_TTFT_MEAN = METRICS["server_ttft_s_mean"]
PREFIX_CACHE_HIT_RATE = METRICS["prefix_cache_hit_rate"]
PREFIX_CACHE_EXPECTED_REUSE = METRICS["prefix_cache_expected_reuse"]
USD_PER_MILLION_OUTPUT_TOKENS = METRICS["usd_per_million_output_tokens"]
ACCURACY = METRICS["accuracy"]
CLIENT_LIMITED = METRICS["client_limited"]


# The objectives of an SLO (results.json's "slo"), by the distribution each bounds.
SLO_DISTRIBUTIONS: tuple[Distribution, ...] = (TTFT, TPOT, E2E)
