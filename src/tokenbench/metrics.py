"""Records -> metrics. Pure functions: no clock, no I/O, no printing. Formulas: METRICS.md.

Every rate and distribution names its population and its period (``POPULATIONS``, also written
into each point of results.json):

- The window: from the end of ramp-up + warm-up to the end of the load (the deadline).
- Closed loop (users): distributions over the requests sent in the window. Rates over the
  window: output tokens that arrived in it, and requests counted by the share of their life
  (sent to end) inside it, so a steady point with U users at E2E L gives U/L, however the
  window cuts their requests. Goodput counts the good ones the same way, so goodput <= requests/s.
- Open loop (rates): the population is the requests *scheduled* in the window, sent or not;
  distributions, rates and goodput are all over it. Its work (requests, tokens) is divided by
  the time the server took to serve it: the window, stretched by how much the population's
  latency grew from its first third to its last (0 when the server keeps up, so requests/s
  equals the offered rate at any point length of a few E2Es: neither the pipeline fill at the
  start nor the tail after the last arrival biases it); or, when most of its last third was
  still unserved as the point ended, up to the end of the point. A request never sent waited at least until the
  point ended: that lower bound is in the queue-delay distribution (``queue_s_censored`` counts
  them), never dropped.
- Latency distributions are over successful requests; requests the run stopped (cancelled,
  not_sent) are censored: left out of error_rate and good_fraction alike.
A request's output tokens are spread evenly over its content chunks to place them in time.

Per-chunk work is vectorized: a record's ``chunk_times_s`` (an ``array('d')``) is read as a numpy
array without a copy, a point's chunks are concatenated once, and window counts are one pass over
the sorted window edges. Python loops run once per request or per window, never per chunk.
"""

from __future__ import annotations

import statistics
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .config import SLOConfig
from .records import UNFINISHED, ChunkEnds, Outcome, RequestRecord

PERCENTILES = (50, 90, 95, 99, 99.9)
# p99.9 of fewer samples is the maximum by another name (numpy's linear rank n*0.999 is within one
# sample of the top): it is null below this count; p99 and max are there to read instead.
P999_MIN_COUNT = 1000

# The backlog growth of an open-loop point is estimated from the medians of its first and last
# thirds only with at least this many requests in each: with one or two, a single long reply
# looks like a trend (seen: 4 Poisson arrivals at 0.25/s, E2E 2.3-2.9 s, "grew" 0.5 s: -2.5%).
MIN_THIRD = 3

POPULATIONS = {
    "users": {
        "distributions": "requests sent in the window (latencies: the successful ones)",
        "rates": "the window: tokens that arrived in it; requests by the share of their life in it",
        "goodput": "as requests/s, over the requests that met every objective",
    },
    "rate": {
        "distributions": "requests scheduled in the window, sent or not (latencies: the successful ones)",
        "rates": "the same requests' work over rate_period_s: the window stretched by their backlog growth",
        "goodput": "as requests/s, over the requests that met every objective",
    },
}


@dataclass(frozen=True)
class Distribution:
    count: int
    mean: float | None
    std: float | None  # sample standard deviation (n - 1); None below 2 values
    min: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    p999: float | None  # None below P999_MIN_COUNT values
    max: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def distribution(values: Iterable[float] | np.ndarray, *, consume: bool = False) -> Distribution:
    """Count, mean, sample std, min, percentiles and max of ``values``: a numpy array (used as
    is), a list or tuple, or any iterable of floats. ``consume=True`` lets the percentiles
    reorder the array in place (no copy of a point's ITL gaps): pass it only an array nobody
    reads afterwards."""
    if isinstance(values, np.ndarray):
        arr = values.astype(np.float64, copy=False).ravel()
    elif isinstance(values, (list, tuple)):
        arr = np.array(values, dtype=np.float64)
        consume = True
    else:
        arr = np.fromiter(values, dtype=np.float64)
        consume = True
    if arr.size == 0:
        return Distribution(0, *([None] * 9))
    mean = float(arr.mean())  # before the percentiles reorder it (a sum depends on the order)
    std = _sample_std(arr) if arr.size >= 2 else None
    lo, hi = float(arr.min()), float(arr.max())
    p = np.percentile(arr, PERCENTILES, overwrite_input=consume)
    return Distribution(
        count=int(arr.size),
        mean=mean,
        std=std,
        min=lo,
        p50=float(p[0]),
        p90=float(p[1]),
        p95=float(p[2]),
        p99=float(p[3]),
        p999=float(p[4]) if arr.size >= P999_MIN_COUNT else None,
        max=hi,
    )


# Squares of deviations are summed a block at a time: numpy's std holds a temporary as large as
# its input (a point's ITL gaps: 8 bytes a chunk more). Up to one block it is numpy's std exactly.
_STD_BLOCK = 1 << 20


def _sample_std(arr: np.ndarray) -> float:
    """``arr.std(ddof=1)`` without a temporary the size of ``arr``: numpy's own arithmetic
    (pairwise sums) within each block of ``_STD_BLOCK`` values, the blocks' sums added in order."""
    if arr.size <= _STD_BLOCK:
        return float(arr.std(ddof=1))
    mean = np.add.reduce(arr, keepdims=True) / arr.size  # as numpy's _var computes it
    squares = 0.0
    for i in range(0, arr.size, _STD_BLOCK):
        x = arr[i : i + _STD_BLOCK] - mean
        squares += float(np.add.reduce(np.multiply(x, x, out=x)))
    return float(np.sqrt(squares / (arr.size - 1)))


@dataclass(frozen=True)
class Window:
    start_s: float
    end_s: float

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s

    def contains(self, t: float) -> bool:
        return self.start_s <= t < self.end_s

    def overlap_s(self, lo: float, hi: float) -> float:
        return max(0.0, min(hi, self.end_s) - max(lo, self.start_s))


@dataclass(frozen=True)
class PointSpan:
    """What a point's metrics need beside its records: how its load ran and when it ended."""

    window: Window
    open_loop: bool
    end_s: float  # the end of the point, after the drain


def started_s(r: RequestRecord) -> float:
    return r.sent_s if r.sent_s is not None else r.scheduled_s


def tokens_per_chunk(r: RequestRecord) -> float:
    if not r.chunk_times_s:
        return 0.0
    return (r.output_tokens or len(r.chunk_times_s)) / len(r.chunk_times_s)


def _as_sequence(records: Iterable[RequestRecord]) -> Sequence[RequestRecord]:
    return records if isinstance(records, Sequence) else list(records)


def _chunk_times(records: Sequence[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Every chunk time of ``records``, record after record, as one float64 array (one copy of
    the records' arrays, no Python float per chunk), and each record's chunk count."""
    arrays = []
    for r in records:
        if isinstance(r.chunk_times_s, ChunkEnds):
            raise ValueError("these records' chunk times were dropped (ChunkEnds): use the point's ChunkTally")
        arrays.append(r.chunk_times_s)
    counts = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    if all(type(a) is array and a.typecode == "d" for a in arrays):
        return np.frombuffer(b"".join(arrays), dtype=np.float64), counts  # byte for byte
    # a record given a list of times after construction
    parts = [np.asarray(a, dtype=np.float64) for a in arrays]
    return (np.concatenate(parts) if parts else np.empty(0)), counts


def _window_of(edges: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For contiguous windows [edges[i], edges[i+1]): the index of the window holding each ``t``,
    -1 before the first and len(edges) - 1 from the last edge on (and for NaN)."""
    return np.searchsorted(edges, t, side="right") - 1


def _token_runs(records: Sequence[RequestRecord], edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Output tokens that arrived in windows [edges[i], edges[i+1]) (edges sorted), as runs in
    record order: each run's window and tokens (its chunks in it x its record's tokens_per_chunk).
    Summed in order (bincount, np.add.at) they are the per-window sums of the loop over records."""
    k = len(edges) - 1
    times, counts = _chunk_times(records)
    if k <= 0 or times.size == 0:
        return np.empty(0, dtype=np.int64), np.empty(0)
    n = times.size
    window = _window_of(edges, times)
    del times
    # Runs of consecutive chunks of one record in one window (a record's chunks arrive in order):
    # each run adds its chunk count x the record's tokens per chunk, as the loop over records did.
    ends = np.cumsum(counts)
    new_run = np.empty(n, dtype=bool)
    new_run[0] = True
    np.not_equal(window[1:], window[:-1], out=new_run[1:])
    new_run[ends[:-1][ends[:-1] < n]] = True  # each record starts a run
    starts = np.flatnonzero(new_run)
    del new_run
    run_n = np.diff(starts, append=n)
    run_window = window[starts]
    run_record = np.searchsorted(ends, starts, side="right")
    inside = (run_window >= 0) & (run_window < k)
    per_chunk = np.fromiter((tokens_per_chunk(r) for r in records), dtype=np.float64, count=len(records))
    return run_window[inside], run_n[inside] * per_chunk[run_record[inside]]


def _tokens_by_window(records: Sequence[RequestRecord], edges: np.ndarray) -> np.ndarray:
    """Output tokens whose chunk arrived in each window [edges[i], edges[i+1]) (edges sorted):
    per window, the sum over records (in their order) of chunks in it x tokens_per_chunk."""
    k = max(len(edges) - 1, 0)
    windows, tokens = _token_runs(records, edges)
    return np.bincount(windows, weights=tokens, minlength=k) if windows.size else np.zeros(k)


def output_tokens_in(records: Iterable[RequestRecord], window: Window) -> float:
    """Output tokens whose chunk arrived inside ``window`` (partial output of failures included)."""
    if not window.end_s > window.start_s:
        return 0.0
    edges = np.array([window.start_s, window.end_s])
    return float(_tokens_by_window(_as_sequence(records), edges)[0])


def inter_chunk_gaps(records: Iterable[RequestRecord]) -> np.ndarray:
    """Every gap between consecutive chunks of a request, request after request (pooled ITL)."""
    times, counts = _chunk_times(_as_sequence(records))
    n = times.size
    if n < 2:
        return np.empty(0)
    gaps = np.diff(times)
    del times  # a point's chunks: no third copy of them at once
    keep = np.ones(n - 1, dtype=bool)
    starts = np.cumsum(counts)[:-1]
    keep[starts[(starts > 0) & (starts < n)] - 1] = False  # across two requests
    return gaps[keep]


# Records are tallied this many chunks at a time (a batch's arrays: ~40 bytes a chunk, transient).
TALLY_BATCH_CHUNKS = 1 << 20


class ChunkTally:
    """Everything a point's results read from chunk times, tallied batch by batch of records, so a
    point's summary never holds all its chunk times: the output tokens that arrived in the window
    (closed loop), the pooled ITL gaps of its successful requests (8 bytes a gap, the one thing
    kept per chunk) and the tokens per time-series window. Sums run in record order, as over one
    batch: the result does not depend on how the records were batched."""

    def __init__(self, span: PointSpan, series_edges: np.ndarray | None = None) -> None:
        self.span = span
        window = span.window
        self._window_edges = np.array([window.start_s, window.end_s]) if window.end_s > window.start_s else None
        self._window_tokens = np.zeros(1)
        self._series_edges = series_edges
        self._series_tokens = np.zeros(max(len(series_edges) - 1, 0)) if series_edges is not None else None
        self._gaps = np.empty(0)
        self._num_gaps = 0

    def in_population(self, r: RequestRecord) -> bool:
        """Open loop: scheduled in the window; closed loop: started in it (METRICS.md)."""
        return self.span.window.contains(r.scheduled_s if self.span.open_loop else started_s(r))

    def add(self, records: Sequence[RequestRecord]) -> None:
        """Tally a batch of records (full chunk times), in the order they come."""
        if self._window_edges is not None and not self.span.open_loop:
            np.add.at(self._window_tokens, *_token_runs(records, self._window_edges))
        if self._series_edges is not None and self._series_tokens is not None:
            np.add.at(self._series_tokens, *_token_runs(records, self._series_edges))
        gaps = inter_chunk_gaps([r for r in records if r.outcome is Outcome.OK and self.in_population(r)])
        need = self._num_gaps + gaps.size
        if need > self._gaps.size:
            # Grown to the size needed, in place: numpy reallocs, and glibc moves a large block's
            # pages (mremap) instead of copying them. Measured: 40 growths to 320 MB, peak RSS
            # 320 MB (spare capacity would cost its size: resize zeroes it).
            self._gaps.resize(need, refcheck=False)
        self._gaps[self._num_gaps : need] = gaps
        self._num_gaps = need

    def consume(self, records: Iterable[RequestRecord]) -> list[RequestRecord]:
        """Tally ``records`` (any iterable, e.g. read from disk) ``TALLY_BATCH_CHUNKS`` chunks at a
        time; returns them without their chunk times (RequestRecord.without_chunks)."""
        kept: list[RequestRecord] = []
        batch: list[RequestRecord] = []
        chunks = 0
        for r in records:
            batch.append(r)
            chunks += len(r.chunk_times_s)
            if chunks >= TALLY_BATCH_CHUNKS:
                self.add(batch)
                kept.extend(x.without_chunks() for x in batch)
                batch, chunks = [], 0
        if batch:
            self.add(batch)
            kept.extend(x.without_chunks() for x in batch)
        return kept

    @property
    def window_tokens(self) -> float:
        """Output tokens whose chunk arrived in the window (closed loop; 0.0 for open loop)."""
        return float(self._window_tokens[0])

    @property
    def series_tokens(self) -> np.ndarray | None:
        return self._series_tokens

    def take_itl_gaps(self) -> np.ndarray:
        """The pooled gaps between consecutive chunks of the population's successful requests,
        in record order (the tally gives them up: the caller may reorder them in place)."""
        self._gaps.resize(self._num_gaps, refcheck=False)
        gaps, self._gaps, self._num_gaps = self._gaps, np.empty(0), 0
        return gaps


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


def concurrency(records: Sequence[RequestRecord], window: Window) -> tuple[float | None, int]:
    """Mean in-flight requests over the window (sum of in-flight time / window) and the peak,
    counting the requests already in flight when the window opens."""
    if window.length_s <= 0:
        return None, 0
    sent, end = _lifetimes(records)
    if sent.size == 0:
        return 0.0, 0
    overlap = np.maximum(0.0, np.minimum(end, window.end_s) - np.maximum(sent, window.start_s))
    busy = sum(overlap.tolist())  # in record order, as a running total
    times = np.concatenate([sent, end])
    steps = np.concatenate([np.ones(sent.size, dtype=np.int64), np.full(end.size, -1, dtype=np.int64)])
    order = np.lexsort((steps, times))  # by time; at equal times an end (-1) before a start (+1)
    times = times[order]
    levels = np.cumsum(steps[order])  # in flight after each event
    first = int(np.searchsorted(times, window.start_s, side="left"))  # first event in or after it
    if first == times.size:
        return busy / window.length_s, 0
    peak = int(levels[first - 1]) if first > 0 else 0  # the level as the window opens
    last = int(np.searchsorted(times, window.end_s, side="left"))
    if last > first:
        peak = max(peak, int(levels[first:last].max()))
    return busy / window.length_s, peak


def _lifetimes(records: Iterable[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Sent and end (closed, or sent when never closed) of the records that were sent."""
    pairs = [(r.sent_s, r.closed_s if r.closed_s is not None else r.sent_s) for r in records if r.sent_s is not None]
    if not pairs:
        return np.empty(0), np.empty(0)
    both = np.array(pairs, dtype=np.float64)
    return both[:, 0], both[:, 1]


def count_outcomes(records: Iterable[RequestRecord]) -> dict[str, Any]:
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
    return {
        "total": total,
        "ok": by_outcome.get("ok", 0),
        "by_outcome": by_outcome,
        # re-sends after a dead reused connection (records' ``retries``), and how many requests
        "retries": retries,
        "retried_requests": retried,
        # ok streams that ended without their protocol's end marker ([DONE], a finish reason)
        "ok_without_end_marker": unterminated,
    }


def token_counts(records: Iterable[RequestRecord]) -> dict[str, Any]:
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
    return {
        "output_tokens_source": sources,
        "eos_counted_not_streamed": eos,
        "server_vs_client": {
            "compared": compared,
            "mismatched": sum(1 for d in diffs if d != 0),
            "mean_client_minus_server": float(np.mean(diffs)) if compared else None,
        },
    }


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
) -> dict[str, Any]:
    """The aggregate metrics of one load point (the keys of results.json's ``points[]``).
    ``chunks``: the records' chunk times already tallied (ChunkTally.consume, which returns the
    records without them); by default they are tallied here from ``records``."""
    window = span.window
    length = window.length_s
    if chunks is None:
        chunks = ChunkTally(span)
        chunks.add(records)
    population = [r for r in records if chunks.in_population(r)]
    ok = [r for r in population if r.outcome is Outcome.OK]
    ended = [r for r in population if r.outcome not in UNFINISHED]
    good_set = {id(r) for r in population if meets_slo(r, slo)} if slo.any else None

    basis = (
        _open_loop_basis(population, span)
        if span.open_loop
        else _closed_loop_basis(records, window, chunks.window_tokens)
    )
    period, weight, rated = basis.period_s, basis.weight, basis.rated
    out_tokens = basis.output_tokens
    rate = (lambda x: x / period) if period > 0 else (lambda x: None)

    ok_rated = [r for r in rated if r.outcome is Outcome.OK]
    completed = sum(weight[id(r)] for r in ok_rated)
    sources: dict[str, int] = {}
    prompt_total = 0.0
    for r in ok_rated:
        n, source = prompt_tokens(r)
        sources[source] = sources.get(source, 0) + 1
        prompt_total += (n or 0) * weight[id(r)]
    out_rate = rate(out_tokens)
    prompt_rate = rate(prompt_total) if "unknown" not in sources else None
    good = None
    good_fraction = None
    if good_set is not None:
        good = sum(weight[id(r)] for r in rated if id(r) in good_set)
        if span.open_loop:
            denominator = len(ended)
            good_fraction = (sum(1 for r in ended if id(r) in good_set) / denominator) if denominator else None
        else:
            done = sum(weight[id(r)] for r in rated if r.outcome not in UNFINISHED)
            good_fraction = good / done if done else None
    mean_conc, peak_conc = concurrency(records, window)
    waits = [w for w in (r.wait_s for r in population) if w is not None]
    tpots = [r.tpot_s for r in ok if r.tpot_s is not None]
    return {
        "window_s": length,
        "window": {"start_s": window.start_s, "end_s": window.end_s},
        "populations": POPULATIONS["rate" if span.open_loop else "users"],
        "rate_period_s": period if period > 0 else None,
        "backlog_growth_s": basis.backlog_growth_s,
        "offered_per_s": (len(population) / length if length > 0 else None) if span.open_loop else None,
        "requests": count_outcomes(records),
        "requests_in_window": count_outcomes(population),
        "ttft_s": distribution(r.ttft_s for r in ok if r.ttft_s is not None).to_json(),
        "tpot_s": distribution(tpots).to_json(),
        "decode_speed_tokens_per_s": distribution(1.0 / t for t in tpots if t > 0).to_json(),
        "itl_s": distribution(chunks.take_itl_gaps(), consume=True).to_json(),
        "e2e_s": distribution(r.e2e_s for r in ok if r.e2e_s is not None).to_json(),
        "queue_s": distribution(waits).to_json(),
        "queue_s_censored": sum(1 for r in population if r.outcome is Outcome.NOT_SENT),
        "normalized_latency_s": distribution(
            r.e2e_s / r.output_tokens for r in ok if r.e2e_s is not None and r.output_tokens
        ).to_json(),
        "output_tokens": out_tokens,
        "output_tokens_per_s": out_rate,
        "total_tokens_per_s": (out_rate + prompt_rate) if out_rate is not None and prompt_rate is not None else None,
        "prompt_tokens_source": sources,
        "requests_per_s": rate(completed),
        "goodput_per_s": rate(good) if good is not None else None,
        "good_fraction": good_fraction,
        "concurrency": {"mean": mean_conc, "peak": peak_conc},
        "tokens": token_counts(population),
    }


@dataclass(frozen=True)
class _RateBasis:
    """What a point's rates count and over which period: each counted request's weight (1, or
    its share of life in the window), the output tokens, and the period."""

    rated: list[RequestRecord]
    weight: dict[int, float]  # by id(record)
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
    return _RateBasis(population, {id(r): 1.0 for r in population}, tokens, period, growth)


def _closed_loop_basis(records: Sequence[RequestRecord], window: Window, tokens: float) -> _RateBasis:
    """Tokens that arrived in the window (tallied), requests by their share of life in it."""
    weight = {id(r): _share_in(r, window) for r in records}
    rated = [r for r in records if weight[id(r)] > 0]
    return _RateBasis(rated, weight, tokens, window.length_s, None)


def _share_in(r: RequestRecord, window: Window) -> float:
    """The share of a request's life (sent to end) inside the window; a request with no duration
    counts whole if it was sent in the window."""
    if r.sent_s is None:
        return 0.0
    end = r.end_s if r.outcome is Outcome.OK and r.end_s is not None else r.closed_s
    if end is None or end <= r.sent_s:
        return 1.0 if window.contains(r.sent_s) else 0.0
    return window.overlap_s(r.sent_s, end) / (end - r.sent_s)


def timeseries(
    records: Sequence[RequestRecord],
    span_start_s: float,
    span_end_s: float,
    ramp_end_s: float,
    user_spans: Sequence[tuple[float, float]],
    window_s: float,
    tokens: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    """Fixed windows over the whole point, ramp included and marked.

    Windows are [start, start + window_s), the last cut at ``span_end_s``. Each count is one pass
    over the records placed by the sorted window edges: chunks (by tokens_per_chunk), ok ends,
    failures' and cancellations' closes, and the TTFTs of the ok requests whose first chunk
    arrived in the window; in_flight is the mean of the in-flight count over the window
    (each request's sent-to-closed time inside it, summed, over the window's length).
    ``tokens``: the tokens per window already tallied (ChunkTally over ``series_edges``); by
    default they are counted here from the records' chunk times."""
    edges = series_edges(span_start_s, span_end_s, window_s)
    if edges.size == 0:
        return []
    starts, ends = edges[:-1].tolist(), [min(a + window_s, span_end_s) for a in edges[:-1].tolist()]
    k = len(starts)
    lengths = np.array(ends) - np.array(starts)

    def counted(times: list[float]) -> np.ndarray:
        """How many of ``times`` fall in each window."""
        w = _window_of(edges, np.array(times, dtype=np.float64))
        return np.bincount(w[(w >= 0) & (w < k)], minlength=k)

    records = _as_sequence(records)
    if tokens is None:
        tokens = _tokens_by_window(records, edges)
    in_flight = _busy_by_window(records, edges)
    ok = [r for r in records if r.outcome is Outcome.OK]
    completed = counted([r.end_s for r in ok if r.end_s is not None])
    # failures that ended in this window; requests the run stopped (cancelled in flight, or never
    # sent) are counted apart: they are not the server's failures (censored, METRICS.md)
    errors = counted(
        [
            r.closed_s
            for r in records
            if r.outcome is not Outcome.OK and r.outcome not in UNFINISHED and r.closed_s is not None
        ]
    )
    cancelled = counted([r.closed_s for r in records if r.outcome in UNFINISHED and r.closed_s is not None])
    firsts = [
        (r.chunk_times_s[0], r.chunk_times_s[0] - r.sent_s) for r in ok if r.chunk_times_s and r.sent_s is not None
    ]
    first_window = _window_of(edges, np.array([f for f, _ in firsts], dtype=np.float64))
    ttfts = np.array([x for _, x in firsts], dtype=np.float64)
    order = np.argsort(first_window, kind="stable")  # by window, in record order within one
    bounds = np.searchsorted(first_window[order], np.arange(k + 1), side="left")
    spans = np.array(user_spans, dtype=np.float64).reshape(-1, 2) if user_spans else None

    rows = []
    for i in range(k):
        start, end, length = starts[i], ends[i], float(lengths[i])
        ttft = ttfts[order[bounds[i] : bounds[i + 1]]]
        rows.append(
            {
                "start_s": start,
                "end_s": end,
                "ramp": start < ramp_end_s,
                "active_users": int(np.count_nonzero((spans[:, 0] <= end) & (spans[:, 1] >= end)))
                if spans is not None
                else None,
                "in_flight": float(in_flight[i]) / length if length > 0 else None,
                "requests_per_s": int(completed[i]) / length,
                "output_tokens_per_s": float(tokens[i]) / length,
                "ttft_s_mean": float(np.mean(ttft)) if ttft.size else None,
                "ttft_s_p90": float(np.percentile(ttft, 90)) if ttft.size else None,
                "errors": int(errors[i]),
                "cancelled": int(cancelled[i]),
            }
        )
    return rows


def series_edges(span_start_s: float, span_end_s: float, window_s: float) -> np.ndarray:
    """The time series' window edges: starts at span_start_s + i * window_s (by repeated
    addition), then span_end_s; contiguous (each window's end is the next one's start). Empty when
    the span is."""
    if window_s <= 0:
        raise ValueError(f"window_s must be > 0, not {window_s}")
    starts: list[float] = []
    t = span_start_s
    while t < span_end_s:  # the same additions as the windows' own starts, for the same edges
        starts.append(t)
        t += window_s
    if not starts:
        return np.empty(0)
    return np.array([*starts, min(starts[-1] + window_s, span_end_s)])


def _busy_by_window(records: Sequence[RequestRecord], edges: np.ndarray) -> np.ndarray:
    """Per window [edges[i], edges[i+1]): the in-flight time in it of every sent request (sent
    to closed), summed: the integral of the in-flight count. A request adds its overlap with
    the windows where it starts and ends, and the whole length of the windows between."""
    k = len(edges) - 1
    sent, end = _lifetimes(records)
    busy = np.zeros(k)
    if sent.size == 0:
        return busy
    lo, hi = edges[:-1], edges[1:]
    first = np.searchsorted(hi, sent, side="right")  # the first window that ends after it was sent
    last = np.searchsorted(lo, end, side="left") - 1  # the last window that starts before it closed
    some = first <= last
    first, last, sent, end = first[some], last[some], sent[some], end[some]
    # the windows where each request starts and ends (one, when both are the same window)
    both = np.stack([first, last], axis=1)
    overlap = np.maximum(0.0, np.minimum(end[:, None], hi[both]) - np.maximum(sent[:, None], lo[both]))
    counted = np.ones(both.shape, dtype=bool)
    counted[:, 1] = last != first
    busy += np.bincount(both[counted], weights=overlap[counted], minlength=k)
    # the windows in between, whole
    inner = last - first >= 2
    steps = np.zeros(k + 1, dtype=np.int64)
    np.add.at(steps, first[inner] + 1, 1)
    np.add.at(steps, last[inner], -1)
    busy += np.cumsum(steps[:-1]) * (hi - lo)
    return busy
