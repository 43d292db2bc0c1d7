"""Fixed windows over a whole point, ramp included and marked: the time series of results.json."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..records import UNFINISHED, Outcome, RequestRecord
from .chunks import _tokens_by_window, _window_of, series_edges
from .span import _as_sequence, _lifetimes


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
