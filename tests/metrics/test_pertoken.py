"""Per-token ITL and the fluidity index (metrics.pertoken) on hand-built chunk timelines with known
answers. Times are binary fractions (multiples of 1/64 s), so every sum is exact and a deadline
met with nothing to spare is met, in Etalon's arithmetic and ours alike."""

import random

import numpy as np
import pytest
from metric_records import users

from tokenbench.config import DeadlinesConfig
from tokenbench.config.slo import SLOConfig
from tokenbench.metrics import ChunkTally, summarize_point
from tokenbench.metrics.pertoken import FROM_CHUNKS, FROM_COUNTS, TokenTally, deadline_misses, token_chunks
from tokenbench.records import Outcome, RequestRecord, TokenSource

D_TTFT, D_TBT = 0.25, 0.125  # exact in binary


def rec(i, sent, times, tokens=None, outcome=Outcome.OK):
    """A request sent at ``sent`` whose chunks arrived at ``times``, carrying ``tokens`` each
    (None: no per-chunk counts)."""
    return RequestRecord(
        point=0,
        id=i,
        scheduled_s=sent,
        sent_s=sent,
        chunk_times_s=times,
        end_s=times[-1],
        closed_s=times[-1],
        outcome=outcome,
        output_tokens=sum(tokens) if tokens is not None else len(times),
        output_tokens_source=TokenSource.SERVER,
        chunk_tokens=tokens,
        first_chunk_tokens=tokens[0] if tokens else None,
    )


def etalon(gaps, ttft_deadline, tbt_deadline):
    """Etalon's get_request_level_deadline_miss_rate, as its source walks it: (missed, total)."""
    slack = 0.0
    missed = total = 0
    for i, g in enumerate(gaps):
        deadline = ttft_deadline if i == 0 else tbt_deadline
        if g <= deadline + slack:
            slack += deadline - g
            total += 1
            continue
        m = 1 + (g - slack - ttft_deadline) // tbt_deadline if i == 0 else (g - slack) // tbt_deadline
        missed += m
        total += m
        slack = 0.0
    return missed, total


def token_gaps(r):
    """A record's per-token gaps as Etalon's client makes them: the chunk's gap, then 0 for each
    further token of the chunk (zero-token chunks: no token, their time goes to the next gap)."""
    counts = list(r.chunk_tokens) if r.chunk_tokens is not None else [1] * len(r.chunk_times_s)
    gaps, last = [], r.sent_s
    for t, n in zip(r.chunk_times_s, counts, strict=True):
        if n:
            gaps += [t - last] + [0.0] * (n - 1)
            last = t
    return gaps


def fluidity_of(*records):
    tally = TokenTally(D_TTFT, D_TBT)
    tally.add(list(records))
    return tally.fluidity()


def misses(r):
    missed, total = deadline_misses(token_chunks([r]), np.array([r.sent_s]), D_TTFT, D_TBT)
    return float(missed[0]), float(total[0])


def test_early_tokens_bank_slack_for_a_later_gap():
    """TTFT 1/8 (1/8 early), a 4-token chunk 1/4 later (on time, nothing to spare; its 3 further
    tokens bank 3/8), then a gap of 1/2 = 1/8 + 3/8 of slack: every one of the 6 tokens is met.
    Walked one token per chunk, the same times bank nothing: the 1/2 gap misses 4 deadlines."""
    times = [0.125, 0.375, 0.875]
    counted = rec(0, 0.0, times, [1, 4, 1])
    assert misses(counted) == (0.0, 6.0) == etalon(token_gaps(counted), D_TTFT, D_TBT)
    flat = rec(1, 0.0, times)
    assert misses(flat) == (4.0, 6.0) == etalon(token_gaps(flat), D_TTFT, D_TBT)
    f = fluidity_of(counted, flat)
    assert f.index.count == 2 and f.index.max == 1.0 and f.index.min == pytest.approx(1 / 3)
    assert f.miss_rate == pytest.approx(4 / 12)  # Etalon's service level: 4 missed of 12 deadlines
    assert f.tokens_from == {FROM_COUNTS: 1, FROM_CHUNKS: 1}
    assert (f.ttft_deadline_s, f.tbt_deadline_s) == (D_TTFT, D_TBT)


def test_a_stall_counts_several_misses_and_resets_slack():
    """Tokens every 1/8 (TTFT 1/8 banks 1/8), then a 5/8 stall: floor((5/8 - 1/8) / (1/8)) = 4
    missed deadlines, slack reset; the next token 1/8 later is on time with nothing to spare.
    8 deadlines, 4 missed: index 0.5."""
    r = rec(0, 0.0, [0.125, 0.25, 0.375, 1.0, 1.125], [1] * 5)
    assert misses(r) == (4.0, 8.0) == etalon(token_gaps(r), D_TTFT, D_TBT)
    assert fluidity_of(r).index.mean == 0.5


def test_a_late_first_token_misses_one_plus_its_overrun_in_tbt_deadlines():
    """TTFT 5/8 against 1/4: 1 + floor((5/8 - 1/4) / (1/8)) = 4 missed (the late token is those 4
    deadlines, not a fifth); then 2 tokens in one chunk 1/8 later: both met (the first with
    nothing to spare, the second a gap of 0). 6 deadlines."""
    r = rec(0, 0.0, [0.625, 0.75], [1, 2])
    assert misses(r) == (4.0, 6.0) == etalon(token_gaps(r), D_TTFT, D_TBT)


def test_the_first_chunks_extra_tokens_bank_slack():
    """A first chunk of 3 tokens at TTFT 1/4 (met exactly) banks 2 x 1/8: a gap of 3/8 is met."""
    r = rec(0, 0.0, [0.25, 0.625], [3, 1])
    assert misses(r) == (0.0, 4.0) == etalon(token_gaps(r), D_TTFT, D_TBT)


def test_the_vectorized_walk_counts_as_etalons_loop_on_random_timelines():
    """200 requests of random gaps (stalls, bursts, zero-token chunks) in one batch: per request,
    the same missed and total deadlines as Etalon's token-by-token loop."""
    rng = random.Random(7)
    records = []
    for i in range(200):
        t, times, counts = rng.uniform(0, 5), [], []
        sent = t
        for _ in range(rng.randint(1, 60)):
            t += rng.choice([rng.uniform(0, 0.1), rng.uniform(0, 0.02), rng.uniform(0.2, 1.5)])
            times.append(t)
            counts.append(rng.choice([0, 1, 1, 1, 2, 5]))
        counts[0] = max(counts[0], 1)
        records.append(rec(i, sent, times, counts if i % 5 else None))
    missed, total = deadline_misses(token_chunks(records), np.array([r.sent_s for r in records]), 0.1, 0.05)
    expected = [etalon(token_gaps(r), 0.1, 0.05) for r in records]
    assert [(float(m), float(n)) for m, n in zip(missed, total, strict=True)] == expected
    assert sum(m for m, _ in expected) > 100  # the timelines do miss deadlines


def test_per_token_itl_splits_each_gap_over_its_chunks_tokens():
    """Chunks at 1, 1.25, 1.75 carrying 2, 1, 4 tokens: gaps 0.25 (1 token) and 0.5 / 4 = 0.125
    (4 tokens); the first chunk's second token has no gap but TTFT: none. The mean is
    (E2E - TTFT) / (tokens - first chunk's) = 0.75 / 5."""
    tally = TokenTally(D_TTFT, D_TBT)
    tally.add([rec(0, 0.5, [1.0, 1.25, 1.75], [2, 1, 4])])
    d = tally.itl_per_token()
    assert (d.count, d.min, d.p50, d.max) == (5, 0.125, 0.125, 0.25)
    assert d.mean == pytest.approx(0.75 / 5)


def test_a_chunk_of_zero_tokens_gives_its_time_to_the_next_tokens():
    tally = TokenTally(D_TTFT, D_TBT)
    tally.add([rec(0, 0.0, [1.0, 1.25, 1.5], [1, 0, 2])])
    d = tally.itl_per_token()
    assert (d.count, d.min, d.max) == (2, 0.25, 0.25)


def test_without_counts_per_token_itl_is_null_not_a_guess():
    """Records without chunk_tokens: no per-token ITL (count 0, every statistic None); fluidity
    walks one token a chunk and says so."""
    tally = TokenTally(D_TTFT, D_TBT)
    tally.add([rec(0, 0.0, [0.125, 0.25, 0.375]), rec(1, 0.0, [0.125, 0.5])])
    d = tally.itl_per_token()
    assert d.count == 0 and d.mean is None and d.p50 is None and d.max is None
    assert tally.fluidity().tokens_from == {FROM_COUNTS: 0, FROM_CHUNKS: 2}


def test_a_point_reports_both_with_failures_and_unknown_counts_left_out():
    """summarize_point: per-token ITL over the successful requests with counts only; fluidity over
    every successful one; a failed request in neither."""
    records = [
        rec(0, 0.0, [0.5, 0.75, 1.25], [1, 1, 2]),
        rec(1, 0.0, [0.5, 0.625, 0.75]),  # no counts
        rec(2, 0.0, [0.5, 0.6], [1, 1], outcome=Outcome.STREAM_ERROR),
    ]
    metrics = summarize_point(records, users(0.0, 10.0), SLOConfig())
    assert metrics.itl_per_token_s is not None and metrics.fluidity is not None
    assert metrics.itl_per_token_s.count == 3 and metrics.itl_per_token_s.mean == pytest.approx(0.75 / 3)
    assert metrics.itl_s.count == 4  # inter-chunk: both ok requests
    assert metrics.fluidity.index.count == 2
    assert metrics.fluidity.tokens_from == {FROM_COUNTS: 1, FROM_CHUNKS: 1}
    assert (metrics.fluidity.ttft_deadline_s, metrics.fluidity.tbt_deadline_s) == (0.1, 0.05)  # Etalon's


def test_deadlines_reach_the_tally_and_batches_do_not_change_the_answer(monkeypatch):
    """The same point tallied in one batch and a few chunks at a time: the same results (==)."""
    rng = random.Random(3)
    records = []
    for i in range(40):
        times = sorted(rng.uniform(0, 4) for _ in range(rng.randint(1, 30)))
        records.append(rec(i, 0.0, times, [rng.randint(1, 3) for _ in times] if i % 3 else None))
    span, deadlines = users(0.0, 10.0), DeadlinesConfig(ttft_s=0.5, tbt_s=0.1)

    def point():
        chunks = ChunkTally(span, None, deadlines)
        kept = chunks.consume(records)
        return summarize_point(kept, span, SLOConfig(), chunks)

    whole = point()
    monkeypatch.setattr("tokenbench.metrics.chunks.TALLY_BATCH_CHUNKS", 7)  # default: 2**18
    batched = point()
    assert batched.itl_per_token_s == whole.itl_per_token_s
    assert batched.fluidity == whole.fluidity and whole.fluidity is not None
    assert whole.fluidity.tbt_deadline_s == 0.1 and whole.fluidity.index.count == 40
