"""Which points' TTFTs the fit reads: a client flagged limited is left out only where
its lag may be in its TTFTs (short of CPU, or a lag p99 over LAG_SHARE of the median TTFT)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tokenbench.model.observe import LAG_SHARE, lag_in_ttft


def _point(ttft_p50, limited_by=("loop_lag",), loop_lag=None, send_lag=None, limited=True):
    client = SimpleNamespace(
        limited=limited, limited_by=list(limited_by), loop_lag_p99_s=loop_lag, send_lag_p99_s=send_lag
    )
    return SimpleNamespace(client=client, ttft_s=SimpleNamespace(p50=ttft_p50))


def test_a_lag_small_against_the_ttft_leaves_the_point_in():
    # seen beside vLLM CPU on 2 cores: loop lag p99 17.5 ms, TTFTs of 1.3 s
    assert not lag_in_ttft(_point(1.3, loop_lag=0.0175))


@pytest.mark.parametrize(
    "point",
    [
        _point(0.020, loop_lag=0.0175),  # the mock's 20 ms TTFT: the lag is most of it
        _point(1.3, loop_lag=0.0175, send_lag=1.3 * LAG_SHARE * 1.1),  # the worse lag decides
        _point(1.3, limited_by=("cpu",), loop_lag=0.001),  # short of CPU: every send may be late
        _point(1.3, loop_lag=None),  # a lag flag without a lag read
        _point(None, loop_lag=0.0175),  # no TTFT to weigh the lag against
    ],
)
def test_a_lag_the_ttft_may_hold_leaves_the_point_out(point):
    assert lag_in_ttft(point)


def test_a_client_that_kept_up_is_never_left_out():
    assert not lag_in_ttft(_point(0.020, limited=False, limited_by=(), loop_lag=0.0175))
    assert not lag_in_ttft(SimpleNamespace(client=None, ttft_s=SimpleNamespace(p50=0.020)))
