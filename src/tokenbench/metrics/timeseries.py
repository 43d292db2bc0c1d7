"""Fixed windows over a whole point, ramp included and marked: the time series of results.json."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tokenbench.metrics.chunks import tokens_by_window
from tokenbench.metrics.span import as_sequence, lifetimes, series_edges, window_of
from tokenbench.records import UNFINISHED, Outcome, RequestRecord, failed
from tokenbench.results.run import WindowClient


def timeseries(
    records: Sequence[RequestRecord],
    span_start_s: float,
    span_end_s: float,
    ramp_end_s: float,
    user_spans: Sequence[tuple[float, float]],
    window_s: float,
    tokens: np.ndarray | None = None,
    target: Callable[[float], float] | None = None,
) -> list[WindowClient]:
    """Fixed windows over the whole point, ramp included and marked.

    Windows are [start, start + window_s), the last cut at ``span_end_s``. Each count is one pass
    over the records placed by the sorted window edges: chunks (by tokens_per_chunk), ok ends,
    failures' and cancellations' closes, and the TTFTs of the ok requests whose first chunk
    arrived in the window; in_flight is the mean of the in-flight count over the window
    (each request's sent-to-closed time inside it, summed, over the window's length).
    ``tokens``: the tokens per window already tallied (ChunkTally over ``series_edges``); by
    default they are counted here from the records' chunk times. ``target``: a staged point's
    level at a time from the point's start (StagedLoad.level_at): each window carries it at its start."""
    edges = series_edges(span_start_s, span_end_s, window_s)
    if edges.size == 0:
        return []
    records = as_sequence(records)
    counts = _counts(records, edges, tokens)
    ttfts = _FirstChunks(records, edges)
    spans = np.array(user_spans, dtype=np.float64).reshape(-1, 2) if user_spans else None
    rows = []
    for i, start in enumerate(edges[:-1].tolist()):
        end = min(start + window_s, span_end_s)
        length = end - start
        ttft = ttfts.in_window(i)
        rows.append(
            WindowClient(
                start_s=start,
                end_s=end,
                ramp=start < ramp_end_s,
                active_users=_active_users(spans, end),
                in_flight=float(counts.in_flight[i]) / length if length > 0 else None,
                requests_per_s=int(counts.completed[i]) / length,
                output_tokens_per_s=float(counts.tokens[i]) / length,
                ttft_s_mean=float(np.mean(ttft)) if ttft.size else None,
                ttft_s_p90=float(np.percentile(ttft, 90)) if ttft.size else None,
                errors=int(counts.errors[i]),
                cancelled=int(counts.cancelled[i]),
                # a staged point's level: the key only its windows have
                **({"target_level": target(start - span_start_s)} if target is not None else {}),
            )
        )
    return rows


@dataclass(frozen=True)
class _Counts:
    """Per window: tokens, in-flight time, ok ends, failures and cancellations."""

    tokens: np.ndarray
    in_flight: np.ndarray
    completed: np.ndarray
    errors: np.ndarray
    cancelled: np.ndarray


def _counts(records: Sequence[RequestRecord], edges: np.ndarray, tokens: np.ndarray | None) -> _Counts:
    k = len(edges) - 1

    def counted(times: list[float]) -> np.ndarray:
        """How many of ``times`` fall in each window."""
        w = window_of(edges, np.array(times, dtype=np.float64))
        return np.bincount(w[(w >= 0) & (w < k)], minlength=k)

    ok = [r for r in records if r.outcome is Outcome.OK]
    return _Counts(
        tokens=tokens_by_window(records, edges) if tokens is None else tokens,
        in_flight=_busy_by_window(records, edges),
        completed=counted([r.end_s for r in ok if r.end_s is not None]),
        # failures that ended in this window; requests the run stopped (cancelled in flight, or
        # never sent) are counted apart: they are not the server's failures (censored, METRICS.md)
        errors=counted([r.closed_s for r in records if failed(r.outcome) and r.closed_s is not None]),
        cancelled=counted([r.closed_s for r in records if r.outcome in UNFINISHED and r.closed_s is not None]),
    )


class _FirstChunks:
    """The TTFTs of the ok requests, by the window their first chunk arrived in."""

    def __init__(self, records: Sequence[RequestRecord], edges: np.ndarray) -> None:
        firsts = [
            (r.chunk_times_s[0], r.chunk_times_s[0] - r.sent_s)
            for r in records
            if r.outcome is Outcome.OK and r.chunk_times_s and r.sent_s is not None
        ]
        first_window = window_of(edges, np.array([f for f, _ in firsts], dtype=np.float64))
        self._ttfts = np.array([x for _, x in firsts], dtype=np.float64)
        self._order = np.argsort(first_window, kind="stable")  # by window, in record order within one
        self._bounds = np.searchsorted(first_window[self._order], np.arange(len(edges)), side="left")

    def in_window(self, i: int) -> np.ndarray:
        return self._ttfts[self._order[self._bounds[i] : self._bounds[i + 1]]]


def _active_users(spans: np.ndarray | None, t: float) -> int | None:
    """The users whose span covers ``t``; None when the point kept no users' spans."""
    if spans is None:
        return None
    return int(np.count_nonzero((spans[:, 0] <= t) & (spans[:, 1] >= t)))


def _busy_by_window(records: Sequence[RequestRecord], edges: np.ndarray) -> np.ndarray:
    """Per window [edges[i], edges[i+1]): the in-flight time in it of every sent request (sent
    to closed), summed: the integral of the in-flight count. A request adds its overlap with
    the windows where it starts and ends, and the whole length of the windows between."""
    k = len(edges) - 1
    sent, end = lifetimes(records)
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
