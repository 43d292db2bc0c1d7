"""What a point's results read from chunk times, one pass over its records: tokens per window,
the pooled ITL gaps (ChunkTally), vectorized with numpy (Python loops per record or window, never
per chunk)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

import numpy as np

from tokenbench.config import DeadlinesConfig
from tokenbench.metrics.pertoken import TokenTally
from tokenbench.metrics.span import PointSpan, Window, as_sequence, started_s, tokens_per_chunk, window_of
from tokenbench.records import ChunkEnds, Outcome, RequestRecord


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


def _token_runs(records: Sequence[RequestRecord], edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Output tokens that arrived in windows [edges[i], edges[i+1]) (edges sorted), as runs in
    record order: each run's window and tokens (its chunks in it x its record's tokens_per_chunk).
    Summed in order (bincount, np.add.at) they are the per-window sums of the loop over records."""
    k = len(edges) - 1
    times, counts = _chunk_times(records)
    if k <= 0 or times.size == 0:
        return np.empty(0, dtype=np.int64), np.empty(0)
    n = times.size
    window = window_of(edges, times)
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


def tokens_by_window(records: Sequence[RequestRecord], edges: np.ndarray) -> np.ndarray:
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
    return float(tokens_by_window(as_sequence(records), edges)[0])


def inter_chunk_gaps(records: Iterable[RequestRecord]) -> np.ndarray:
    """Every gap between consecutive chunks of a request, request after request (pooled ITL)."""
    times, counts = _chunk_times(as_sequence(records))
    n = times.size
    if n < 2:
        return np.empty(0)
    gaps = np.diff(times)
    del times  # a point's chunks: no third copy of them at once
    keep = np.ones(n - 1, dtype=bool)
    starts = np.cumsum(counts)[:-1]
    keep[starts[(starts > 0) & (starts < n)] - 1] = False  # across two requests
    return gaps[keep]


class CancelledOutput:
    """The output tokens of cancelled streams (in flight when the point or run stopped) that a
    point's output throughput counts, and how many streams gave them: request rate counts
    completed requests only, so these are what makes tok/s and req/s read apart (METRICS.md,
    "Outcomes"; the console summary states it)."""

    def __init__(self) -> None:
        self.tokens = 0.0
        self.streams = 0

    def add_runs(self, runs: tuple[np.ndarray, np.ndarray]) -> None:
        """Add one batch's runs (``_token_runs`` over cancelled records: one window, so each run
        is one record's chunks in it)."""
        _, tokens = runs
        self.tokens += float(tokens.sum())
        self.streams += int(np.count_nonzero(tokens))

    def add_records(self, records: Iterable[RequestRecord]) -> None:
        """Add cancelled records whole (open loop counts a population's every chunk)."""
        for r in records:
            if r.outcome is Outcome.CANCELLED and len(r.chunk_times_s):
                self.tokens += len(r.chunk_times_s) * tokens_per_chunk(r)
                self.streams += 1


# Records are tallied this many chunks at a time (a batch's arrays: ~40 bytes a chunk, transient).
TALLY_BATCH_CHUNKS = 1 << 18


class ChunkTally:
    """Everything a point's results read from chunk times, tallied batch by batch of records, so a
    point's summary never holds all its chunk times: the output tokens that arrived in the window
    (closed loop), the pooled ITL gaps of its successful requests (8 bytes a gap, the one thing
    kept per chunk besides ``tokens``' per-token ITL: 8 more a chunk of requests with per-chunk
    counts), the per-token results (``tokens``: per-token ITL, fluidity under ``deadlines``) and
    the tokens per time-series window. Sums run in record order, as over one batch: the result
    does not depend on how the records were batched."""

    def __init__(
        self, span: PointSpan, series_edges: np.ndarray | None = None, deadlines: DeadlinesConfig | None = None
    ) -> None:
        self.span = span
        deadlines = deadlines or DeadlinesConfig()
        self.tokens = TokenTally(deadlines.ttft_s, deadlines.tbt_s)
        window = span.window
        self._window_edges = np.array([window.start_s, window.end_s]) if window.end_s > window.start_s else None
        self._window_tokens = np.zeros(1)
        self._cancelled = CancelledOutput()
        self._series_edges = series_edges
        self._series_tokens = np.zeros(max(len(series_edges) - 1, 0)) if series_edges is not None else None
        self._gaps = np.empty(0)
        self._num_gaps = 0

    @classmethod
    def of(cls, span: PointSpan, records: Sequence[RequestRecord]) -> ChunkTally:
        """The tally of ``records`` (full chunk times) in one batch."""
        tally = cls(span)
        tally.add(records)
        return tally

    def in_population(self, r: RequestRecord) -> bool:
        """Open loop: scheduled in the window; closed loop: started in it (METRICS.md)."""
        return self.span.window.contains(r.scheduled_s if self.span.open_loop else started_s(r))

    def add(self, records: Sequence[RequestRecord]) -> None:
        """Tally a batch of records (full chunk times), in the order they come."""
        if self._window_edges is not None and not self.span.open_loop:
            np.add.at(self._window_tokens, *_token_runs(records, self._window_edges))
            cancelled = [r for r in records if r.outcome is Outcome.CANCELLED and len(r.chunk_times_s)]
            if cancelled:
                self._cancelled.add_runs(_token_runs(cancelled, self._window_edges))
        if self._series_edges is not None and self._series_tokens is not None:
            np.add.at(self._series_tokens, *_token_runs(records, self._series_edges))
        ok = [r for r in records if r.outcome is Outcome.OK and self.in_population(r)]
        gaps = inter_chunk_gaps(ok)
        self.tokens.add(ok)
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
    def cancelled_window_output(self) -> CancelledOutput:
        """Of ``window_tokens``, those of cancelled streams and how many streams gave them."""
        return self._cancelled

    @property
    def series_tokens(self) -> np.ndarray | None:
        return self._series_tokens

    def take_itl_gaps(self) -> np.ndarray:
        """The pooled gaps between consecutive chunks of the population's successful requests,
        in record order (the tally gives them up: the caller may reorder them in place)."""
        self._gaps.resize(self._num_gaps, refcheck=False)
        gaps, self._gaps, self._num_gaps = self._gaps, np.empty(0), 0
        return gaps
