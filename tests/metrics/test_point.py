"""One point's metrics (metrics.point.summarize_point) on hand-built records with known answers
(METRICS.md formulas)."""

import pytest
from metric_records import rates, rec, served, users

from tokenbench.config.slo import SLOConfig
from tokenbench.metrics import Window, concurrency, summarize_point
from tokenbench.records import Outcome, RequestRecord


def test_point_summary_known_answers():
    records = [rec(i, sent=float(i), ttft=0.05, n_chunks=11, itl=0.01) for i in range(10)]
    records.append(rec(10, sent=5.5, ttft=0.0, n_chunks=0, itl=0.0, outcome=Outcome.HTTP_ERROR))
    s = summarize_point(records, users(0.0, 10.0), SLOConfig(ttft_s=0.06, tpot_s=0.02))
    assert s.requests.model_dump() == {
        "total": 11,
        "ok": 10,
        "by_outcome": {"ok": 10, "http_error": 1},
        "retries": 0,
        "retried_requests": 0,
        "ok_without_end_marker": 10,
    }
    assert s.ttft_s.count == 10 and s.ttft_s.mean == pytest.approx(0.05)
    assert s.tpot_s.p50 == pytest.approx(0.01)
    assert s.itl_s.count == 100 and s.itl_s.mean == pytest.approx(0.01)
    assert s.e2e_s.max == pytest.approx(0.15)
    assert s.output_tokens_per_s == pytest.approx(110 / 10)
    assert s.total_tokens_per_s == pytest.approx((110 + 100) / 10)  # the failure had no usage sent
    assert s.requests_per_s == pytest.approx(1.0)
    assert s.goodput_per_s == pytest.approx(1.0)
    assert s.good_fraction == pytest.approx(10 / 11)  # failures stay in the denominator
    assert s.concurrency.peak == 1


def test_ramp_is_excluded_from_window_metrics():
    records = [rec(i, sent=i * 0.5, ttft=1.0, n_chunks=2, itl=0.5) for i in range(20)]
    s = summarize_point(records, users(5.0, 10.0), SLOConfig())
    assert s.ttft_s.count == 10  # only requests sent in [5, 10)
    assert s.requests.total == 20  # every record is counted by outcome
    # chunks arriving in [5, 10): those of requests sent at 3.5 .. 8.5 (arrivals at sent+1, sent+1.5)
    arrivals = [t for r in records for t in r.chunk_times_s if 5.0 <= t < 10.0]
    assert s.output_tokens_per_s == pytest.approx(len(arrivals) / 5.0)
    assert s.goodput_per_s is None  # no SLO set


def test_goodput_counts_ttft_violations_as_not_good():
    records = [rec(0, 0.0, 0.05, 3, 0.01), rec(1, 1.0, 0.9, 3, 0.01)]
    s = summarize_point(records, users(0.0, 2.0), SLOConfig(ttft_s=0.5))
    assert s.goodput_per_s == pytest.approx(0.5)


def test_queue_delay_is_sent_minus_scheduled():
    records = [rec(0, sent=1.25, ttft=0.05, n_chunks=3, itl=0.01, scheduled=1.0)]
    s = summarize_point(records, users(0.0, 5.0), SLOConfig())
    assert s.queue_s.mean == pytest.approx(0.25)


def test_nothing_streamed_gives_none_not_zero():
    records = [rec(0, 0.0, 0.0, 0, 0.0, outcome=Outcome.NO_OUTPUT)]
    s = summarize_point(records, users(0.0, 1.0), SLOConfig())
    assert s.ttft_s.mean is None and s.ttft_s.count == 0
    assert s.output_tokens_per_s == 0.0


# --- the audit's examples (shared/research/measurement-audit.md), with the right answers ---------


def test_open_loop_counts_the_scheduled_population_not_the_pipeline_fill():
    """Audit 1 and 2: constant 2 req/s, 60 s window, TTFT 0.5 s, E2E 10 s, 200 tokens, all ok.
    Counting completions in the window said 1.67 req/s and 366.7 tok/s, goodput 2.0."""
    itl = 9.5 / 199
    records = [served(i, i * 0.5, i * 0.5, 0.5, 200, itl) for i in range(120)]
    s = summarize_point(records, rates(0.0, 60.0, point_end=70.0), SLOConfig(ttft_s=1.0))
    assert s.offered_per_s == pytest.approx(2.0)
    assert s.requests_per_s == pytest.approx(2.0)
    assert s.output_tokens_per_s == pytest.approx(400.0)
    assert s.goodput_per_s == pytest.approx(2.0) and s.goodput_per_s <= s.requests_per_s
    assert s.backlog_growth_s == 0 and s.rate_period_s == pytest.approx(60.0)


def test_low_rate_window_is_the_whole_period():
    """Audit 4: 0.5 req/s for 10 s, E2E 0.2 s, 10 tokens: 0.50 req/s and 5.0 tok/s (not 0.61)."""
    records = [served(i, 2.0 * i, 2.0 * i, 0.02, 10, 0.02) for i in range(5)]
    s = summarize_point(records, rates(0.0, 10.0), SLOConfig())
    assert s.requests_per_s == pytest.approx(0.5)
    assert s.output_tokens_per_s == pytest.approx(5.0)


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
    assert s.queue_s.count == 100 and s.queue_s_censored == 30
    assert s.queue_s.max >= max(truth) == pytest.approx(62.1)
    assert sum(truth) / 70 == pytest.approx(31.05)
    assert s.queue_s.mean > 31.0  # the never-sent add their lower bounds (60.0 .. 62.9)
    assert s.requests_per_s == pytest.approx(1.0)  # one slot at 1 s: the truth is 1/s
    assert s.goodput_per_s == pytest.approx(1 / 70)  # only the first waited < 0.5 s for its token
    assert s.requests_in_window.by_outcome == {"ok": 70, "not_sent": 30}


def test_overload_drained_in_time_gives_the_servers_rate():
    """4 req/s into one 0.5 s slot for 10 s, every request served in the drain: 2 req/s."""
    records = one_slot_queue(4, 10.0, 0.5, 60.0)
    s = summarize_point(records, rates(0.0, 10.0, point_end=20.5), SLOConfig())
    assert s.requests_in_window.by_outcome == {"ok": 40}
    assert s.requests_per_s == pytest.approx(2.0, rel=0.02)
    assert s.output_tokens_per_s == pytest.approx(20.0, rel=0.02)
    assert s.offered_per_s == pytest.approx(4.0)


def test_closed_loop_rate_is_the_steady_state_not_the_fill():
    """Audit 2, example C: 10 users, no ramp, 60 s, E2E 25 s: 0.40 req/s (not 0.33 or 0.50)."""
    records = [served(u * 10 + k, 25.0 * k, 25.0 * k, 1.0, 25, 1.0) for u in range(10) for k in range(3)]
    for r in records:
        r.user = r.id // 10
    s = summarize_point(records, users(0.0, 60.0), SLOConfig(ttft_s=2.0))
    assert s.requests_per_s == pytest.approx(0.4)
    assert s.goodput_per_s == pytest.approx(0.4)


def test_peak_concurrency_counts_requests_already_in_flight():
    """Audit 14: window [10, 20), A in flight 0-30 s, B 5-15 s: peak 2."""
    a = RequestRecord(point=0, id=0, scheduled_s=0.0, sent_s=0.0, closed_s=30.0)
    b = RequestRecord(point=0, id=1, scheduled_s=5.0, sent_s=5.0, closed_s=15.0)
    c = concurrency([a, b], Window(10.0, 20.0))
    assert (c.mean, c.peak) == (pytest.approx(1.5), 2)


def test_an_eos_counted_but_not_streamed_is_not_a_token_gap():
    """Audit 10: 2 content tokens + EOS (server count 3, finish_reason stop): TPOT is the one gap."""
    r = rec(0, sent=0.0, ttft=0.1, n_chunks=2, itl=0.05, tokens=3)
    r.finish_reason = "stop"
    r.client_output_tokens = 2
    r.server_output_tokens = 3
    assert r.streamed_tokens == 2 and r.tpot_s == pytest.approx(0.05)
    s = summarize_point([r], users(0.0, 1.0), SLOConfig())
    assert s.tokens.server_vs_client.mismatched == 0
    assert s.tokens.eos_counted_not_streamed == 1
    length = rec(1, sent=0.0, ttft=0.1, n_chunks=3, itl=0.05, tokens=3)
    length.finish_reason = "length"  # max_tokens reached (or ignore_eos): every token streamed
    assert length.streamed_tokens == 3 and length.tpot_s == pytest.approx(0.05)


def test_prompt_tokens_fall_back_to_the_datasets_count():
    """Audit 12: no server usage, 1,000-token prompts, 100-token replies, 1 req/s: 1,100 tok/s."""
    records = [served(i, float(i), float(i), 0.1, 100, 0.005) for i in range(10)]
    for r in records:
        r.prompt_tokens, r.dataset_prompt_tokens = None, 1000
    s = summarize_point(records, rates(0.0, 10.0), SLOConfig())
    assert s.output_tokens_per_s == pytest.approx(100.0)
    assert s.total_tokens_per_s == pytest.approx(1100.0)
    assert s.prompt_tokens_source == {"dataset": 10}
    records[0].dataset_prompt_tokens = None
    assert summarize_point(records, rates(0.0, 10.0), SLOConfig()).total_tokens_per_s is None  # unknown: not 0


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
    assert s.good_fraction == pytest.approx(2 / 3)


def test_goodput_judges_latency_from_the_schedule():
    """A request that waited 60 s for a slot and then streamed quickly is not good."""
    records = [served(0, 0.0, 60.0, 0.1, 5, 0.01), served(1, 1.0, 1.0, 0.1, 5, 0.01)]
    s = summarize_point(records, rates(0.0, 2.0, point_end=61.0), SLOConfig(ttft_s=0.5))
    assert s.good_fraction == pytest.approx(0.5)


def test_decode_speed_per_user_is_one_over_tpot():
    records = [served(0, 0.0, 0.0, 0.1, 11, 0.02), served(1, 0.5, 0.5, 0.1, 11, 0.05)]
    s = summarize_point(records, users(0.0, 2.0), SLOConfig())
    assert s.decode_speed_tokens_per_s.min == pytest.approx(20.0)
    assert s.decode_speed_tokens_per_s.max == pytest.approx(50.0)


def test_a_replay_is_open_loop_with_the_rates_populations():
    from tokenbench.metrics import POPULATIONS

    assert POPULATIONS["replay"] == POPULATIONS["rate"] != POPULATIONS["users"]


def test_cancelled_streams_tokens_are_counted_in_tok_s_and_stated_apart():
    """A new user's report: 4 users stopped 2.6 s in. Two requests of 128 tokens completed; four streams had
    124 of their 128 tokens when cancelled. Output throughput counts all 4 x 124 + 2 x 128 tokens,
    request rate the two completed requests only: cancelled_output_tokens says which is which."""
    ok = [rec(i, sent=0.0, ttft=0.05, n_chunks=128, itl=0.01) for i in range(2)]
    cut = [rec(10 + i, sent=1.3, ttft=0.05, n_chunks=124, itl=0.01, outcome=Outcome.CANCELLED) for i in range(4)]
    for r in cut:  # cancelled: no usage, closed when the run stopped
        r.output_tokens, r.end_s, r.closed_s = None, None, 2.6
    s = summarize_point([*ok, *cut], users(0.0, 2.6), SLOConfig())
    assert s.output_tokens == pytest.approx(2 * 128 + 4 * 124)
    assert s.cancelled_output_tokens == pytest.approx(4 * 124) and s.cancelled_streams == 4
    assert s.output_tokens_per_s == pytest.approx((256 + 496) / 2.6)
    assert s.requests_per_s == pytest.approx(2 / 2.6)  # the cancelled four count nothing here


def test_cancelled_output_open_loop_and_absent_without_cancels():
    records = [served(0, 0.0, 0.0, 0.1, 10, 0.01), served(1, 1.0, 1.0, 0.1, 10, 0.01)]
    cut = RequestRecord(
        point=0,
        id=2,
        scheduled_s=1.5,
        sent_s=1.5,
        chunk_times_s=[1.6, 1.7, 1.8],
        closed_s=2.0,
        outcome=Outcome.CANCELLED,
    )
    s = summarize_point([*records, cut], rates(0.0, 2.0, point_end=2.0), SLOConfig())
    assert (s.cancelled_output_tokens, s.cancelled_streams) == (3.0, 1)
    quiet = summarize_point(records, users(0.0, 2.0), SLOConfig())
    assert quiet.cancelled_streams is None  # not set: results.json keeps its shape
    assert "cancelled_output_tokens" not in quiet.model_dump(exclude_unset=True)
