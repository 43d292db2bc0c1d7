"""The driver's side (workers.pool): a run's one way to run a point. A pool of one worker on the
driver's loop against the in-process mock (one record per request, the driver's clock, no lead);
scripted handles for what a real worker cannot be told to do on cue (a loss, the dealing)."""

from __future__ import annotations

import asyncio
from typing import Any

from tokenbench.config import RateLoad, StopConfig, TargetConfig, UsersLoad
from tokenbench.config.target import ResolvedTarget
from tokenbench.loadgen import PointRun, new_run
from tokenbench.loadgen.schedule import Share
from tokenbench.loadgen.stats import LiveStats
from tokenbench.records import Outcome, Request, RequestRecord, RunClock
from tokenbench.workers import WorkerLost
from tokenbench.workers.core import Batch, LocalWorker, Order, Setup, WorkerInfo
from tokenbench.workers.pool import SAME_CLOCK, START_LEAD_S, WorkerPool
from tokenbench.workers.remote import RemoteWorker


class _Out:
    """Where a pool's records, samples and messages go."""

    def __init__(self) -> None:
        self.records: list[RequestRecord] = []
        self.writes: list[int] = []  # how many records each write held
        self.samples: list[dict[str, Any]] = []
        self.said: list[str] = []

    def pool(self, handles: list[Any], clock: RunClock, stats: LiveStats | None = None) -> WorkerPool:
        return WorkerPool(handles, clock, self._write, self.samples.append, self.said.append, stats or LiveStats())

    def _write(self, records: list[RequestRecord]) -> None:
        self.records += records
        self.writes.append(len(records))


def _setup_for(url: str, clock: RunClock):
    target = ResolvedTarget(url=url, model="mock-model", api="chat", continuous_usage=False)
    requests = [Request(prompt=f"p{i}", max_tokens=4) for i in range(5)]
    return lambda h, origin: Setup(Share(h.index, 1), origin, clock.origin_unix_s, target, requests=requests)


async def test_a_pool_of_one_local_worker_writes_one_record_per_request(mock_server) -> None:
    url = mock_server(ttft_ms=5, itl_ms=1)
    clock, out, stats = RunClock.start(), _Out(), LiveStats()
    pool = out.pool([LocalWorker()], clock, stats)
    starts: list[PointRun] = []
    try:
        await pool.set_up(_setup_for(url, clock))
        assert pool.offsets == {0: SAME_CLOCK}  # the driver's own clock: nothing to measure
        asked = clock.now()
        run, samples, losses = await pool.run_point(
            0, UsersLoad(users=3), StopConfig(max_requests=9), (1, 1), 3, starts.append
        )
        await pool.check_clocks()
    finally:
        await pool.close()
    assert [s.start_s for s in starts] == [run.start_s] and run.start_s - asked < START_LEAD_S  # no lead
    assert len(out.records) == run.num_records == 9
    assert out.writes == [1] * 9  # each written as it ended, as a one-process run always did
    assert sorted(r.id for r in out.records) == list(range(9)) and all(r.ok for r in out.records)
    assert losses == [] and pool.alive() == pool.handles and not pool.interrupted
    assert stats.done == 9 and stats.point == 0 and stats.started_s == run.start_s
    assert samples and out.samples == samples  # the client's samples, into samples.jsonl and back
    assert pool.end_offsets == {0: SAME_CLOCK}


class _Scripted(RemoteWorker):
    """A worker elsewhere whose transport is scripted: each poll answers the next batch (or raises
    the next exception); it keeps the orders it was given."""

    def __init__(self, index: int, polls: list[Batch | Exception] | None = None) -> None:
        self.index, self.lost = index, None
        self.polls = polls or []
        self.orders: list[Order] = []

    @property
    def describe(self) -> str:
        return f"worker {self.index}"

    async def call(self, method: str, *args: Any, timeout_s: float | None = None) -> Any:
        if method == "clock":
            return asyncio.get_running_loop().time()
        if method == "setup":
            return WorkerInfo(self.index, 1, "n")
        if method in ("prepare", "start"):
            self.orders.append(args[0])
        if method == "poll":
            answer = self.polls.pop(0) if self.polls else Batch(run=self._part())
            if isinstance(answer, Exception):
                self.lost = str(answer)
                raise answer
            return answer
        return None

    def _part(self) -> PointRun:
        order = self.orders[-1]
        part = new_run(order.index, order.load, order.stop, order.start_s)
        part.num_records = 0
        return part

    async def stop(self) -> None:
        pass


def _open(worker: int, rid: int) -> RequestRecord:
    return RequestRecord(point=0, id=rid, scheduled_s=0.0, worker=worker)


async def test_a_lost_handle_turns_its_requests_in_flight_into_worker_lost_records() -> None:
    clock, out = RunClock.start(), _Out()
    gone = _Scripted(0, [Batch(created=[_open(0, 0), _open(0, 2)]), WorkerLost("worker 0: killed by signal SIGKILL")])
    survivor = _Scripted(1, [Batch(created=[_open(1, 1)]), Batch(done=[_open(1, 1)])])
    pool = out.pool([gone, survivor], clock)
    await pool.set_up(lambda h, origin: Setup(Share(h.index, 2), origin, clock.origin_unix_s, TargetConfig()))
    run, _, losses = await pool.run_point(0, UsersLoad(users=3), StopConfig(duration_s=1), (1, 1), 3, lambda run: None)
    lost = [r for r in out.records if r.outcome is Outcome.WORKER_LOST]
    assert sorted(r.id for r in lost) == [0, 2] and {r.worker for r in lost} == {0}
    assert all(r.error == "lost with its worker: worker 0: killed by signal SIGKILL" for r in lost)
    assert [r.id for r in out.records if r.outcome is not Outcome.WORKER_LOST] == [1]  # the survivor's, once
    assert [(loss.worker, loss.in_flight) for loss in losses] == [(0, 2)]
    assert pool.alive() == [survivor] and gone.lost and "worker_lost" in out.said[0]
    # the next point: the whole schedule dealt to the survivor
    await pool.run_point(1, UsersLoad(users=3), StopConfig(duration_s=1), (1, 2), 3, lambda run: None)
    assert survivor.orders[-1].share == Share(0, 1) and survivor.orders[-1].warm == 3


async def test_each_point_is_dealt_by_index_over_the_live_workers() -> None:
    clock, out = RunClock.start(), _Out()
    handles = [_Scripted(i) for i in range(3)]
    pool = out.pool(handles, clock)
    await pool.set_up(lambda h, origin: Setup(Share(h.index, 3), origin, clock.origin_unix_s, TargetConfig()))
    load, stop = RateLoad(rate_per_s=10), StopConfig(max_requests=7)
    asked = clock.now()
    run, _, _ = await pool.run_point(4, load, stop, (7, 11), 10, lambda run: None)
    for j, h in enumerate(handles):
        prepare, start = h.orders
        assert prepare.share == start.share == Share(j, 3)
        assert (start.index, start.load, start.stop, start.seed, start.point_seed) == (4, load, stop, 7, 11)
        assert start.warm == 4  # ceil(10 / 3) connections each
        assert start.start_s == run.start_s >= asked + START_LEAD_S  # one start, a little ahead
