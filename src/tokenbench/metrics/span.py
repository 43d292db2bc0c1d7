"""A point's window and span, the contiguous windows of its time series (their edges, which window
a time falls in), and what every metric reads of a record's life."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from tokenbench.records import RequestRecord


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


def as_sequence(records: Iterable[RequestRecord]) -> Sequence[RequestRecord]:
    """``records`` as they are when a sequence (read more than once), else as a list."""
    return records if isinstance(records, Sequence) else list(records)


def lifetimes(records: Sequence[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Sent and end (closed, or sent when never closed) of the records that were sent (straight
    into arrays: no tuple per request)."""
    sent = [r for r in records if r.sent_s is not None]
    starts = np.fromiter((r.sent_s for r in sent), dtype=np.float64, count=len(sent))
    ends = np.fromiter(
        (r.closed_s if r.closed_s is not None else r.sent_s for r in sent), dtype=np.float64, count=len(sent)
    )
    return starts, ends


def window_of(edges: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For contiguous windows [edges[i], edges[i+1]): the index of the window holding each ``t``,
    -1 before the first and len(edges) - 1 from the last edge on (and for NaN)."""
    return np.searchsorted(edges, t, side="right") - 1


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
