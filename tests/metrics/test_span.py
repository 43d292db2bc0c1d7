"""A record's life (metrics.span and records): TTFT, E2E and TPOT per request, the chunk ends kept."""

import pytest
from metric_records import rec

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
