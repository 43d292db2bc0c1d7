"""The client's samples -> a point's ``client`` block and its windows' figures (telemetry.client_health),
from scripted samples whose answers are worked out by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tokenbench.telemetry.client_health import client_limited, point_client, window_client


def _sample(start_s: float, cpu_s: float, lags: list[float], in_flight: int = 3, worker: int = 0) -> dict:
    return {
        "kind": "client",
        "worker": worker,
        "start_s": start_s,
        "t_s": start_s + 0.5,
        "cpu_s": cpu_s,
        "tick_s": 0.05,
        "lag_s": lags,
        "in_flight_max": in_flight,
    }


# Two samples in the window [1, 2): 10 ticks, 8 on time, one 4 ms late, one 20 ms late;
# CPU 0.1 s then 0.4 s of 0.5 s. One sample before the window (midpoint 0.75) that must not count.
SAMPLES = [
    _sample(0.5, 0.49, [0.5] * 10, in_flight=99),
    _sample(1.0, 0.1, [0.0] * 4 + [0.004], in_flight=2),
    _sample(1.5, 0.4, [0.0] * 4 + [0.020], in_flight=5),
]


def test_a_point_from_scripted_samples_by_hand() -> None:
    client = point_client(SAMPLES, 1.0, 2.0)
    assert client is not None
    # numpy's linear p99 of 10 lags: rank 0.99 * 9 = 8.91 between the sorted 4 ms and 20 ms
    assert client.loop_lag_p99_s == pytest.approx(0.004 + 0.91 * 0.016)
    assert client.loop_lag_max_s == pytest.approx(0.020)
    assert client.cpu_util_max == pytest.approx(0.8) and client.cpu_util_mean == pytest.approx(0.5)
    assert (client.workers, client.samples, client.ticks, client.connections_max) == (1, 2, 10, 5)
    assert client.period_s == [1.0, 2.0]
    assert client.limited is True and client.limited_by == ["loop_lag"]  # 18.6 ms > 5 ms; 80% CPU < 90%
    assert client_limited(_point(client)) == 1.0


def test_under_both_limits_the_point_is_not_limited() -> None:
    quiet = [_sample(1.0, 0.2, [0.001] * 10), _sample(1.5, 0.3, [0.002] * 10)]
    client = point_client(quiet, 1.0, 2.0)
    assert client is not None and client.limited is False and client.limited_by == []
    assert client.loop_lag_p99_s == pytest.approx(0.002) and client.cpu_util_max == pytest.approx(0.6)
    assert client_limited(_point(client)) == 0.0


def test_cpu_over_90_percent_of_a_core_limits_the_point() -> None:
    client = point_client([_sample(1.0, 0.46, [0.0] * 10)], 1.0, 2.0)
    assert client is not None and client.cpu_util_max == pytest.approx(0.92)
    assert client.limited is True and client.limited_by == ["cpu"]


def test_several_workers_the_worst_one_counts() -> None:
    samples = [_sample(1.0, 0.1, [0.001] * 10, worker=0), _sample(1.0, 0.3, [0.003] * 10, worker=1)]
    client = point_client(samples, 1.0, 2.0)
    assert client is not None and client.workers == 2
    assert client.loop_lag_p99_s == pytest.approx(0.003) and client.cpu_util_mean == pytest.approx(0.6)


def test_no_samples_no_client_block() -> None:
    assert point_client([], 0.0, 10.0) is None  # a run from before the client was sampled
    assert point_client(SAMPLES, 5.0, 6.0) is None
    assert window_client(SAMPLES, 5.0, 6.0) is None


def test_a_window_too_short_for_a_midpoint_takes_the_samples_over_it() -> None:
    client = point_client(SAMPLES, 1.1, 1.2)
    assert client is not None and client.samples == 1 and client.loop_lag_max_s == pytest.approx(0.004)


def test_a_time_series_window() -> None:
    w = window_client(SAMPLES, 1.0, 2.0)
    assert w is not None
    assert w.client_cpu_util == pytest.approx(0.5) and w.client_loop_lag_max_s == pytest.approx(0.020)
    assert w.client_connections_max == 5  # the most one sample held, not the earlier window's 99


def test_connections_are_the_most_one_worker_held() -> None:
    samples = [_sample(1.0, 0.1, [0.001], in_flight=4, worker=0), _sample(1.0, 0.1, [0.001], in_flight=7, worker=1)]
    client, window = point_client(samples, 1.0, 2.0), window_client(samples, 1.0, 2.0)
    assert client is not None and client.connections_max == 7
    assert window is not None and window.client_connections_max == 7


def _point(client):
    """A stand-in point carrying ``client`` (the only field the getter reads)."""
    return SimpleNamespace(client=client)
