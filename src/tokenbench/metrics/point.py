"""Records -> one point's metrics (summarize_point): populations, rates, goodput, concurrency."""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenbench.config.slo import SLOConfig
from tokenbench.metrics.accuracy import accuracy_metrics
from tokenbench.metrics.chunks import CancelledOutput, ChunkTally
from tokenbench.metrics.images import image_metrics
from tokenbench.metrics.pooling import is_pooling, pooling_metrics
from tokenbench.metrics.reasoning import reasoning_metrics
from tokenbench.metrics.span import PointSpan, Window, lifetimes, tokens_per_chunk
from tokenbench.metrics.stats import distribution
from tokenbench.metrics.validity import validity_metrics
from tokenbench.records import UNFINISHED, Outcome, RequestRecord
from tokenbench.results import Concurrency, Populations, Requests, ServerVsClient, Tokens, WindowSpan
from tokenbench.results.run import PointMetrics

# The backlog growth of an open-loop point is estimated from the medians of its first and last
# thirds only with at least this many requests in each: with one or two, a single long reply
# looks like a trend (seen: 4 Poisson arrivals at 0.25/s, E2E 2.3-2.9 s, "grew" 0.5 s: -2.5%).
MIN_THIRD = 3

_OPEN_LOOP = Populations(
    distributions="requests scheduled in the window, sent or not (latencies: the successful ones)",
    rates="the same requests' work over rate_period_s: the window stretched by their backlog growth",
    goodput="as requests/s, over the requests that met every objective",
)
# by the load's kind (closed loop: users; open loop: rate, and replay: a trace's schedule, whose
# offered_per_s is the rows it scheduled in the window / the window)
POPULATIONS: dict[str, Populations] = {
    "users": Populations(
        distributions="requests sent in the window (latencies: the successful ones)",
        rates="the window: tokens that arrived in it; requests by the share of their life in it",
        goodput="as requests/s, over the requests that met every objective",
    ),
    "rate": _OPEN_LOOP,
    "replay": _OPEN_LOOP,
}


def meets_slo(r: RequestRecord, slo: SLOConfig) -> bool:
    """Every objective met, with TTFT and E2E counted from when the request was *scheduled*: the
    user waited for a concurrency slot too (closed loop sends at once, so it is the same there).
    A request that waited 60 s for a slot and then streamed quickly is not good."""
    if r.outcome is not Outcome.OK:
        return False
    queue = r.queue_s or 0.0
    ttft = r.ttft_s + queue if r.ttft_s is not None else None
    e2e = r.e2e_s + queue if r.e2e_s is not None else None
    for limit, value in ((slo.ttft_s, ttft), (slo.tpot_s, r.tpot_s), (slo.e2e_s, e2e)):
        # A TPOT of a 1-token reply is undefined: it cannot violate the TPOT objective.
        if limit is not None and value is not None and value > limit:
            return False
    return True


def concurrency(records: Sequence[RequestRecord], window: Window) -> Concurrency:
    """Mean in-flight requests over the window (sum of in-flight time / window) and the peak,
    counting the requests already in flight when the window opens."""
    if window.length_s <= 0:
        return Concurrency(mean=None, peak=0)
    sent, end = lifetimes(records)
    if sent.size == 0:
        return Concurrency(mean=0.0, peak=0)
    overlap = np.maximum(0.0, np.minimum(end, window.end_s) - np.maximum(sent, window.start_s))
    busy = sum(overlap.tolist())  # in record order, as a running total
    times = np.concatenate([sent, end])
    steps = np.concatenate([np.ones(sent.size, dtype=np.int64), np.full(end.size, -1, dtype=np.int64)])
    order = np.lexsort((steps, times))  # by time; at equal times an end (-1) before a start (+1)
    times = times[order]
    levels = np.cumsum(steps[order])  # in flight after each event
    first = int(np.searchsorted(times, window.start_s, side="left"))  # first event in or after it
    if first == times.size:
        return Concurrency(mean=busy / window.length_s, peak=0)
    peak = int(levels[first - 1]) if first > 0 else 0  # the level as the window opens
    last = int(np.searchsorted(times, window.end_s, side="left"))
    if last > first:
        peak = max(peak, int(levels[first:last].max()))
    return Concurrency(mean=busy / window.length_s, peak=peak)


def count_outcomes(records: Iterable[RequestRecord]) -> Requests:
    by_outcome: dict[str, int] = {}
    retries = retried = unterminated = 0
    for r in records:
        by_outcome[r.outcome.value] = by_outcome.get(r.outcome.value, 0) + 1
        if r.retries:
            retries += r.retries
            retried += 1
        if r.outcome is Outcome.OK and not r.end_marker:
            unterminated += 1
    total = sum(by_outcome.values())
    return Requests(
        total=total,
        ok=by_outcome.get(Outcome.OK.value, 0),
        by_outcome=by_outcome,
        # re-sends after a dead reused connection (records' ``retries``), and how many requests
        retries=retries,
        retried_requests=retried,
        # ok streams that ended without their protocol's end marker ([DONE], a finish reason)
        ok_without_end_marker=unterminated,
    )


def token_counts(records: Iterable[RequestRecord]) -> Tokens:
    """Where output token counts came from, and how the server and client counts disagree. The
    server's count of a reply ended on EOS includes the EOS, which is never streamed: the client
    tokenizer is compared with the streamed count (``RequestRecord.streamed_tokens``)."""
    sources: dict[str, int] = {}
    diffs: list[int] = []
    eos = 0
    for r in records:
        if r.output_tokens_source is not None:
            sources[r.output_tokens_source.value] = sources.get(r.output_tokens_source.value, 0) + 1
        eos += r.eos_unstreamed
        if r.server_output_tokens is not None and r.client_output_tokens is not None:
            server = r.server_output_tokens - (1 if r.eos_unstreamed else 0)
            diffs.append(r.client_output_tokens - server)
    compared = len(diffs)
    return Tokens(
        output_tokens_source=sources,
        eos_counted_not_streamed=eos,
        server_vs_client=ServerVsClient(
            compared=compared,
            mismatched=sum(1 for d in diffs if d != 0),
            mean_client_minus_server=float(np.mean(diffs)) if compared else None,
        ),
    )


def prompt_tokens(r: RequestRecord) -> tuple[int | None, str]:
    """The request's prompt tokens and where the count came from: the server's usage, else the
    dataset's count of what was sent (exact when the dataset says ``exact_lengths``)."""
    if r.prompt_tokens is not None:
        return r.prompt_tokens, "server"
    if r.dataset_prompt_tokens is not None:
        return r.dataset_prompt_tokens, "dataset"
    return None, "unknown"


def backlog_growth_s(population: Sequence[RequestRecord], window: Window, point_end_s: float) -> tuple[float, bool]:
    """How much longer than the window the server took to serve an open-loop population.

    lag = (end, or the point's end for a request that never ended) - scheduled. With the
    population ordered by schedule, the growth is the slope between the medians of its first and
    last thirds (robust to a few long replies), times the window: 0 when the server keeps up
    (the lag is stationary), the extra time the backlog took when it does not. Second value:
    True when most of the last third was still unserved at the point's end (the lags are only
    lower bounds there and the slope means nothing; the server was busy until then). Fewer than
    ``MIN_THIRD`` requests per third: no growth is estimated."""
    rows = sorted(population, key=lambda r: r.scheduled_s)
    k = len(rows) // 3
    if k == 0:
        return 0.0, False
    censored = sum(r.outcome in UNFINISHED for r in rows[-k:]) * 2 > k
    if k < MIN_THIRD:
        return 0.0, censored  # too few to tell a trend from one long reply

    def lag(r: RequestRecord) -> float:
        end = r.closed_s if r.outcome not in UNFINISHED and r.closed_s is not None else point_end_s
        return end - r.scheduled_s

    first, last = rows[:k], rows[-k:]
    span = statistics.median(r.scheduled_s for r in last) - statistics.median(r.scheduled_s for r in first)
    if span <= 0:
        return 0.0, censored
    slope = (statistics.median(map(lag, last)) - statistics.median(map(lag, first))) / span
    return max(0.0, slope * window.length_s), censored


def summarize_point(
    records: Sequence[RequestRecord], span: PointSpan, slo: SLOConfig, chunks: ChunkTally | None = None
) -> PointMetrics:
    """The aggregate metrics of one load point (the metrics of results.json's ``points[]``).
    ``chunks``: the records' chunk times already tallied (ChunkTally.consume, which returns the
    records without them); by default they are tallied here from ``records``."""
    chunks = chunks if chunks is not None else ChunkTally.of(span, records)
    window = span.window
    population = [r for r in records if chunks.in_population(r)]
    ok = [r for r in population if r.outcome is Outcome.OK]
    basis = (
        _open_loop_basis(population, span)
        if span.open_loop
        else _closed_loop_basis(records, window, chunks.window_tokens)
    )
    rates = _rates(basis, population, slo, span.open_loop, chunks.in_population)
    tpots = [r.tpot_s for r in ok if r.tpot_s is not None]
    pooling = is_pooling(records)  # pooling APIs: no output tokens, so no token rates
    return PointMetrics(
        window_s=window.length_s,
        window=WindowSpan(start_s=window.start_s, end_s=window.end_s),
        populations=POPULATIONS["rate" if span.open_loop else "users"],
        rate_period_s=basis.period_s if basis.period_s > 0 else None,
        backlog_growth_s=basis.backlog_growth_s,
        offered_per_s=_per(len(population), window.length_s) if span.open_loop else None,
        requests=count_outcomes(records),
        requests_in_window=count_outcomes(population),
        ttft_s=distribution(r.ttft_s for r in ok if r.ttft_s is not None),
        tpot_s=distribution(tpots),
        decode_speed_tokens_per_s=distribution(1.0 / t for t in tpots if t > 0),
        itl_s=distribution(chunks.take_itl_gaps(), consume=True),
        **chunks.tokens.results(),  # itl_per_token_s, fluidity
        e2e_s=distribution(r.e2e_s for r in ok if r.e2e_s is not None),
        queue_s=distribution(w for w in (r.wait_s for r in population) if w is not None),
        queue_s_censored=sum(1 for r in population if r.outcome is Outcome.NOT_SENT),
        normalized_latency_s=distribution(
            r.e2e_s / r.output_tokens for r in ok if r.e2e_s is not None and r.output_tokens
        ),
        output_tokens=basis.output_tokens,
        **cancelled_output(population if span.open_loop else None, chunks),
        output_tokens_per_s=None if pooling else rates.output_tokens_per_s,
        total_tokens_per_s=None if pooling else rates.total_tokens_per_s,
        prompt_tokens_source=rates.prompt_tokens_source,
        requests_per_s=rates.requests_per_s,
        goodput_per_s=rates.goodput_per_s,
        good_fraction=rates.good_fraction,
        concurrency=concurrency(records, window),
        tokens=token_counts(population),
        **reasoning_metrics(population),  # only when reasoning streamed: keeps the shape otherwise
        **(pooling_metrics(basis.rated, basis.weight, basis.period_s, prompt_tokens) if pooling else {}),
        **image_metrics(population, rates.requests_per_s),  # images: only when some carried images
        **validity_metrics(population),  # only when structure or tools were asked for
        **accuracy_metrics(population),  # only when some request carried an expected answer
    )


def cancelled_output(open_loop_population: list[RequestRecord] | None, chunks: ChunkTally) -> dict[str, Any]:
    """``cancelled_output_tokens`` and ``cancelled_streams``: of ``output_tokens``, those of
    streams cancelled mid-reply (in flight when the point or the run stopped), counted by the same
    rule (closed loop: arrived in the window; open loop: the population's whole output). Request
    rate counts completed requests only, so over a short or interrupted point tok/s and req/s read
    apart by these tokens. Only set when some cancelled stream gave output: a point without keeps
    results.json's shape."""
    if open_loop_population is not None:
        cancelled = CancelledOutput()
        cancelled.add_records(open_loop_population)
    else:
        cancelled = chunks.cancelled_window_output
    if not cancelled.streams:
        return {}
    return {"cancelled_output_tokens": cancelled.tokens, "cancelled_streams": cancelled.streams}


def error_rate(point: PointMetrics) -> float | None:
    """Failed requests over requests that ended, in the point's population (``requests_in_window``).
    Cancelled and never-sent requests did not end: they are counted apart (``requests.by_outcome``),
    in neither numerator nor denominator, the same rule as ``good_fraction``."""
    req = point.requests_in_window
    ended = req.total - sum(req.by_outcome.get(o.value, 0) for o in UNFINISHED)
    return (ended - req.ok) / ended if ended else None


def _per(amount: float, period_s: float) -> float | None:
    """``amount`` per second of ``period_s``; None over no time."""
    return amount / period_s if period_s > 0 else None


@dataclass(frozen=True)
class _Rates:
    """A point's rates over its basis' period, and its goodput (None without objectives)."""

    output_tokens_per_s: float | None
    total_tokens_per_s: float | None
    prompt_tokens_source: dict[str, int]
    requests_per_s: float | None
    goodput_per_s: float | None
    good_fraction: float | None


def _rates(
    basis: _RateBasis,
    population: list[RequestRecord],
    slo: SLOConfig,
    open_loop: bool,
    in_population: Callable[[RequestRecord], bool],
) -> _Rates:
    """Output and total tokens, requests and good requests per second of the basis' period."""
    period, weight = basis.period_s, basis.weight
    ok_rated = [r for r in basis.rated if r.outcome is Outcome.OK]
    completed = sum(weight(r) for r in ok_rated)
    sources, prompt_total = _prompt_tokens_of(ok_rated, weight)
    out_rate = _per(basis.output_tokens, period)
    prompt_rate = _per(prompt_total, period) if "unknown" not in sources else None
    good, good_fraction = _goodput(basis, population, slo, open_loop, in_population) if slo.any else (None, None)
    return _Rates(
        output_tokens_per_s=out_rate,
        total_tokens_per_s=(out_rate + prompt_rate) if out_rate is not None and prompt_rate is not None else None,
        prompt_tokens_source=sources,
        requests_per_s=_per(completed, period),
        goodput_per_s=_per(good, period) if good is not None else None,
        good_fraction=good_fraction,
    )


def _prompt_tokens_of(
    ok_rated: list[RequestRecord], weight: Callable[[RequestRecord], float]
) -> tuple[dict[str, int], float]:
    """Where the rated requests' prompt token counts came from, and their weighted sum."""
    sources: dict[str, int] = {}
    prompt_total = 0.0
    for r in ok_rated:
        n, source = prompt_tokens(r)
        sources[source] = sources.get(source, 0) + 1
        prompt_total += (n or 0) * weight(r)
    return sources, prompt_total


def _goodput(
    basis: _RateBasis,
    population: list[RequestRecord],
    slo: SLOConfig,
    open_loop: bool,
    in_population: Callable[[RequestRecord], bool],
) -> tuple[float, float | None]:
    """The good requests (in the population, every objective met), weighted as the rates count
    them, and their share of the ended ones. No set of them is kept: a long point's population is
    hundreds of thousands of requests."""
    weight, rated = basis.weight, basis.rated
    good = sum(weight(r) for r in rated if in_population(r) and meets_slo(r, slo))
    if open_loop:
        ended = [r for r in population if r.outcome not in UNFINISHED]
        denominator = len(ended)
        return good, (sum(1 for r in ended if meets_slo(r, slo)) / denominator) if denominator else None
    done = sum(weight(r) for r in rated if r.outcome not in UNFINISHED)
    return good, good / done if done else None


@dataclass(frozen=True)
class _RateBasis:
    """What a point's rates count and over which period: each counted request's weight (1, or
    its share of life in the window), the output tokens, and the period."""

    rated: list[RequestRecord]
    weight: Callable[[RequestRecord], float]  # computed again at each use: no mapping of them is held
    output_tokens: float
    period_s: float
    backlog_growth_s: float | None


def _open_loop_basis(population: list[RequestRecord], span: PointSpan) -> _RateBasis:
    """The population's whole work over the time the server took to serve it."""
    growth, censored = backlog_growth_s(population, span.window, span.end_s)
    # Most of the last third never ended: the server was still serving the population when the
    # point ended (their lags are only lower bounds), so the period runs to the end.
    period = span.end_s - span.window.start_s if censored else span.window.length_s + growth
    tokens = sum(len(r.chunk_times_s) * tokens_per_chunk(r) for r in population)
    return _RateBasis(population, _whole, tokens, period, growth)


def _closed_loop_basis(records: Sequence[RequestRecord], window: Window, tokens: float) -> _RateBasis:
    """Tokens that arrived in the window (tallied), requests by their share of life in it."""
    rated = [r for r in records if _share_in(r, window) > 0]
    return _RateBasis(rated, functools.partial(_share_in, window=window), tokens, window.length_s, None)


def _whole(_: RequestRecord) -> float:
    return 1.0


def _share_in(r: RequestRecord, window: Window) -> float:
    """The share of a request's life (sent to end) inside the window; a request with no duration
    counts whole if it was sent in the window."""
    if r.sent_s is None:
        return 0.0
    end = r.end_s if r.outcome is Outcome.OK and r.end_s is not None else r.closed_s
    if end is None or end <= r.sent_s:
        return 1.0 if window.contains(r.sent_s) else 0.0
    return window.overlap_s(r.sent_s, end) / (end - r.sent_s)
