"""A record's life (metrics.span and records): TTFT, E2E and TPOT per request, the chunk ends kept;
the point's window, the time series' window edges, which window a time falls in, and each
request's sent-to-closed life."""

import numpy as np
import pytest
from metric_records import rec

from tokenbench.metrics.span import (
    Window,
    as_sequence,
    lifetimes,
    series_edges,
    started_s,
    tokens_per_chunk,
    window_of,
)
from tokenbench.records import RequestRecord


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


def test_tpot_is_undefined_when_the_reply_arrives_at_once():
    """Audit 11: 128 tokens in one event: TPOT None, not 0 (and it cannot pass a TPOT SLO)."""
    r = rec(0, sent=0.0, ttft=0.3, n_chunks=1, itl=0.0, tokens=128)
    assert r.tpot_s is None
    same_read = rec(1, sent=0.0, ttft=0.3, n_chunks=3, itl=0.0, tokens=3)  # three events, one read
    assert same_read.tpot_s is None


def test_chunk_ends_keep_what_per_request_metrics_read():
    r = rec(0, sent=1.0, ttft=0.05, n_chunks=4, itl=0.01, tokens=5)
    light = r.without_chunks()
    assert len(light.chunk_times_s) == 4 and light.chunk_times_s[0] == 1.05 and light.chunk_times_s[-1] == r.end_s
    assert (light.ttft_s, light.e2e_s, light.tpot_s) == (r.ttft_s, r.e2e_s, r.tpot_s)
    with pytest.raises(IndexError, match="only the first and last"):
        light.chunk_times_s[1]
    empty = RequestRecord(point=0, id=1, scheduled_s=0.0).without_chunks()
    assert not empty.chunk_times_s and empty.ttft_s is None


def test_a_window_is_half_open_and_overlaps_by_its_intersection():
    w = Window(10.0, 20.0)
    assert w.length_s == 10.0
    assert w.contains(10.0) and w.contains(19.999) and not w.contains(20.0) and not w.contains(9.999)
    assert w.overlap_s(5.0, 12.0) == 2.0
    assert w.overlap_s(12.0, 30.0) == 8.0
    assert w.overlap_s(0.0, 5.0) == 0.0  # never negative


def test_series_edges_step_by_the_window_and_cut_the_last_at_the_span_end():
    assert series_edges(0.0, 12.0, 5.0).tolist() == [0.0, 5.0, 10.0, 12.0]
    assert series_edges(0.0, 10.0, 5.0).tolist() == [0.0, 5.0, 10.0]
    assert series_edges(3.0, 3.0, 5.0).size == 0
    with pytest.raises(ValueError, match="window_s must be > 0"):
        series_edges(0.0, 10.0, 0.0)


def test_window_of_gives_each_time_its_window_index():
    edges = np.array([0.0, 5.0, 10.0, 12.0])
    t = np.array([-1.0, 0.0, 4.999, 5.0, 11.0, 12.0, 99.0, np.nan])
    assert window_of(edges, t).tolist() == [-1, 0, 0, 1, 2, 3, 3, 3]  # 3 = len(edges) - 1: past the last


def test_lifetimes_are_sent_to_closed_of_the_sent_requests():
    done = rec(0, sent=1.0, ttft=0.5, n_chunks=2, itl=0.5)  # closed at 2.001
    never_closed = RequestRecord(point=0, id=1, scheduled_s=3.0, sent_s=3.5)
    never_sent = RequestRecord(point=0, id=2, scheduled_s=4.0)
    sent, end = lifetimes([done, never_closed, never_sent])
    assert sent.tolist() == [1.0, 3.5]
    assert end.tolist() == [pytest.approx(2.001), 3.5]  # never closed: ends as it was sent


def test_started_s_and_tokens_per_chunk():
    assert started_s(RequestRecord(point=0, id=0, scheduled_s=2.0)) == 2.0  # not sent: its schedule
    assert started_s(rec(0, sent=3.0, ttft=0.1, n_chunks=1, itl=0.0, scheduled=2.0)) == 3.0
    assert tokens_per_chunk(rec(0, sent=0.0, ttft=0.1, n_chunks=4, itl=0.1, tokens=10)) == 2.5
    assert tokens_per_chunk(RequestRecord(point=0, id=0, scheduled_s=0.0)) == 0.0


def test_as_sequence_keeps_a_sequence_and_lists_an_iterator():
    records = [RequestRecord(point=0, id=i, scheduled_s=0.0) for i in range(3)]
    assert as_sequence(records) is records
    assert as_sequence(iter(records)) == records
