"""Metrics on hand-built records with known answers (METRICS.md formulas)."""

import pytest

from tokenbench.config import SLOConfig
from tokenbench.metrics import Window, distribution, summarize_point, timeseries
from tokenbench.records import Outcome, RequestRecord, TokenSource


def rec(i, sent, ttft, n_chunks, itl, tokens=None, outcome=Outcome.OK, scheduled=None):
    chunks = [sent + ttft + k * itl for k in range(n_chunks)]
    return RequestRecord(
        point=0, id=i, scheduled_s=sent if scheduled is None else scheduled, sent_s=sent,
        chunk_times_s=chunks, end_s=chunks[-1] if chunks else None,
        closed_s=(chunks[-1] if chunks else sent) + 0.001, outcome=outcome,
        output_tokens=tokens if tokens is not None else (n_chunks or None),
        output_tokens_source=TokenSource.SERVER, prompt_tokens=10,
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
    s = summarize_point(records, Window(0.0, 10.0), SLOConfig(ttft_s=0.06, tpot_s=0.02))
    assert s["requests"] == {"total": 11, "ok": 10, "by_outcome": {"ok": 10, "http_error": 1}}
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
    s = summarize_point(records, Window(5.0, 10.0), SLOConfig())
    assert s["ttft_s"]["count"] == 10  # only requests sent in [5, 10)
    assert s["requests"]["total"] == 20  # every record is counted by outcome
    # chunks arriving in [5, 10): those of requests sent at 3.5 .. 8.5 (arrivals at sent+1, sent+1.5)
    arrivals = [t for r in records for t in r.chunk_times_s if 5.0 <= t < 10.0]
    assert s["output_tokens_per_s"] == pytest.approx(len(arrivals) / 5.0)
    assert s["goodput_per_s"] is None  # no SLO set


def test_goodput_counts_ttft_violations_as_not_good():
    records = [rec(0, 0.0, 0.05, 3, 0.01), rec(1, 1.0, 0.9, 3, 0.01)]
    s = summarize_point(records, Window(0.0, 2.0), SLOConfig(ttft_s=0.5))
    assert s["goodput_per_s"] == pytest.approx(0.5)


def test_queue_delay_is_sent_minus_scheduled():
    records = [rec(0, sent=1.25, ttft=0.05, n_chunks=3, itl=0.01, scheduled=1.0)]
    s = summarize_point(records, Window(0.0, 5.0), SLOConfig())
    assert s["queue_s"]["mean"] == pytest.approx(0.25)


def test_nothing_streamed_gives_none_not_zero():
    records = [rec(0, 0.0, 0.0, 0, 0.0, outcome=Outcome.NO_OUTPUT)]
    s = summarize_point(records, Window(0.0, 1.0), SLOConfig())
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

    records = [rec(0, Outcome.HTTP_ERROR, 1.0), rec(1, Outcome.STREAM_ERROR, 2.0),
               rec(2, Outcome.CANCELLED, 6.0), rec(3, Outcome.CANCELLED, 7.0), rec(4, Outcome.OK, 3.0)]
    rows = timeseries(records, 0.0, 10.0, 0.0, [], 5.0)
    assert [(r["errors"], r["cancelled"]) for r in rows] == [(2, 0), (0, 2)]
