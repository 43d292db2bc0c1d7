"""What chunk times give (metrics.chunks): the vectorized counts equal plain loops, and a point
tallied a batch at a time equals one held whole."""

import numpy as np
import pytest
from metric_records import rec, users

from tokenbench.config.slo import SLOConfig
from tokenbench.metrics import (
    PointSpan,
    Window,
    concurrency,
    distribution,
    inter_chunk_gaps,
    output_tokens_in,
    summarize_point,
    timeseries,
)
from tokenbench.metrics.chunks import tokens_by_window
from tokenbench.records import Outcome, RequestRecord

# --- the vectorized metrics against the loops they replaced ----------------------------------------
# The reference functions below are the per-chunk loop versions of output_tokens_in, concurrency,
# inter_chunk_gaps and timeseries as they were before metrics.py was vectorized (git bc1d123),
# kept verbatim: the new ones must give the same numbers on any records.


def ref_tokens_per_chunk(r):
    if not r.chunk_times_s:
        return 0.0
    return (r.output_tokens or len(r.chunk_times_s)) / len(r.chunk_times_s)


def ref_output_tokens_in(records, window):
    total = 0.0
    for r in records:
        if not r.chunk_times_s:
            continue
        times = r.chunk_times_s
        if window.start_s <= times[0] and times[-1] < window.end_s:
            n = len(times)
        else:
            n = sum(1 for t in times if window.start_s <= t < window.end_s)
        total += n * ref_tokens_per_chunk(r)
    return total


def ref_inter_chunk_gaps(records):
    for r in records:
        times = r.chunk_times_s
        for i in range(1, len(times)):
            yield times[i] - times[i - 1]


def ref_concurrency(records, window):
    if window.length_s <= 0:
        return None, 0
    busy = 0.0
    events = []
    for r in records:
        if r.sent_s is None:
            continue
        end = r.closed_s if r.closed_s is not None else r.sent_s
        busy += window.overlap_s(r.sent_s, end)
        events.append((r.sent_s, 1))
        events.append((end, -1))
    events.sort()  # at equal times an end (-1) sorts before a start (+1)
    level = 0
    peak = None
    for t, step in events:
        if peak is None and t >= window.start_s:
            peak = level  # the level as the window opens
        level += step
        if window.start_s <= t < window.end_s:
            peak = max(peak or 0, level)
    return busy / window.length_s, peak or 0


def ref_timeseries(records, span_start_s, span_end_s, ramp_end_s, user_spans, window_s):
    import numpy as np

    rows = []
    t = span_start_s
    while t < span_end_s:
        w = Window(t, min(t + window_s, span_end_s))
        first_in = [
            r for r in records if r.outcome is Outcome.OK and r.chunk_times_s and w.contains(r.chunk_times_s[0])
        ]
        ttfts = [r.ttft_s for r in first_in if r.ttft_s is not None]
        mean_conc, _ = ref_concurrency(records, w)
        out = ref_output_tokens_in(records, w)
        rows.append(
            {
                "start_s": w.start_s,
                "end_s": w.end_s,
                "ramp": w.start_s < ramp_end_s,
                "active_users": sum(1 for a, b in user_spans if a <= w.end_s and b >= w.end_s) if user_spans else None,
                "in_flight": mean_conc,
                "requests_per_s": sum(
                    1 for r in records if r.outcome is Outcome.OK and r.end_s is not None and w.contains(r.end_s)
                )
                / w.length_s,
                "output_tokens_per_s": out / w.length_s,
                "ttft_s_mean": float(np.mean(ttfts)) if ttfts else None,
                "ttft_s_p90": float(np.percentile(ttfts, 90)) if ttfts else None,
                # (the loops' rule, but for not_sent: censored like cancelled, not an error)
                "errors": sum(
                    1
                    for r in records
                    if r.outcome not in (Outcome.OK, Outcome.CANCELLED, Outcome.NOT_SENT, Outcome.WORKER_LOST)
                    and r.closed_s is not None
                    and w.contains(r.closed_s)
                ),
                "cancelled": sum(
                    1
                    for r in records
                    if r.outcome in (Outcome.CANCELLED, Outcome.NOT_SENT, Outcome.WORKER_LOST)
                    and r.closed_s is not None
                    and w.contains(r.closed_s)
                ),
            }
        )
        t += window_s
    return rows


def _edges(start, end, window_s):
    """The window starts as timeseries computes them (repeated additions), and the end."""
    out, t = [], start
    while t < end:
        out.append(t)
        t += window_s
    return out + [end]


def random_records(rng, n, start, end, window_s):
    """Records of every kind, with chunk times and closes often exactly on window edges."""
    edges = _edges(start, end, window_s)
    outcomes = list(Outcome)

    def instant():
        pick = rng.random()
        if pick < 0.25:
            return rng.choice(edges)  # exactly on an edge (the span's end included)
        if pick < 0.3:
            return rng.uniform(start - 3 * window_s, start)  # before the span
        if pick < 0.35:
            return rng.uniform(end, end + 3 * window_s)  # after it
        return rng.uniform(start, end)

    records = []
    for i in range(n):
        outcome = rng.choice(outcomes)
        sent = None if outcome is Outcome.NOT_SENT or rng.random() < 0.05 else instant()
        times = []
        if sent is not None and outcome is not Outcome.NOT_SENT and rng.random() < 0.85:
            t = sent + rng.choice([0.0, rng.uniform(0, window_s)])
            for _ in range(rng.randrange(0, 30)):
                times.append(t)
                pick = rng.random()
                t = (
                    rng.choice(edges)
                    if pick < 0.1 and rng.choice(edges) >= t
                    else t + (0.0 if pick < 0.2 else rng.expovariate(1 / (window_s * rng.choice([0.01, 0.3, 2.0]))))
                )
            times = sorted(times)
        closed = (
            None
            if rng.random() < 0.1
            else (
                rng.choice(edges)
                if rng.random() < 0.2
                else max([x for x in (sent, *times[-1:]) if x is not None] or [instant()])
                + rng.choice([0.0, rng.uniform(0, window_s)])
            )
        )
        if sent is not None and closed is not None and rng.random() < 0.02:
            closed = sent - 0.5  # nonsense a clock could never give: still the same numbers
        records.append(
            RequestRecord(
                point=0,
                id=i,
                scheduled_s=(sent if sent is not None else instant()) - rng.uniform(0, 1),
                sent_s=sent,
                chunk_times_s=times,
                end_s=times[-1] if times and rng.random() < 0.95 else None,
                closed_s=closed,
                outcome=outcome,
                output_tokens=rng.choice([None, 0, len(times), len(times) + 1, 3 * len(times) + 7]),
            )
        )
    return records


def same(new, ref):
    if isinstance(ref, float) and isinstance(new, float):
        return new == pytest.approx(ref, rel=1e-9, abs=1e-12)
    return type(new) is type(ref) and new == ref


@pytest.mark.parametrize("seed", range(12))
def test_vectorized_metrics_equal_the_loops(seed):
    import random

    rng = random.Random(seed)
    start = rng.choice([0.0, 3.7, 1234.56])
    window_s = rng.choice([5.0, 0.7, 1.3, 0.1])
    end = start + rng.choice([0.05, window_s * 3, window_s * 20.5, 31.4159])
    records = random_records(rng, rng.choice([0, 1, 5, 80, 300]), start, end, window_s)
    ramp_end = start + rng.uniform(0, end - start)
    user_spans = (
        []
        if rng.random() < 0.3
        else [
            (rng.choice(_edges(start, end, window_s)), rng.uniform(start, end + window_s))
            for _ in range(rng.randrange(1, 9))
        ]
    )

    # target_level: only a staged point's windows have one (none here)
    rows = [
        w.model_dump(exclude={"target_level"}) for w in timeseries(records, start, end, ramp_end, user_spans, window_s)
    ]
    ref = ref_timeseries(records, start, end, ramp_end, user_spans, window_s)
    assert len(rows) == len(ref)
    for row, expected in zip(rows, ref):
        assert row.keys() == expected.keys()
        for key in expected:
            assert same(row[key], expected[key]), (key, row, expected)

    edges = _edges(start, end, window_s)
    windows = [Window(a, b) for a, b in zip(edges, edges[1:])] + [
        Window(start, end),
        Window(end, start),
        Window(start, start),
        Window(-1e9, 1e9),
        Window(end + 100, end + 200),
        Window(start - 200, start - 100),
    ]
    windows += [Window(*sorted((rng.choice(edges), rng.uniform(start - 1, end + 1)))) for _ in range(5)]
    for w in windows:
        assert same(output_tokens_in(records, w), ref_output_tokens_in(records, w)), w
        assert same(output_tokens_in(iter(records), w), ref_output_tokens_in(records, w)), w
        got, expected = concurrency(records, w), ref_concurrency(records, w)
        assert same(got.mean, expected[0]) and same(got.peak, expected[1]), (w, got, expected)
    assert inter_chunk_gaps(records).tolist() == list(ref_inter_chunk_gaps(records))
    ok = [r for r in records if r.ok]
    assert distribution(inter_chunk_gaps(ok)) == distribution(list(ref_inter_chunk_gaps(ok)))


def test_chunk_times_are_a_compact_array_and_json_a_list():
    import array

    import orjson

    r = rec(0, sent=1.0, ttft=0.05, n_chunks=3, itl=0.01)
    assert isinstance(r.chunk_times_s, array.array) and r.chunk_times_s.typecode == "d"
    assert isinstance(RequestRecord(point=0, id=1, scheduled_s=0.0).chunk_times_s, array.array)
    data = orjson.loads(orjson.dumps(r.to_json()))
    assert data["chunk_times_s"] == [1.05, 1.06, 1.07] == r.chunk_times_s.tolist()
    back = RequestRecord.from_json(data)
    assert isinstance(back.chunk_times_s, array.array) and back == r
    r.chunk_times_s.append(2.0)  # the client's hot path; metrics leave no view holding it
    summarize_point([r], users(0.0, 5.0), SLOConfig())
    timeseries([r], 0.0, 5.0, 0.0, [], 1.0)
    r.chunk_times_s.append(3.0)
    assert len(r.chunk_times_s) == 5


@pytest.mark.parametrize("seed", range(8))
def test_a_point_tallied_in_batches_gives_the_same_results_as_whole(seed, monkeypatch):
    """The run's path (derive.point_result): records streamed, their chunk times tallied a few at
    a time and dropped. Every figure is the same float as when the records are held whole."""
    import random

    from tokenbench import metrics
    from tokenbench.metrics import ChunkTally, series_edges

    rng = random.Random(100 + seed)
    start, window_s = rng.choice([0.0, 3.7]), rng.choice([0.7, 1.3, 5.0])
    end = start + window_s * rng.choice([3, 20.5])
    records = random_records(rng, rng.choice([5, 80, 300]), start, end, window_s)
    span = PointSpan(Window(start + window_s, end - window_s / 2), open_loop=seed % 2 == 1, end_s=end)
    slo = SLOConfig(ttft_s=0.5, tpot_s=0.05)
    whole = summarize_point(records, span, slo)
    series = timeseries(records, start, end, start + window_s, [], window_s)

    monkeypatch.setattr(metrics.chunks, "TALLY_BATCH_CHUNKS", rng.choice([1, 7, 50]))
    tally = ChunkTally(span, series_edges(start, end, window_s))
    kept = tally.consume(iter(records))
    assert [len(r.chunk_times_s) for r in kept] == [len(r.chunk_times_s) for r in records]
    assert all(type(r.chunk_times_s).__name__ == "ChunkEnds" for r in kept)
    assert summarize_point(kept, span, slo, tally) == whole
    assert timeseries(kept, start, end, start + window_s, [], window_s, tokens=tally.series_tokens) == series


def test_tokens_by_window_spreads_a_records_tokens_over_its_chunks():
    # 4 chunks at 1.0, 1.5, 2.0, 2.5 carrying 8 tokens (2 a chunk); 2 chunks at 0.5, 4.5 carrying 2
    a = rec(0, sent=0.9, ttft=0.1, n_chunks=4, itl=0.5, tokens=8)
    b = rec(1, sent=0.0, ttft=0.5, n_chunks=2, itl=4.0, tokens=2)
    edges = np.array([1.0, 2.0, 3.0, 4.0])
    assert tokens_by_window([a, b], edges).tolist() == [4.0, 4.0, 0.0]  # 0.5 and 4.5 fall outside
    assert tokens_by_window([a, b], np.array([1.0])).tolist() == []  # no window
