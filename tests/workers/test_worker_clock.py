"""A worker's clock offset, estimated NTP-style against a simulated skew."""

from __future__ import annotations

import time

import pytest

from tokenbench.config import TargetConfig
from tokenbench.loadgen.schedule import Share
from tokenbench.loadgen.stats import LiveStats
from tokenbench.records import RunClock
from tokenbench.workers.clock import Offset, estimate, measure
from tokenbench.workers.core import Setup, WorkerInfo
from tokenbench.workers.pool import WorkerPool
from tokenbench.workers.remote import RemoteWorker


async def test_the_offset_of_a_skewed_clock_is_found_within_its_uncertainty():
    """The worker's clock runs 5 s ahead; each ping's way out and back take different times (the
    shortest round trip is not symmetric either): the estimate is within its stated bound."""
    skew = 5.0
    delays = [(0.004, 0.001), (0.0007, 0.0003), (0.002, 0.006), (0.0015, 0.0002)]
    t = [100.0]  # the driver's clock, advanced by the simulated network

    def now() -> float:
        return t[0]

    pings = iter(delays)

    async def worker_clock() -> float:
        out, back = next(pings)
        t[0] += out
        reading = t[0] + skew
        t[0] += back
        return reading

    offset = await measure(worker_clock, now, pings=len(delays))
    assert offset.uncertainty_s == pytest.approx(0.0005)  # the shortest round trip: 1 ms, halved
    assert abs(offset.offset_s - skew) <= offset.uncertainty_s
    assert offset.offset_s == pytest.approx(skew + 0.0002)  # 0.7 ms out, 0.3 back: 0.2 ms off


def test_the_shortest_round_trip_wins():
    pings = [(0.0, 10.05, 0.1), (1.0, 11.0, 1.002), (2.0, 12.5, 2.5)]
    assert estimate(pings) == Offset(pytest.approx(9.999), pytest.approx(0.001))
    with pytest.raises(ValueError, match="no clock pings"):
        estimate([])


class _SkewedWorker(RemoteWorker):
    """A worker elsewhere whose monotonic clock is ``skew`` s off the driver's."""

    def __init__(self, index: int, skew: float) -> None:
        self.index, self.skew, self.lost = index, skew, None
        self.given = None

    @property
    def describe(self) -> str:
        return f"worker {self.index}"

    async def call(self, method: str, *args, timeout_s=None):
        if method == "clock":
            return time.perf_counter() + self.skew
        self.given = args[0]
        return WorkerInfo(self.index, 1, "n")

    async def stop(self) -> None:
        pass


async def test_each_workers_run_clock_starts_at_the_drivers_origin_on_its_own_clock():
    """Set up, a worker's run clock reads what the driver's does at the same instant: its origin
    is the driver's shifted by the estimated offset (within the estimate's uncertainty)."""
    clock = RunClock.start()
    workers = [_SkewedWorker(0, -37.25), _SkewedWorker(1, 1234.5)]
    pool = WorkerPool(workers, clock, lambda records: None, lambda sample: None, lambda text: None, LiveStats())
    await pool.set_up(lambda h, origin: Setup(Share(h.index, 2), origin, clock.origin_unix_s, TargetConfig()))
    for w in workers:
        offset = pool.offsets[w.index]
        assert abs(offset.offset_s - w.skew) <= offset.uncertainty_s + 1e-9
        perf = time.perf_counter()
        on_worker = (perf + w.skew) - w.given.origin_monotonic_s  # its run clock, read on its own clock
        assert abs(on_worker - (perf - clock.origin_monotonic_s)) <= offset.uncertainty_s + 1e-9
        assert pool.infos[w.index].node == "n"
