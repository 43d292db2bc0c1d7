"""The time series (metrics.timeseries) on hand-built records with known answers."""

import pytest
from metric_records import rec

from tokenbench.metrics import timeseries
from tokenbench.records import Outcome, RequestRecord


def test_timeseries_marks_ramp_and_counts_users():
    records = [rec(i, sent=float(i), ttft=0.1, n_chunks=5, itl=0.1) for i in range(10)]
    rows = timeseries(records, 0.0, 10.0, ramp_end_s=2.5, user_spans=[(0.0, 10.0), (3.0, 10.0)], window_s=5.0)
    assert [r.ramp for r in rows] == [True, False]
    assert [r.active_users for r in rows] == [2, 2]
    assert rows[0].output_tokens_per_s == pytest.approx(25 / 5)
    assert rows[0].ttft_s_mean == pytest.approx(0.1)


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
    assert [(r.errors, r.cancelled) for r in rows] == [(2, 0), (0, 2)]
