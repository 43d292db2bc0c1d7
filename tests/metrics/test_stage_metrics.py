"""A staged point's results stage by stage (metrics.stages) on hand-built records with known
answers: one server slot of 0.45 s (first chunk 50 ms, then 4 more 100 ms apart), FIFO, under
1/s for 4 s, 4/s for 2 s (over its 2.2/s), then 1/s for 6 s while the backlog drains."""

import pytest
from metric_records import rec

from tokenbench.config import LoadSweep, StagedLoad
from tokenbench.config.slo import SLOConfig
from tokenbench.metrics import timeseries
from tokenbench.metrics.stages import StageTally, stage_results
from tokenbench.records import RequestRecord

SERVICE_S = 0.45


def _load() -> StagedLoad:
    (load,) = LoadSweep(stages="rate=1:4s, rate=4:2s, rate=1:6s", arrival="constant").points()
    assert isinstance(load, StagedLoad)
    return load


def _served() -> list[RequestRecord]:
    arrivals = [0.0, 1.0, 2.0, 3.0] + [4 + 0.25 * k for k in range(8)] + [6.0 + k for k in range(6)]
    records, free = [], 0.0
    for i, a in enumerate(arrivals):
        start = max(a, free)  # sent at its arrival: the server queues it (its wait is in its TTFT)
        r = rec(i, sent=a, ttft=start - a + 0.05, n_chunks=5, itl=0.1, scheduled=a)
        free = start + SERVICE_S
        records.append(r)
    return records


def _backlog(records: list[RequestRecord], t: float, before: bool = False) -> int:
    """The definition: scheduled by t, not yet closed (``before``: just before t)."""

    def by(x: float | None) -> bool:
        return x is not None and (x < t if before else x <= t)

    return sum(1 for r in records if by(r.scheduled_s) and not by(r.closed_s))


def test_each_stage_counts_its_scheduled_requests_and_what_arrived_in_its_window():
    records, load = _served(), _load()
    tally = StageTally(load, 0.0)
    stages = stage_results(list(tally.observe(records)), load, 0.0, SLOConfig(ttft_s=0.3), tally)
    assert [(s.start_s, s.end_s, s.target_rate_per_s) for s in stages] == [(0, 4, 1), (4, 6, 4), (6, 12, 1)]
    assert [s.requests for s in stages] == [4, 8, 6]
    assert [s.offered_per_s for s in stages] == [1.0, 4.0, 1.0]
    # ok ends within each window: the slot finishes 4 of the burst's by 5.8 s, the rest after
    assert stages[1].requests_per_s == pytest.approx(4 / 2)
    assert stages[0].output_tokens_per_s == pytest.approx(20 / 4)
    assert stages[0].itl_s.count == 16 and stages[0].itl_s.mean == pytest.approx(0.1)
    # SLO attainment (TTFT from the scheduled time <= 300 ms): the k-th of the burst waited 0.2k s
    assert stages[0].good_fraction == 1.0
    assert stages[1].good_fraction == pytest.approx(2 / 8)
    assert stages[1].ttft_s.max == pytest.approx(0.2 * 7 + 0.05)


def test_the_backlog_grows_in_the_overload_and_its_drain_is_timed():
    records, load = _served(), _load()
    tally = StageTally(load, 0.0)
    low, high, after = stage_results(list(tally.observe(records)), load, 0.0, SLOConfig(), tally)
    ends = (high.backlog.at_start, high.backlog.at_end)
    # just before 4 s the slot is idle; just before 6 s, 8 came, 4 left (the one due at 6 s is the next's)
    assert ends == (_backlog(records, 4.0, before=True), _backlog(records, 6.0, before=True)) == (0, 4)
    assert high.backlog.growth_per_s == pytest.approx((8 - 4) / 2)
    assert after.backlog.at_start == high.backlog.at_end
    assert high.backlog.peak == max(_backlog(records, t) for t in [4 + 0.25 * k for k in range(8)])
    assert low.backlog.drain_s is None and high.backlog.drain_s is None  # neither follows a stage that grew
    # back at 0 (where the overload began) once the one scheduled at 8 s closes: the slot, busy with
    # the burst to 7.6 s, serves those due at 6, 7 and 8 s back to back to 8.95 s (+ 1 ms to close),
    # before the one due at 9 s
    first_back = min(
        r.closed_s for r in records if r.closed_s and r.closed_s > 6 and _backlog(records, r.closed_s) <= 0
    )
    assert after.backlog.drain_s == pytest.approx(first_back - 6.0) == pytest.approx(2.951)
    assert after.backlog.at_end == 0
    assert after.good_fraction is None  # no --slo: no attainment


def test_a_backlog_that_never_drains_has_no_drain_time():
    records, load = _served(), _load()
    tally = StageTally(load, 0.0)
    stuck = [*records[:12], *(rec(100 + k, sent=6.0 + k, ttft=1.0, n_chunks=0, itl=0.1) for k in range(3))]
    for r in stuck[12:]:
        r.closed_s = None  # never closed: in the backlog until the point's end
    _, _, after = stage_results(list(tally.observe(stuck)), load, 0.0, SLOConfig(), tally)
    assert after.backlog.drain_s is None


def test_the_time_series_carries_the_target_level():
    load = _load()
    rows = timeseries(_served(), 0.0, 12.0, 0.0, [], 2.0, target=load.level_at)
    assert [r.target_level for r in rows] == [1, 1, 4, 1, 1, 1]


def test_a_point_that_is_not_staged_has_no_target_level_key():
    rows = timeseries(_served(), 0.0, 12.0, 0.0, [], 2.0)
    assert all("target_level" not in r.model_fields_set for r in rows)


def test_a_point_stopped_early_has_the_stages_it_began_the_last_cut_where_it_stopped():
    records, load = _served(), _load()
    tally = StageTally(load, 0.0, load_end_s=5.0)
    stages = stage_results(
        list(tally.observe([r for r in records if r.scheduled_s < 5.0])), load, 0.0, SLOConfig(), tally
    )
    assert [(s.start_s, s.end_s, s.requests) for s in stages] == [(0, 4, 4), (4, 5, 4)]
    assert stages[1].offered_per_s == 4.0
