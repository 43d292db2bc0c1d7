"""One worker's engine (workers.core) against the in-process mock: a point run through its calls,
every request one record, and the two ways it runs: on the driver's own loop (LocalWorker: the
records are the driver's own, a failure raises) or for a driver elsewhere (its worker stamped on
each record, a notice of each new one, a failure reported)."""

from __future__ import annotations

import asyncio

import pytest

from tokenbench.config import RateLoad, StopConfig, UsersLoad
from tokenbench.config.target import ResolvedTarget
from tokenbench.datasets.tokenizers import RemoteTokenizer
from tokenbench.loadgen import LoadGenerator, PointRun
from tokenbench.loadgen.schedule import Share
from tokenbench.records import Request, RequestRecord, RunClock
from tokenbench.workers.core import Batch, LocalWorker, Order, Setup, WorkerCore, WorkerInfo, choose_tokenizer


def _setup(url: str, lane: Share = Share()) -> Setup:
    clock = RunClock.start()
    target = ResolvedTarget(url=url, model="mock-model", api="chat", continuous_usage=False)
    requests = [Request(prompt=f"p{i}", max_tokens=4) for i in range(5)]
    return Setup(lane, clock.origin_monotonic_s, clock.origin_unix_s, target, requests=requests)


async def _point(core: WorkerCore, order: Order) -> tuple[PointRun, list[Batch]]:
    """``order`` run through the core's calls as a driver makes them: prepare, start, poll."""
    await core.prepare(order)
    core.start(order)
    batches = []
    while True:
        await asyncio.sleep(0.02)
        batches.append(core.poll())
        if batches[-1].run is not None:
            return batches[-1].run, batches


async def test_a_local_core_runs_a_point_and_each_request_is_one_record_of_the_drivers_own(mock_server) -> None:
    url = mock_server(ttft_ms=5, itl_ms=1)
    worker = LocalWorker()
    assert worker.same_clock and worker.lost is None
    info = await worker.setup(_setup(url))
    assert isinstance(info, WorkerInfo) and info.worker == 0
    try:
        order = Order(0, UsersLoad(users=2), StopConfig(max_requests=6), seed=1, point_seed=1, share=Share(), warm=2)
        run, batches = await _point(worker.core, order)
    finally:
        await worker.stop()
    done = [r for b in batches for r in b.done]
    assert run.num_records == 6 and len(done) == 6
    assert sorted(r.id for r in done) == list(range(6))
    assert all(r.ok and r.worker is None for r in done)  # a one-process run's records name no worker
    assert all(b.created == [] for b in batches)  # it cannot be lost: no notices kept
    samples = [s for b in batches for s in b.client]
    assert samples and {s["worker"] for s in samples} == {0}


async def test_a_remote_core_stamps_its_worker_and_notices_each_record_as_created(mock_server) -> None:
    url = mock_server(ttft_ms=300, itl_ms=1)
    core = WorkerCore()
    await core.setup(_setup(url, Share(1, 2)))
    try:
        order = Order(0, UsersLoad(users=2), StopConfig(max_requests=2), seed=1, point_seed=1, share=Share(1, 2))
        await core.prepare(order)
        core.start(order)
        await asyncio.sleep(0.1)  # its one user's request is in flight
        noticed = core.poll().created
        assert [(r.id, r.worker, r.user, r.sent_s) for r in noticed] == [(1, 1, 1, None)]  # as created
        assert core.poll().created == []  # each notice once
        run, batches = await _point_rest(core)
    finally:
        await core.close()
    done = [r for b in batches for r in b.done]
    assert [(r.id, r.worker) for r in done] == [(1, 1)] and run.num_records == 1
    assert done[0] is not noticed[0] and done[0].sent_s is not None  # the notice is a copy


async def _point_rest(core: WorkerCore) -> tuple[PointRun, list[Batch]]:
    batches = []
    while True:
        await asyncio.sleep(0.05)
        batches.append(core.poll())
        if batches[-1].run is not None:
            return batches[-1].run, batches


async def test_a_failure_raises_on_the_drivers_loop_and_is_reported_from_elsewhere(mock_server, monkeypatch) -> None:
    """A bug inside the point: the run's own process raises it as it is; a worker elsewhere
    reports it, for the driver to lose that worker."""

    async def broken(*args: object, **kwargs: object) -> PointRun:
        raise RuntimeError("a bug in the load generator")

    monkeypatch.setattr(LoadGenerator, "run_point", broken)
    url = mock_server()
    order = Order(0, UsersLoad(users=1), StopConfig(max_requests=2), seed=1, point_seed=1, share=Share())
    local = LocalWorker()
    await local.setup(_setup(url))
    try:
        with pytest.raises(RuntimeError, match="a bug in the load generator"):
            await _point(local.core, order)
    finally:
        await local.stop()
    remote = WorkerCore()
    await remote.setup(_setup(url))
    try:
        await remote.prepare(order)
        remote.start(order)
        await asyncio.sleep(0.05)
        batch = remote.poll()
    finally:
        await remote.close()
    assert batch.run is None and batch.error is not None
    assert "RuntimeError: a bug in the load generator" in batch.error


async def test_the_schedule_seed_and_the_share_come_from_the_order(mock_server) -> None:
    """Two cores with the halves of one open-loop point: every id once, each its own parity."""
    url = mock_server(ttft_ms=2, itl_ms=1)
    records: list[RequestRecord] = []
    cores = [WorkerCore() for _ in range(2)]
    for w, core in enumerate(cores):
        await core.setup(_setup(url, Share(w, 2)))
    try:
        load, stop = RateLoad(rate_per_s=100), StopConfig(max_requests=8)
        runs = await asyncio.gather(
            *(_point(core, Order(0, load, stop, 1, 1, Share(w, 2))) for w, core in enumerate(cores))
        )
    finally:
        for core in cores:
            await core.close()
    for w, (run, batches) in enumerate(runs):
        mine = [r for b in batches for r in b.done]
        records += mine
        assert run.num_records == 4 and {r.id % 2 for r in mine} == {w} and {r.worker for r in mine} == {w}
    assert sorted(r.id for r in records) == list(range(8))


def test_the_tokenizer_is_the_file_given_else_the_servers_own(mock_server):
    url = mock_server()
    target = ResolvedTarget(url=url, model="mock-model", api="chat", continuous_usage=False)
    tokenizer = choose_tokenizer(None, target)
    assert isinstance(tokenizer, RemoteTokenizer)
    assert tokenizer.count("one two three") > 0
