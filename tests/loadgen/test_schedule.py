"""Load schedules: pure, seeded, with the rates and ramps asked for; trace replay's schedule
(``replay_offsets``): known answers for speed, window and jitter."""

import numpy as np
import pytest

from tokenbench.config import LoadSweep, RateLoad, ReplayLoad, StagedLoad, StopConfig, UsersLoad
from tokenbench.datasets.traces import TraceRow
from tokenbench.loadgen.schedule import (
    RateCurve,
    Share,
    arrival_times,
    describe,
    replay_offsets,
    staged_arrival_times,
    staged_user_spans,
    user_start_times,
)


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


# --- trace replay ---------------------------------------------------------------------------


def _rows(*times_s: float) -> list[TraceRow]:
    return [TraceRow(i + 1, t, 10, 10) for i, t in enumerate(times_s)]


def _offsets(rows: list[TraceRow], **kw: float) -> list[float]:
    return [s.offset_s for s in replay_offsets(rows, **kw)]


def test_offsets_are_trace_times_at_speed_one():
    rows = _rows(0.0, 0.5, 0.5, 3.0)
    sends = list(replay_offsets(rows))
    assert [s.offset_s for s in sends] == [0.0, 0.5, 0.5, 3.0]
    assert [s.row.row for s in sends] == [1, 2, 3, 4]


def test_speed_two_is_twice_as_fast():
    rows = _rows(0.0, 1.0, 3.0)
    assert _offsets(rows, speed=2.0) == [0.0, 0.5, 1.5]
    assert _offsets(rows, speed=0.5) == [0.0, 2.0, 6.0]


def test_the_window_is_in_trace_time_and_its_first_row_is_offset_zero():
    rows = _rows(0.0, 2.0, 4.0, 6.0, 8.0)
    sends = list(replay_offsets(rows, speed=2.0, start_s=2.0, end_s=8.0))  # 8.0 is out: the end is open
    assert [s.row.row for s in sends] == [2, 3, 4]
    assert [s.offset_s for s in sends] == [0.0, 1.0, 2.0]
    assert [s.row.row for s in replay_offsets(rows, start_s=5.0)] == [4, 5]
    assert _offsets(rows, end_s=4.0) == [0.0, 2.0]


def test_jitter_spreads_each_grid_instant_over_the_bucket_after_it():
    # Mooncake's conversation trace: arrivals stacked on a 3 s grid
    rows = _rows(*([0.0] * 500 + [3.0] * 500))
    sends = list(replay_offsets(rows, jitter_s=3.0, seed=1))
    first = sorted(s.offset_s for s in sends if s.row.timestamp_s == 0.0)
    second = [s.offset_s for s in sends if s.row.timestamp_s == 3.0]
    assert 0.0 <= first[0] and first[-1] < 3.0 and all(3.0 <= t < 6.0 for t in second)
    assert len({round(t, 6) for t in first}) == 500  # no two left together
    assert sum(first) / 500 == pytest.approx(1.5, abs=0.15)  # uniform over the bucket
    offsets = [s.offset_s for s in sends]
    assert offsets == sorted(offsets)  # in send order


def test_jitter_is_seeded_and_in_trace_seconds():
    rows = _rows(0.0, 0.0, 3.0, 3.0)
    assert _offsets(rows, jitter_s=3.0, seed=7) == _offsets(rows, jitter_s=3.0, seed=7)
    assert _offsets(rows, jitter_s=3.0, seed=7) != _offsets(rows, jitter_s=3.0, seed=8)
    fast = _offsets(rows, jitter_s=3.0, seed=7, speed=2.0)
    assert fast == pytest.approx([t / 2 for t in _offsets(rows, jitter_s=3.0, seed=7)])


def test_no_jitter_by_default():
    assert _offsets(_rows(0.0, 0.0, 3.0)) == [0.0, 0.0, 3.0]


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"speed": 0.0}, "speed must be > 0"),
        ({"speed": -1.0}, "speed must be > 0"),
        ({"jitter_s": -0.1}, "jitter must be >= 0"),
        ({"start_s": 10.0}, r"no trace rows in the replay window \[10.0, end\)"),
        ({"start_s": 1.0, "end_s": 1.0}, r"no trace rows in the replay window \[1.0, 1.0\)"),
    ],
)
def test_bad_settings_say_what_to_change(kw, message):
    with pytest.raises(ValueError, match=message):
        list(replay_offsets(_rows(0.0, 2.0), **kw))


def test_a_replay_describes_its_speed_window_jitter_and_cap():
    assert describe(ReplayLoad()) == "trace replay x1"
    assert describe(ReplayLoad(start_s=5)) == "trace replay x1 5s-end"
    load = ReplayLoad(speed=2, start_s=10, end_s=70, jitter_s=3, max_concurrency=4)
    assert describe(load) == "trace replay x2 10s-70s, jitter 3s, max 4 in flight"


# --- a staged load: the level changes while the point runs ------------------------------------------

STAGES = "rate=2:20s, rate=8:20s ramp=5s, rate=2:20s"


def _staged(text: str, **kw) -> StagedLoad:
    (load,) = LoadSweep(stages=text, **kw).points()
    assert isinstance(load, StagedLoad)
    return load


def test_the_rate_curve_integrates_the_stages_and_inverts_exactly():
    curve = RateCurve.of(_staged(STAGES))
    # 2 x 20 + (the ramp 2 -> 8 over 5 s: 25) + 8 x 15 + 2 x 20
    assert curve.total == pytest.approx(40 + 25 + 120 + 40)
    assert curve.expected(22.5) == pytest.approx(40 + 2 * 2.5 + 0.6 * 2.5**2 * 2 / 2)
    for t in (0.1, 12.0, 21.3, 24.99, 30.0, 59.9):
        assert curve.time_of(curve.expected(t)) == pytest.approx(t)


def test_constant_arrivals_land_on_the_rate_curve():
    """Arrival n is where n arrivals are due: in each stage of constant rate, every 1/rate s."""
    load = _staged(STAGES, arrival="constant")
    times = list(staged_arrival_times(load, 0, StopConfig(duration_s=load.duration_s)))
    curve = RateCurve.of(load)
    assert [curve.expected(t) for t in times] == pytest.approx(list(range(len(times))), abs=1e-9)
    assert len(times) == 225
    assert times[:3] == pytest.approx([0.0, 0.5, 1.0])
    assert np.diff([t for t in times if 25 <= t < 40]) == pytest.approx(0.125)
    assert np.diff([t for t in times if t >= 40]) == pytest.approx(0.5)


@pytest.mark.parametrize("arrival,burstiness", [("poisson", 1.0), ("gamma", 4.0)])
def test_the_expected_count_per_stage_is_the_integral_of_the_rate(arrival, burstiness):
    """Over seeds, the mean count in each stage is its integral of the rate (40, 145, 40)."""
    load = _staged(STAGES, arrival=arrival, burstiness=burstiness)
    edges = [0, 20, 40, 60]
    counts = np.array(
        [np.histogram(list(staged_arrival_times(load, s, StopConfig(duration_s=60))), edges)[0] for s in range(400)]
    )
    assert counts.mean(axis=0) == pytest.approx([40, 145, 40], rel=0.03)
    seeded = list(staged_arrival_times(load, 7, StopConfig(duration_s=60)))
    assert seeded == list(staged_arrival_times(load, 7, StopConfig(duration_s=60)))


def test_a_zero_rate_stage_sends_nothing_and_max_requests_ends_the_schedule():
    load = _staged("rate=10:2s, rate=0:3s, rate=10:2s", arrival="constant")
    times = list(staged_arrival_times(load, 0, StopConfig(duration_s=7)))
    assert len(times) == 40 and not [t for t in times if 2 <= t < 5]
    assert len(list(staged_arrival_times(load, 0, StopConfig(max_requests=5)))) == 5


def test_users_follow_the_stages_added_along_ramps_retired_at_steps_down():
    spans = staged_user_spans(_staged("users=2:10s, users=6:10s ramp=4s, users=1:10s ramp=5s, users=4:10s"))
    as_tuples = [[(s.start_s, s.end_s) for s in user] for user in spans]
    assert as_tuples == [
        [(0, 40)],
        [(0, 25), (30, 40)],  # retired last on the way down (at 25), back at the step up
        [(10, 24), (30, 40)],  # added first on the ramp up, at its start
        [(11, 23), (30, 40)],
        [(12, 22)],
        [(13, 21)],  # added last, retired first: one 5 s ramp for 5 users, one each second
    ]

    def active(t: float) -> int:
        return sum(any(s.start_s <= t < s.end_s for s in user) for user in spans)

    assert [active(t) for t in (5, 14, 19, 20.5, 26, 35)] == [2, 6, 6, 6, 1, 4]


def test_every_worker_keeps_its_share_of_one_staged_schedule():
    load = _staged(STAGES)
    whole = list(staged_arrival_times(load, 3, StopConfig(duration_s=60)))
    shares = [Share(i, 3) for i in range(3)]
    dealt = sorted(t for share in shares for i, t in enumerate(whole) if share.mine(i))
    assert dealt == whole


def test_a_staged_point_is_described_by_its_levels():
    assert describe(_staged(STAGES)) == "staged 2 → 8 → 2 req/s over 60s"
