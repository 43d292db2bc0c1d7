"""The driver's side of the workers: start them, set their clocks, deal each point to them, gather
their records, and notice the ones that die (see the package's docstring for the rules)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tokenbench.config import LoadPoint, StopConfig, WorkersConfig
from tokenbench.loadgen import OpenRecords, PointRun, new_run, stopped_window
from tokenbench.loadgen.programs import ProgramTally
from tokenbench.loadgen.schedule import Share
from tokenbench.loadgen.sessions import SessionTally
from tokenbench.loadgen.stats import LiveStats
from tokenbench.records import Outcome, RequestRecord, RunClock
from tokenbench.results.client import WorkerLoss
from tokenbench.telemetry.client_monitor import Sample
from tokenbench.workers import WorkerLost
from tokenbench.workers.clock import Offset, measure
from tokenbench.workers.core import Batch, LocalWorker, Order, Setup, WorkerInfo

POLL_S = 0.1  # how often each worker is asked for its records
START_LEAD_S = 0.25  # a point starts this far ahead of its order, so every worker starts it together
SAME_CLOCK = Offset(0.0, 0.0)  # a worker on the driver's own loop reads the driver's clock


class Handle(Protocol):
    """The driver's end of one worker, by typed calls: its core called directly (core.LocalWorker),
    over a pipe (process.ProcessWorker) or as a Ray actor (ray_actor.RayWorker), both through
    remote.RemoteWorker (a worker elsewhere that is silent for ANSWER_TIMEOUT_S is lost)."""

    index: int
    lost: str | None
    same_clock: bool  # on the driver's own clock: no offset to measure, no lead to start together

    @property
    def describe(self) -> str: ...

    async def setup(self, setup: Setup) -> WorkerInfo: ...

    async def prepare(self, order: Order) -> None: ...

    async def start(self, order: Order) -> None: ...

    async def poll(self) -> Batch: ...

    async def interrupt(self) -> None: ...

    async def clock(self) -> float: ...

    async def stop(self) -> None: ...


class AllWorkersLost(RuntimeError):
    """Every worker died: the run stops (what was measured is on disk)."""


@dataclass
class _Point:
    """One point as the pool runs it: the records still open, the parts back, the losses."""

    parts: list[PointRun] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    losses: list[WorkerLoss] = field(default_factory=list)
    in_flight: dict[int, int] = field(default_factory=dict)  # the live view's, by worker
    users: dict[int, int] = field(default_factory=dict)


class WorkerPool:
    """Runs each point over the live workers: the runner's one way to run a point, whether the
    pool is one worker on the driver's loop or N processes or Ray actors."""

    def __init__(
        self,
        handles: Sequence[Handle],
        clock: RunClock,
        sink: Callable[[list[RequestRecord]], None],
        event: Callable[[Sample], None],
        say: Callable[[str], None],
        stats: LiveStats,
    ) -> None:
        self.handles = list(handles)
        self._clock, self._sink, self.stats, self._event, self._say = clock, sink, stats, event, say
        self._open = OpenRecords()  # the workers' requests in flight, as they told us (worker_lost)
        self._interrupted = False
        self.offsets: dict[int, Offset] = {}
        self.end_offsets: dict[int, Offset] = {}
        self.infos: dict[int, WorkerInfo] = {}

    @property
    def interrupted(self) -> bool:
        return self._interrupted

    def alive(self) -> list[Handle]:
        return [h for h in self.handles if h.lost is None]

    def interrupt(self) -> None:
        """Stop now: every worker cancels its requests in flight (they come back as records)."""
        self._interrupted = True
        for h in self.alive():
            asyncio.ensure_future(_quietly(h.interrupt()))

    async def set_up(self, setup: Callable[[Handle, float], Setup]) -> None:
        """Each worker's clock offset, then its setup with the driver's origin on its clock."""
        for h in self.handles:
            if isinstance(h, LocalWorker):  # on this loop: its records straight to the sink
                h.deliver_to(self._done)
            offset = SAME_CLOCK if h.same_clock else await measure(functools.partial(_read_clock, h))
            self.offsets[h.index] = offset
            origin = self._clock.origin_monotonic_s + offset.offset_s
            self.infos[h.index] = await h.setup(setup(h, origin))

    async def check_clocks(self) -> None:
        """The offsets again at the end: their drift over the run is in results."""
        for h in self.alive():
            if h.same_clock:
                self.end_offsets[h.index] = SAME_CLOCK
                continue
            with contextlib.suppress(WorkerLost):
                self.end_offsets[h.index] = await measure(functools.partial(_read_clock, h))

    async def run_point(
        self,
        index: int,
        load: LoadPoint,
        stop: StopConfig,
        seeds: tuple[int, int],
        warm: int,
        started: Callable[[PointRun], None],
    ) -> tuple[PointRun, list[Sample], list[WorkerLoss]]:
        """One point over the live workers (``seeds``: the run's and the point's; ``warm``:
        connections to open, shared out): its merged span, the client samples, the losses."""
        alive = self.alive()
        if not alive:
            raise AllWorkersLost("no worker left")
        point, n = _Point(), len(alive)
        orders = {
            h.index: Order(
                index,
                load,
                stop,
                seeds[0],
                seeds[1],
                Share(j, n),
                warm=max(1, -(-warm // n)),
            )
            for j, h in enumerate(alive)
        }
        await asyncio.gather(*(self._guard(h, point, h.prepare(orders[h.index])) for h in alive))
        # workers elsewhere start a little ahead, together; one on this loop starts now
        start = self._clock.now() + (0.0 if all(h.same_clock for h in alive) else START_LEAD_S)
        run = new_run(index, load, stop, start)
        started(run)
        self.stats.point, self.stats.started_s, self.stats.planned_s = index, start, stop.duration_s
        alive = self.alive()
        await asyncio.gather(*(self._follow(h, point, _at(orders[h.index], start)) for h in alive))
        return _merge(run, point.parts, self._clock.now(), self._interrupted), point.samples, point.losses

    async def _guard(self, h: Handle, point: _Point, call: Awaitable[Any]) -> None:
        try:
            await call
        except WorkerLost as e:
            self._lose(h, point, str(e))

    async def _follow(self, h: Handle, point: _Point, order: Order) -> None:
        """Start the worker's part and poll it until it is done (or the worker is lost)."""
        try:
            await h.start(order)
            if self._interrupted:
                await h.interrupt()
            while True:
                batch = await h.poll()
                self._take(h, point, batch)
                if batch.error is not None:
                    raise WorkerLost(f"{h.describe} failed: {batch.error.strip().splitlines()[-1]}")
                if batch.run is not None:
                    point.parts.append(batch.run)
                    return
                await asyncio.sleep(POLL_S)
        except WorkerLost as e:
            self._lose(h, point, str(e))

    def _take(self, h: Handle, point: _Point, batch: Batch) -> None:
        for record in batch.created:
            self._open.add(record)
        if batch.done:
            self._done(batch.done)
        for sample in batch.client:
            self._event(sample)
        point.samples += batch.client
        point.in_flight[h.index] = batch.in_flight
        point.users[h.index] = batch.active_users
        self.stats.in_flight = sum(point.in_flight.values())
        self.stats.active_users = sum(point.users.values())

    def _done(self, records: list[RequestRecord]) -> None:
        """Records that ended: out of the book of open ones, counted, written."""
        for record in records:
            self._open.close(record)
            self.stats.record_done(record)
        self._sink(records)

    def _lose(self, h: Handle, point: _Point, reason: str) -> None:
        """``h`` is gone: its requests in flight become ``worker_lost`` records; the point says so."""
        h.lost = h.lost or reason
        now = self._clock.now()
        lost = self._open.left(h.index)
        for record in lost:
            self._open.close(record)
            record.outcome, record.closed_s = Outcome.WORKER_LOST, now
            record.error = f"lost with its worker: {reason}"
            self.stats.record_done(record)
        if lost:
            self._sink(lost)
        point.in_flight.pop(h.index, None)
        point.users.pop(h.index, None)
        point.losses.append(WorkerLoss(worker=h.index, at_s=now, reason=reason, in_flight=len(lost)))
        left = len(self.alive())
        self._say(
            f"[red]{reason}[/]: its {len(lost)} requests in flight are worker_lost records; "
            + (f"the run goes on with {left} worker(s)" if left else "no worker is left: the run stops")
        )

    async def close(self) -> None:
        await asyncio.gather(*(_quietly(h.stop()) for h in self.handles))


async def _read_clock(h: Handle) -> float:
    return await h.clock()


def _at(order: Order, start_s: float) -> Order:
    return dataclasses.replace(order, start_s=start_s)


async def _quietly(call: Awaitable[Any]) -> None:
    with contextlib.suppress(WorkerLost, RuntimeError, ConnectionError):
        await call


def _merge(run: PointRun, parts: list[PointRun], now: float, interrupted: bool) -> PointRun:
    """The point's span from its workers' parts: it lasts until the last of them ended."""
    run.load_end_s = max((p.load_end_s for p in parts), default=min(now, run.start_s))
    run.end_s = max([p.end_s for p in parts] + [run.load_end_s])
    run.user_spans = sorted(span for p in parts for span in p.user_spans)
    run.interrupted = interrupted or any(p.interrupted for p in parts)
    run.num_records = sum(p.num_records for p in parts)
    arrivals = [p.last_arrival_s for p in parts if p.last_arrival_s is not None]
    run.last_arrival_s = max(arrivals) if arrivals else None
    trips = sorted((p.stopped_early for p in parts if p.stopped_early is not None), key=lambda t: t.at_s)
    run.stopped_early = trips[0] if trips else None  # the first worker whose breaker tripped
    # autostop: each worker judged its own share: the point's window starts at the latest steady
    # start; the first worker that stopped by its figures says why (its precision: its share's)
    run.window_start_s = max([run.window_start_s, *(p.window_start_s for p in parts)])
    halts = sorted((p.auto_stop for p in parts if p.auto_stop is not None), key=lambda h: h.at_s)
    run.auto_stop = halts[0] if halts else None
    facts = [p.stopping for p in parts if p.stopping is not None]
    run.stopping = min(facts, key=lambda f: f.at_s) if facts else None
    stopped_window(run)
    traces = [p.trace for p in parts if p.trace is not None]
    if traces:  # each worker saw the global schedule up to where it stopped: the furthest has it all
        run.trace = max(traces, key=lambda t: t.issued)
    tallies = [p.sessions for p in parts if p.sessions is not None]
    if tallies:
        run.sessions = SessionTally(
            *(sum(getattr(t, f.name) for t in tallies) for f in dataclasses.fields(SessionTally))
        )
    programs = [p.programs for p in parts if p.programs is not None]
    if programs:
        run.programs = ProgramTally(
            *(sum(getattr(t, f.name) for t in programs) for f in dataclasses.fields(ProgramTally))
        )
    return run


async def start_workers(config: WorkersConfig, run_dir: Path) -> list[Handle]:
    """``config.count`` workers: local processes, or Ray actors; without either, the one worker on
    the driver's own loop."""
    if not config.distributed:
        return [LocalWorker()]
    if config.on_ray:
        from tokenbench.workers.ray_actor import RayWorker

        return [RayWorker(i, config.cpus_per_worker) for i in range(config.count)]
    from tokenbench.workers.process import ProcessWorker

    return list(
        await asyncio.gather(*(ProcessWorker.spawn(i, run_dir / f"worker-{i}.log") for i in range(config.count)))
    )


@contextlib.asynccontextmanager
async def ray_session(config: WorkersConfig) -> AsyncIterator[None]:
    """Ray attached (or started locally) for the run when it uses Ray; shut down if started here."""
    if not config.on_ray:
        yield
        return
    from tokenbench.workers.ray_actor import start_ray, stop_ray

    started = start_ray(config.ray_address, config.count, config.cpus_per_worker)
    try:
        yield
    finally:
        if started:
            stop_ray()
