"""Metrics on hand-built records with known answers (METRICS.md formulas)."""

import pytest

from tokenbench.config import SLOConfig
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
from tokenbench.records import Outcome, RequestRecord, TokenSource


def users(start, end):
    """A closed-loop point's span: window [start, end), the point ending with it."""
    return PointSpan(Window(start, end), open_loop=False, end_s=end)


def rates(start, end, point_end=None):
    return PointSpan(Window(start, end), open_loop=True, end_s=end if point_end is None else point_end)


def rec(i, sent, ttft, n_chunks, itl, tokens=None, outcome=Outcome.OK, scheduled=None):
    chunks = [sent + ttft + k * itl for k in range(n_chunks)]
    return RequestRecord(
        point=0,
        id=i,
        scheduled_s=sent if scheduled is None else scheduled,
        sent_s=sent,
        chunk_times_s=chunks,
        end_s=chunks[-1] if chunks else None,
        closed_s=(chunks[-1] if chunks else sent) + 0.001,
        outcome=outcome,
        output_tokens=tokens if tokens is not None else (n_chunks or None),
        output_tokens_source=TokenSource.SERVER,
        prompt_tokens=10,
    )


def test_per_request_formulas():
    r = rec(0, sent=1.0, ttft=0.05, n_chunks=11, itl=0.01)
    assert r.ttft_s == pytest.approx(0.05)
    assert r.e2e_s == pytest.approx(0.15)
    assert r.tpot_s == pytest.approx(0.01)  # (0.15 - 0.05) / (11 - 1)
    single = rec(1, sent=1.0, ttft=0.05, n_chunks=1, itl=0.01)
    assert single.tpot_s is None  # undefined below 2 tokens, not 0


def test_tpot_uses_tokens_not_chunks():
    # 5 chunks carrying 20 tokens: TPOT = (E2E - TTFT) / 19, ITL gaps stay per chunk.
    r = rec(0, sent=0.0, ttft=0.1, n_chunks=5, itl=0.04, tokens=20)
    assert r.tpot_s == pytest.approx(0.16 / 19)


def test_empty_distribution_is_none_not_zero():
    d = distribution([])
    assert d.count == 0 and d.mean is None and d.p99 is None


def test_point_summary_known_answers():
    records = [rec(i, sent=float(i), ttft=0.05, n_chunks=11, itl=0.01) for i in range(10)]
    records.append(rec(10, sent=5.5, ttft=0.0, n_chunks=0, itl=0.0, outcome=Outcome.HTTP_ERROR))
    s = summarize_point(records, users(0.0, 10.0), SLOConfig(ttft_s=0.06, tpot_s=0.02))
    assert s["requests"] == {
        "total": 11,
        "ok": 10,
        "by_outcome": {"ok": 10, "http_error": 1},
        "retries": 0,
        "retried_requests": 0,
        "ok_without_end_marker": 10,
    }
    assert s["ttft_s"]["count"] == 10 and s["ttft_s"]["mean"] == pytest.approx(0.05)
    assert s["tpot_s"]["p50"] == pytest.approx(0.01)
    assert s["itl_s"]["count"] == 100 and s["itl_s"]["mean"] == pytest.approx(0.01)
    assert s["e2e_s"]["max"] == pytest.approx(0.15)
    assert s["output_tokens_per_s"] == pytest.approx(110 / 10)
    assert s["total_tokens_per_s"] == pytest.approx((110 + 100) / 10)  # the failure had no usage sent
    assert s["requests_per_s"] == pytest.approx(1.0)
    assert s["goodput_per_s"] == pytest.approx(1.0)
    assert s["good_fraction"] == pytest.approx(10 / 11)  # failures stay in the denominator
    assert s["concurrency"]["peak"] == 1


def test_ramp_is_excluded_from_window_metrics():
    records = [rec(i, sent=i * 0.5, ttft=1.0, n_chunks=2, itl=0.5) for i in range(20)]
    s = summarize_point(records, users(5.0, 10.0), SLOConfig())
    assert s["ttft_s"]["count"] == 10  # only requests sent in [5, 10)
    assert s["requests"]["total"] == 20  # every record is counted by outcome
    # chunks arriving in [5, 10): those of requests sent at 3.5 .. 8.5 (arrivals at sent+1, sent+1.5)
    arrivals = [t for r in records for t in r.chunk_times_s if 5.0 <= t < 10.0]
    assert s["output_tokens_per_s"] == pytest.approx(len(arrivals) / 5.0)
    assert s["goodput_per_s"] is None  # no SLO set


def test_goodput_counts_ttft_violations_as_not_good():
    records = [rec(0, 0.0, 0.05, 3, 0.01), rec(1, 1.0, 0.9, 3, 0.01)]
    s = summarize_point(records, users(0.0, 2.0), SLOConfig(ttft_s=0.5))
    assert s["goodput_per_s"] == pytest.approx(0.5)


def test_queue_delay_is_sent_minus_scheduled():
    records = [rec(0, sent=1.25, ttft=0.05, n_chunks=3, itl=0.01, scheduled=1.0)]
    s = summarize_point(records, users(0.0, 5.0), SLOConfig())
    assert s["queue_s"]["mean"] == pytest.approx(0.25)


def test_nothing_streamed_gives_none_not_zero():
    records = [rec(0, 0.0, 0.0, 0, 0.0, outcome=Outcome.NO_OUTPUT)]
    s = summarize_point(records, users(0.0, 1.0), SLOConfig())
    assert s["ttft_s"]["mean"] is None and s["ttft_s"]["count"] == 0
    assert s["output_tokens_per_s"] == 0.0


def test_timeseries_marks_ramp_and_counts_users():
    records = [rec(i, sent=float(i), ttft=0.1, n_chunks=5, itl=0.1) for i in range(10)]
    rows = timeseries(records, 0.0, 10.0, ramp_end_s=2.5, user_spans=[(0.0, 10.0), (3.0, 10.0)], window_s=5.0)
    assert [r["ramp"] for r in rows] == [True, False]
    assert [r["active_users"] for r in rows] == [2, 2]
    assert rows[0]["output_tokens_per_s"] == pytest.approx(25 / 5)
    assert rows[0]["ttft_s_mean"] == pytest.approx(0.1)


def test_timeseries_counts_failures_and_cancellations_apart():
    def rec(i, outcome, closed):
        return RequestRecord(point=0, id=i, scheduled_s=0.0, sent_s=0.1, closed_s=closed, outcome=outcome)

    records = [
        rec(0, Outcome.HTTP_ERROR, 1.0),
        rec(1, Outcome.STREAM_ERROR, 2.0),
        rec(2, Outcome.CANCELLED, 6.0),
        rec(3, Outcome.CANCELLED, 7.0),
        rec(4, Outcome.OK, 3.0),
    ]
    rows = timeseries(records, 0.0, 10.0, 0.0, [], 5.0)
    assert [(r["errors"], r["cancelled"]) for r in rows] == [(2, 0), (0, 2)]


# --- the audit's examples (shared/research/measurement-audit.md), with the right answers ---------


def served(i, scheduled, sent, ttft, n, itl, outcome=Outcome.OK):
    r = rec(i, sent=sent, ttft=ttft, n_chunks=n, itl=itl, scheduled=scheduled, outcome=outcome)
    r.end_marker = True
    return r


def test_open_loop_counts_the_scheduled_population_not_the_pipeline_fill():
    """Audit 1 and 2: constant 2 req/s, 60 s window, TTFT 0.5 s, E2E 10 s, 200 tokens, all ok.
    Counting completions in the window said 1.67 req/s and 366.7 tok/s, goodput 2.0."""
    itl = 9.5 / 199
    records = [served(i, i * 0.5, i * 0.5, 0.5, 200, itl) for i in range(120)]
    s = summarize_point(records, rates(0.0, 60.0, point_end=70.0), SLOConfig(ttft_s=1.0))
    assert s["offered_per_s"] == pytest.approx(2.0)
    assert s["requests_per_s"] == pytest.approx(2.0)
    assert s["output_tokens_per_s"] == pytest.approx(400.0)
    assert s["goodput_per_s"] == pytest.approx(2.0) and s["goodput_per_s"] <= s["requests_per_s"]
    assert s["backlog_growth_s"] == 0 and s["rate_period_s"] == pytest.approx(60.0)


def test_low_rate_window_is_the_whole_period():
    """Audit 4: 0.5 req/s for 10 s, E2E 0.2 s, 10 tokens: 0.50 req/s and 5.0 tok/s (not 0.61)."""
    records = [served(i, 2.0 * i, 2.0 * i, 0.02, 10, 0.02) for i in range(5)]
    s = summarize_point(records, rates(0.0, 10.0), SLOConfig())
    assert s["requests_per_s"] == pytest.approx(0.5)
    assert s["output_tokens_per_s"] == pytest.approx(5.0)


def one_slot_queue(rate, duration, service, drain):
    """Open loop into one slot (max_concurrency 1, or a server with one stream) for ``duration``
    s, then ``drain`` s: who was served when, and who was never sent."""
    records, free, end = [], 0.0, duration + drain
    for i in range(int(rate * duration)):
        scheduled = i / rate
        sent = max(scheduled, free)
        if sent + service > end:
            records.append(RequestRecord(point=0, id=i, scheduled_s=scheduled, outcome=Outcome.NOT_SENT, closed_s=end))
            continue
        records.append(served(i, scheduled, sent, 0.1, 10, (service - 0.1) / 9))
        free = sent + service
    return records


def test_a_concurrency_cap_under_overload_keeps_the_longest_waits():
    """Audit 3: 10 req/s, one slot, E2E 1 s, 10 s, 60 s drain: 70 sent, 30 never. Picking by
    sent_s said queue mean 4.05 s / max 8.1 s over 10 requests."""
    records = one_slot_queue(10, 10.0, 1.0, 60.0)
    sent = [r for r in records if r.sent_s is not None]
    assert len(sent) == 70
    s = summarize_point(records, rates(0.0, 10.0, point_end=70.0), SLOConfig(ttft_s=0.5))
    truth = [r.sent_s - r.scheduled_s for r in sent]
    assert s["queue_s"]["count"] == 100 and s["queue_s_censored"] == 30
    assert s["queue_s"]["max"] >= max(truth) == pytest.approx(62.1)
    assert sum(truth) / 70 == pytest.approx(31.05)
    assert s["queue_s"]["mean"] > 31.0  # the never-sent add their lower bounds (60.0 .. 62.9)
    assert s["requests_per_s"] == pytest.approx(1.0)  # one slot at 1 s: the truth is 1/s
    assert s["goodput_per_s"] == pytest.approx(1 / 70)  # only the first waited < 0.5 s for its token
    assert s["requests_in_window"]["by_outcome"] == {"ok": 70, "not_sent": 30}


def test_overload_drained_in_time_gives_the_servers_rate():
    """4 req/s into one 0.5 s slot for 10 s, every request served in the drain: 2 req/s."""
    records = one_slot_queue(4, 10.0, 0.5, 60.0)
    s = summarize_point(records, rates(0.0, 10.0, point_end=20.5), SLOConfig())
    assert s["requests_in_window"]["by_outcome"] == {"ok": 40}
    assert s["requests_per_s"] == pytest.approx(2.0, rel=0.02)
    assert s["output_tokens_per_s"] == pytest.approx(20.0, rel=0.02)
    assert s["offered_per_s"] == pytest.approx(4.0)


def test_closed_loop_rate_is_the_steady_state_not_the_fill():
    """Audit 2, example C: 10 users, no ramp, 60 s, E2E 25 s: 0.40 req/s (not 0.33 or 0.50)."""
    records = [served(u * 10 + k, 25.0 * k, 25.0 * k, 1.0, 25, 1.0) for u in range(10) for k in range(3)]
    for r in records:
        r.user = r.id // 10
    s = summarize_point(records, users(0.0, 60.0), SLOConfig(ttft_s=2.0))
    assert s["requests_per_s"] == pytest.approx(0.4)
    assert s["goodput_per_s"] == pytest.approx(0.4)


def test_peak_concurrency_counts_requests_already_in_flight():
    """Audit 14: window [10, 20), A in flight 0-30 s, B 5-15 s: peak 2."""
    a = RequestRecord(point=0, id=0, scheduled_s=0.0, sent_s=0.0, closed_s=30.0)
    b = RequestRecord(point=0, id=1, scheduled_s=5.0, sent_s=5.0, closed_s=15.0)
    assert concurrency([a, b], Window(10.0, 20.0)) == (pytest.approx(1.5), 2)


def test_tpot_is_undefined_when_the_reply_arrives_at_once():
    """Audit 11: 128 tokens in one event: TPOT None, not 0 (and it cannot pass a TPOT SLO)."""
    r = rec(0, sent=0.0, ttft=0.3, n_chunks=1, itl=0.0, tokens=128)
    assert r.tpot_s is None
    same_read = rec(1, sent=0.0, ttft=0.3, n_chunks=3, itl=0.0, tokens=3)  # three events, one read
    assert same_read.tpot_s is None


def test_an_eos_counted_but_not_streamed_is_not_a_token_gap():
    """Audit 10: 2 content tokens + EOS (server count 3, finish_reason stop): TPOT is the one gap."""
    r = rec(0, sent=0.0, ttft=0.1, n_chunks=2, itl=0.05, tokens=3)
    r.finish_reason = "stop"
    r.client_output_tokens = 2
    r.server_output_tokens = 3
    assert r.streamed_tokens == 2 and r.tpot_s == pytest.approx(0.05)
    s = summarize_point([r], users(0.0, 1.0), SLOConfig())
    assert s["tokens"]["server_vs_client"]["mismatched"] == 0
    assert s["tokens"]["eos_counted_not_streamed"] == 1
    length = rec(1, sent=0.0, ttft=0.1, n_chunks=3, itl=0.05, tokens=3)
    length.finish_reason = "length"  # max_tokens reached (or ignore_eos): every token streamed
    assert length.streamed_tokens == 3 and length.tpot_s == pytest.approx(0.05)


def test_prompt_tokens_fall_back_to_the_datasets_count():
    """Audit 12: no server usage, 1,000-token prompts, 100-token replies, 1 req/s: 1,100 tok/s."""
    records = [served(i, float(i), float(i), 0.1, 100, 0.005) for i in range(10)]
    for r in records:
        r.prompt_tokens, r.dataset_prompt_tokens = None, 1000
    s = summarize_point(records, rates(0.0, 10.0), SLOConfig())
    assert s["output_tokens_per_s"] == pytest.approx(100.0)
    assert s["total_tokens_per_s"] == pytest.approx(1100.0)
    assert s["prompt_tokens_source"] == {"dataset": 10}
    records[0].dataset_prompt_tokens = None
    assert summarize_point(records, rates(0.0, 10.0), SLOConfig())["total_tokens_per_s"] is None  # unknown: not 0


def test_cancelled_and_never_sent_are_censored_in_error_and_good_fraction():
    """Audit 16: one rule. Two good, one failed, one cancelled, one never sent: 2/3 good."""
    records = [
        served(0, 0.0, 0.0, 0.1, 5, 0.01),
        served(1, 1.0, 1.0, 0.1, 5, 0.01),
        served(2, 2.0, 2.0, 0.0, 0, 0.0, outcome=Outcome.HTTP_ERROR),
        RequestRecord(point=0, id=3, scheduled_s=3.0, sent_s=3.0, closed_s=9.0, outcome=Outcome.CANCELLED),
        RequestRecord(point=0, id=4, scheduled_s=4.0, closed_s=9.0, outcome=Outcome.NOT_SENT),
    ]
    s = summarize_point(records, rates(0.0, 5.0, point_end=9.0), SLOConfig(ttft_s=1.0))
    assert s["good_fraction"] == pytest.approx(2 / 3)


def test_distributions_use_sample_std_and_hide_p999_below_1000():
    d = distribution([1.0, 2.0, 3.0, 4.0])
    assert d.std == pytest.approx(1.2909944)  # sample (n - 1), not population (1.118)
    assert d.p999 is None and d.p99 is not None
    assert distribution([1.0]).std is None
    assert distribution(float(i) for i in range(1000)).p999 == pytest.approx(998.001)


def test_goodput_judges_latency_from_the_schedule():
    """A request that waited 60 s for a slot and then streamed quickly is not good."""
    records = [served(0, 0.0, 60.0, 0.1, 5, 0.01), served(1, 1.0, 1.0, 0.1, 5, 0.01)]
    s = summarize_point(records, rates(0.0, 2.0, point_end=61.0), SLOConfig(ttft_s=0.5))
    assert s["good_fraction"] == pytest.approx(0.5)


def test_decode_speed_per_user_is_one_over_tpot():
    records = [served(0, 0.0, 0.0, 0.1, 11, 0.02), served(1, 0.5, 0.5, 0.1, 11, 0.05)]
    s = summarize_point(records, users(0.0, 2.0), SLOConfig())
    assert s["decode_speed_tokens_per_s"]["min"] == pytest.approx(20.0)
    assert s["decode_speed_tokens_per_s"]["max"] == pytest.approx(50.0)


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
                    if r.outcome not in (Outcome.OK, Outcome.CANCELLED, Outcome.NOT_SENT)
                    and r.closed_s is not None
                    and w.contains(r.closed_s)
                ),
                "cancelled": sum(
                    1
                    for r in records
                    if r.outcome in (Outcome.CANCELLED, Outcome.NOT_SENT)
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

    rows = timeseries(records, start, end, ramp_end, user_spans, window_s)
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
        assert same(got[0], expected[0]) and same(got[1], expected[1]), (w, got, expected)
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


def test_chunk_ends_keep_what_per_request_metrics_read():
    r = rec(0, sent=1.0, ttft=0.05, n_chunks=4, itl=0.01, tokens=5)
    light = r.without_chunks()
    assert len(light.chunk_times_s) == 4 and light.chunk_times_s[0] == 1.05 and light.chunk_times_s[-1] == r.end_s
    assert (light.ttft_s, light.e2e_s, light.tpot_s) == (r.ttft_s, r.e2e_s, r.tpot_s)
    with pytest.raises(IndexError, match="only the first and last"):
        light.chunk_times_s[1]
    empty = RequestRecord(point=0, id=1, scheduled_s=0.0).without_chunks()
    assert not empty.chunk_times_s and empty.ttft_s is None


def test_sample_std_sums_squares_a_block_at_a_time(monkeypatch):
    import numpy as np

    from tokenbench import metrics

    values = np.random.default_rng(3).exponential(0.02, 5000)
    assert metrics.stats._sample_std(values) == float(values.std(ddof=1))  # up to a block: numpy's own
    monkeypatch.setattr(metrics.stats, "_STD_BLOCK", 1024)
    assert metrics.stats._sample_std(values) == pytest.approx(float(values.std(ddof=1)), rel=1e-12)
    kept = values.copy()
    d = distribution(kept, consume=True)  # percentiles may reorder it in place
    assert d.mean == float(values.mean()) and d.p50 == float(np.percentile(values, 50))
    assert distribution(values) == distribution(values.tolist())
    before = values.copy()
    assert distribution(values).p90 == float(np.percentile(values, 90))
    assert (values == before).all()  # not consumed: left as it was
