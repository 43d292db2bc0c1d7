"""Load schedules: pure, seeded, with the rates and ramps asked for."""

import numpy as np
import pytest

from tokenbench.config import RateLoad, StopConfig, UsersLoad
from tokenbench.load import arrival_times, user_start_times


def test_users_spawn_evenly_over_the_ramp():
    assert user_start_times(UsersLoad(users=4, ramp_up_s=20)) == [0.0, 5.0, 10.0, 15.0]
    assert user_start_times(UsersLoad(users=3)) == [0.0, 0.0, 0.0]


def test_constant_arrivals_are_exact():
    times = list(arrival_times(RateLoad(rate_per_s=4, arrival="constant"), 0, StopConfig(duration_s=2)))
    assert times == pytest.approx([0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75])


@pytest.mark.parametrize("arrival,burstiness", [("poisson", 1.0), ("gamma", 0.5), ("gamma", 4.0)])
def test_random_arrivals_have_the_asked_rate_and_are_reproducible(arrival, burstiness):
    load = RateLoad(rate_per_s=10, arrival=arrival, burstiness=burstiness)
    stop = StopConfig(max_requests=5000)
    a = list(arrival_times(load, 7, stop))
    assert a == list(arrival_times(load, 7, stop))
    assert a != list(arrival_times(load, 8, stop))
    gaps = np.diff(a)
    assert len(a) == 5000
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    # gamma shape k: coefficient of variation 1/sqrt(k)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / np.sqrt(burstiness), rel=0.1)


def test_duration_bounds_arrivals():
    times = list(arrival_times(RateLoad(rate_per_s=100), 0, StopConfig(duration_s=1.0)))
    assert all(t < 1.0 for t in times) and 70 < len(times) < 130


@pytest.mark.parametrize("arrival", ["poisson", "gamma"])
def test_random_arrivals_draw_the_first_gap_too(arrival):
    """No arrival pinned at t = 0: over many seeds, 0.25/s x 20 s gives 5 arrivals on average, not 6."""
    load = RateLoad(rate_per_s=0.25, arrival=arrival, burstiness=1.0)
    counts = [len(list(arrival_times(load, seed, StopConfig(duration_s=20)))) for seed in range(4000)]
    firsts = [next(iter(arrival_times(load, seed, StopConfig(max_requests=1)))) for seed in range(200)]
    assert np.mean(counts) == pytest.approx(5.0, abs=0.15)
    assert min(firsts) > 0
