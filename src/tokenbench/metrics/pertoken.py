"""Latency per token when a chunk carries several tokens: per-token ITL and Etalon's fluidity index
(METRICS.md "Per-token latency and smoothness"), vectorized over a batch of records.

A record's tokens: each content chunk carried ``chunk_tokens[i]`` tokens (the server's cumulative
usage on every chunk), all arriving at the chunk's time. A chunk that carried 0 tokens is no
arrival (its time goes to the next chunk's gap). Without counts (``chunk_tokens`` None), each chunk
is one token: the fluidity index still walks the chunks (``tokens_from`` says how many requests
did), per-token ITL never guesses and leaves the request out.

Per-token ITL: a gap g before a chunk of n tokens (from the chunk before that carried any) is n
gaps of g / n::

    itl_per_token_s = pooled over requests with counts, for every chunk j >= 1 (not the first):
                      (t_j - t_{j-1}) / n_j, weighted n_j

The first chunk's tokens have no gap before them but TTFT, so they add none: a request's mean
per-token ITL is (E2E - TTFT) / (streamed tokens - first_chunk_tokens). Stored as one value and
its weight a chunk (8 bytes: held by weight, stats.WeightedValues), never one float a token.

Fluidity index (Etalon, metrics/metric_utils.py ``get_request_level_deadline_miss_rate``), per
request over its tokens' gaps g_0 = TTFT (from sent_s), then g_i (0 for a chunk's later tokens),
with deadlines D_ttft (first token) and D_tbt (each later one), slack 0 at the start::

    token i on time   (g_i <= D_i + slack):  slack += D_i - g_i;  met += 1
    token i late:     m = 1 + floor((g_0 - slack - D_ttft) / D_tbt)   (i = 0)
                      m = floor((g_i - slack) / D_tbt)                 (i > 0)
                      missed += m;  slack = 0
    index = 1 - missed / (missed + met)

so early tokens bank slack for later ones, and a stall of k x D_tbt counts k misses. The point's
``miss_rate`` is Etalon's service level: sum of missed / sum of (missed + met) over requests.

Computed without a loop over tokens: with x_j = D_j - g_j for a chunk's first token and
b_j = (n_j - 1) D_tbt for its other tokens (always on time: a gap of 0), the state after chunk
j's first token is A_j = sum_{k<j} (x_k + b_k) + x_j; a miss resets the base, and chunk j misses
exactly when A_j is below every earlier A and 0 (its base: the state at the last miss), with
slack before it = A_{j-1} + b_{j-1} - that minimum. The same counts as Etalon's loop, up to float
rounding at exact ties (the tests use binary-exact timelines, where both are exact).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenbench.metrics.stats import WeightedValues, distribution
from tokenbench.records import ChunkEnds, RequestRecord
from tokenbench.results import Distribution, Fluidity

FROM_COUNTS = "chunk_tokens"  # fluidity's tokens_from: the server's count per chunk
FROM_CHUNKS = "one_per_chunk"  # no counts: one token a chunk
SUB_CHUNKS = 1 << 15  # chunks walked at once (TokenTally.add)


@dataclass(frozen=True)
class TokenChunks:
    """A batch of records' chunks that carried tokens, record after record: each one's arrival,
    tokens, record (index in the batch) and whether it is its record's first."""

    times: np.ndarray
    tokens: np.ndarray  # int64
    record: np.ndarray  # int64
    first: np.ndarray  # bool
    counted: np.ndarray  # bool, per record: its tokens are the server's counts (not one a chunk)


def _counts(r: RequestRecord, n: int) -> np.ndarray | None:
    counts = r.chunk_tokens
    if counts is None or len(counts) != n:
        return None
    if type(counts) is array and counts.typecode == "I" and len(counts):
        return np.frombuffer(counts, dtype=np.uint32)
    return np.asarray(counts, dtype=np.uint32)  # a list given after construction, or none


def token_chunks(records: Sequence[RequestRecord]) -> TokenChunks:
    """The token-bearing chunks of ``records`` (full chunk times: not ChunkEnds)."""
    times, counts, counted = [], [], []
    for r in records:
        if isinstance(r.chunk_times_s, ChunkEnds):
            raise ValueError("these records' chunk times were dropped (ChunkEnds): use the point's ChunkTally")
        t = np.frombuffer(r.chunk_times_s, dtype=np.float64) if len(r.chunk_times_s) else np.empty(0)
        c = _counts(r, t.size)
        counted.append(c is not None)
        times.append(t)
        counts.append(c if c is not None else np.ones(t.size, dtype=np.uint32))
    if not times:
        return TokenChunks(
            np.empty(0), np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, bool), np.empty(0, bool)
        )
    sizes = np.fromiter(map(len, times), dtype=np.int64, count=len(times))
    record = np.repeat(np.arange(len(times), dtype=np.int64), sizes)
    tokens = np.concatenate(counts).astype(np.int64)
    keep = tokens > 0
    record = record[keep]
    first = np.ones(record.size, dtype=bool)
    np.not_equal(record[1:], record[:-1], out=first[1:])
    return TokenChunks(np.concatenate(times)[keep], tokens[keep], record, first, np.array(counted, dtype=bool))


def per_token_gaps(chunks: TokenChunks) -> tuple[np.ndarray, np.ndarray]:
    """Per-token ITL of the records with counts: each later chunk's gap / its tokens, and its
    tokens as the weight (module doc)."""
    j = np.flatnonzero(~chunks.first & chunks.counted[chunks.record])
    gaps = chunks.times[j] - chunks.times[j - 1]
    return gaps / chunks.tokens[j], chunks.tokens[j].astype(np.uint32)


def _running_min(values: np.ndarray, record: np.ndarray) -> np.ndarray:
    """The minimum of ``values`` so far within each record (records contiguous): log2(longest)
    passes of exact minimums over shifted copies (a segmented scan), no loop over records."""
    out = values.copy()
    shift = 1
    while shift < out.size:
        same = record[shift:] == record[:-shift]
        if not same.any():
            break
        np.minimum(out[shift:], np.where(same, out[:-shift], np.inf), out=out[shift:])
        shift *= 2
    return out


def deadline_misses(
    chunks: TokenChunks, sent_s: np.ndarray, ttft_s: float, tbt_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per record of the batch: missed deadlines and all deadlines (missed + met), Etalon's walk
    (module doc). ``sent_s``: each record's send time (TTFT's origin)."""
    n_records = sent_s.size
    if chunks.times.size == 0:
        return np.zeros(n_records), np.zeros(n_records)
    first, record = chunks.first, chunks.record
    gaps = np.empty_like(chunks.times)
    gaps[1:] = np.diff(chunks.times)
    gaps[first] = chunks.times[first] - sent_s[record[first]]
    deadline = np.where(first, ttft_s, tbt_s)
    bonus = (chunks.tokens - 1) * tbt_s  # a chunk's later tokens: gap 0, always on time
    step = deadline - gaps + bonus
    after = np.cumsum(step)  # the state after each chunk, from the batch's start
    starts = np.flatnonzero(first)
    after -= np.repeat(after[starts] - step[starts], np.diff(np.append(starts, after.size)))  # from its record's
    state = after - bonus  # after the chunk's first token
    lowest = np.minimum(_running_min(state, record), 0.0)
    before_low = np.zeros_like(state)
    before_low[1:] = lowest[:-1]
    before_low[first] = 0.0  # the base before a record's first token
    before = np.zeros_like(state)
    before[1:] = after[:-1]
    before[first] = 0.0
    miss = state < before_low
    slack = before - before_low
    late = np.where(first, 1 + np.floor_divide(gaps - ttft_s, tbt_s), np.floor_divide(gaps - slack, tbt_s))
    missed = np.bincount(record, weights=np.where(miss, late, 0.0), minlength=n_records)
    met = np.bincount(record, weights=chunks.tokens - miss, minlength=n_records)
    return missed, missed + met


class TokenTally:
    """What a point's per-token results read from its successful requests' chunks, batch by batch
    (metrics.ChunkTally feeds it): per-token ITL values by their weight (8 bytes a chunk of requests
    with counts), and per request its fluidity index (8 bytes a request) and deadlines."""

    def __init__(self, ttft_s: float, tbt_s: float) -> None:
        self.ttft_s, self.tbt_s = ttft_s, tbt_s
        self._per_token = WeightedValues()
        self._index: list[np.ndarray] = []
        self._missed = self._total = 0.0
        self._from = {FROM_COUNTS: 0, FROM_CHUNKS: 0}
        self._chunk_sizes: dict[int, int] = {}  # tokens a chunk -> chunks (requests with counts)

    def add(self, ok: Sequence[RequestRecord]) -> None:
        """Tally a batch of successful requests of the population (full chunk times), ``SUB_CHUNKS``
        chunks at a time: the walk's arrays (~100 bytes a chunk) stay a few MB."""
        ok = [r for r in ok if r.sent_s is not None and len(r.chunk_times_s)]
        start = chunks = 0
        for i, r in enumerate(ok):
            chunks += len(r.chunk_times_s)
            if chunks >= SUB_CHUNKS or i == len(ok) - 1:
                self._add(ok[start : i + 1])
                start, chunks = i + 1, 0

    def _add(self, ok: Sequence[RequestRecord]) -> None:
        chunks = token_chunks(ok)
        self._per_token.add(*per_token_gaps(chunks))
        sizes, times = np.unique(chunks.tokens[chunks.counted[chunks.record]], return_counts=True)
        for size, n in zip(sizes.tolist(), times.tolist(), strict=True):
            self._chunk_sizes[size] = self._chunk_sizes.get(size, 0) + n
        sent = np.fromiter((r.sent_s for r in ok), dtype=np.float64, count=len(ok))
        missed, total = deadline_misses(chunks, sent, self.ttft_s, self.tbt_s)
        has = total > 0  # a request whose every chunk carried 0 tokens has no token to time
        self._index.append(1.0 - missed[has] / total[has])
        self._missed += float(missed.sum())
        self._total += float(total.sum())
        counted = int(chunks.counted[has].sum())
        self._from[FROM_COUNTS] += counted
        self._from[FROM_CHUNKS] += int(has.sum()) - counted

    def results(self) -> dict[str, Any]:
        """PointMetrics' ``itl_per_token_s``, ``fluidity`` and ``tokens_per_chunk``."""
        return {
            "itl_per_token_s": self.itl_per_token(),
            "fluidity": self.fluidity(),
            "tokens_per_chunk": self.tokens_per_chunk(),
        }

    def tokens_per_chunk(self) -> Distribution | None:
        """The tokens each chunk carried, over the chunks (that carried any) of the requests with
        per-chunk counts; None without such requests."""
        if not self._chunk_sizes:
            return None
        sizes = WeightedValues()
        sizes.add(
            np.fromiter(self._chunk_sizes, dtype=np.float64),
            np.fromiter(self._chunk_sizes.values(), dtype=np.int64),
        )
        return sizes.distribution()

    def itl_per_token(self) -> Distribution:
        """Per-token ITL over the requests with counts (count 0, all None, without any)."""
        return self._per_token.distribution()

    def fluidity(self) -> Fluidity:
        index = np.concatenate(self._index) if self._index else np.empty(0)
        return Fluidity(
            ttft_deadline_s=self.ttft_s,
            tbt_deadline_s=self.tbt_s,
            index=distribution(index),
            miss_rate=self._missed / self._total if self._total > 0 else None,
            tokens_from=dict(self._from),
        )
