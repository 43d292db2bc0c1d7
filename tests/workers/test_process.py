"""A worker in a local process (workers.process): the typed setup and orders cross its pipe, a
point runs there against the mock with each record stamped with its worker, and a worker killed
is named lost with the reason. (Killing one mid-run from the CLI: test_worker_faults.py.)"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from tokenbench.config import StopConfig, UsersLoad
from tokenbench.config.target import ResolvedTarget
from tokenbench.loadgen.schedule import Share
from tokenbench.records import Request, RequestRecord, RunClock
from tokenbench.workers import WorkerLost
from tokenbench.workers.core import Batch, Order, Setup, WorkerInfo
from tokenbench.workers.process import ProcessWorker


async def test_a_worker_process_runs_its_share_of_a_point(mock_server, tmp_path) -> None:
    url = mock_server(ttft_ms=5, itl_ms=1)
    clock = RunClock.start()
    worker = await ProcessWorker.spawn(1, tmp_path / "worker-1.log")
    assert not worker.same_clock
    try:
        target = ResolvedTarget(url=url, model="mock-model", api="chat", continuous_usage=False)
        requests = [Request(prompt=f"p{i}", max_tokens=4) for i in range(3)]
        setup = Setup(Share(1, 2), clock.origin_monotonic_s, clock.origin_unix_s, target, requests=requests)
        info = await worker.setup(setup, timeout_s=60)
        assert isinstance(info, WorkerInfo) and (info.worker, info.pid) == (1, worker.proc.pid)
        # one Linux monotonic clock: the worker's reading lies between two of ours
        before, theirs = time.perf_counter(), await worker.clock(timeout_s=10)
        assert before <= theirs <= time.perf_counter()
        order = Order(0, UsersLoad(users=4), StopConfig(max_requests=4), 1, 1, Share(1, 2), start_s=clock.now())
        await worker.prepare(order, timeout_s=30)
        await worker.start(order, timeout_s=10)
        done: list[RequestRecord] = []
        while True:
            batch: Batch = await worker.poll(timeout_s=10)
            done += batch.done
            if batch.run is not None:
                break
            await asyncio.sleep(0.05)
    finally:
        await worker.stop()
    assert batch.run.num_records == 2 and len(done) == 2  # its half of max_requests
    assert {r.id % 2 for r in done} == {1} and {r.worker for r in done} == {1} and all(r.ok for r in done)
    assert {r.user for r in done} <= {1, 3}  # users 1 and 3 are its share


async def test_a_killed_worker_process_is_lost_with_its_reason(tmp_path) -> None:
    worker = await ProcessWorker.spawn(0, tmp_path / "worker-0.log")
    try:
        assert isinstance(await worker.clock(timeout_s=30), float)
        # a call the worker does not take is answered, not fatal (the transport carries names)
        with pytest.raises(RuntimeError, match="a worker has no call 'no_such_call'"):
            await worker.call("no_such_call", timeout_s=10)
        os.kill(worker.proc.pid, signal.SIGKILL)
        with pytest.raises(WorkerLost, match="SIGKILL"):
            await worker.clock(timeout_s=10)
        assert worker.lost is not None and "killed by signal SIGKILL" in worker.lost
    finally:
        await worker.stop()


def test_a_call_into_a_dead_workers_pipe_is_a_lost_worker_not_a_crash(tmp_path):
    """Under uvloop (as a run is) a write into the pipe of a worker already dead raises
    RuntimeError ("the handler is closed"), not BrokenPipeError: the worker is lost all the same
    (it crashed a run whose workers were all killed, when a poll beat the reader to it)."""
    uvloop = pytest.importorskip("uvloop")
    uvloop.run(_dead_pipe(tmp_path))


async def _dead_pipe(tmp_path) -> None:
    worker = await ProcessWorker.spawn(0, tmp_path / "worker-0.log")
    try:
        assert isinstance(await worker.clock(timeout_s=30), float)
        os.kill(worker.proc.pid, signal.SIGKILL)
        await worker.proc.wait()
        await asyncio.sleep(0.1)  # its pipe is closed now
        worker.lost = None  # as if its reader had not seen it die yet: the call writes into the pipe
        with pytest.raises(WorkerLost, match="SIGKILL"):
            await worker.clock(timeout_s=10)
    finally:
        await worker.stop()
