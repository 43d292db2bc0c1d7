"""The one engine for a point: a worker's connections, client, requests and load generator, driven
by a few calls (``setup``, ``clock``, ``prepare``, ``start``, ``poll``, ``interrupt``, ``close``)
from the driver, whichever carries them: a direct call on the driver's own loop (``LocalWorker``:
a run without ``--workers`` or ``--ray``), a pipe to a local process, or a Ray actor's methods.

Tokenizer choice (``choose_tokenizer``), the client's set-up, the connections warmed before each
point, the client monitor and the records as they end all happen here, and only here."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tokenbench.clients import wire_for
from tokenbench.clients.stream import StreamingClient, make_session
from tokenbench.common import redact
from tokenbench.config import DatasetConfig, LoadPoint, ReplayLoad, SessionConfig, StopConfig
from tokenbench.config.target import ResolvedTarget
from tokenbench.datasets.programs.model import Program
from tokenbench.datasets.sessions import Conversation, estimate_tokens
from tokenbench.datasets.tokenizers import HFTokenizer, MessagesTokenCounter, RemoteTokenizer, Tokenizer
from tokenbench.datasets.trace_requests import TracePlan
from tokenbench.loadgen import LoadGenerator, Part, PointRun
from tokenbench.loadgen.programs import ProgramSource, program_source
from tokenbench.loadgen.schedule import Share
from tokenbench.loadgen.sessions import SessionSource
from tokenbench.loadgen.source import RequestSource, TraceSource
from tokenbench.loadgen.stats import LiveStats
from tokenbench.records import Request, RequestRecord, RunClock
from tokenbench.spans.keys import JoinKeys, run_key
from tokenbench.telemetry.client_monitor import ClientMonitor, Sample


def choose_tokenizer(path: str | None, target: ResolvedTarget) -> Tokenizer | None:
    """The run's tokenizer: ``--tokenizer``'s file, else the server's /tokenize when it has one, else
    on the Messages API its count_tokens route (None: none of them; prompts and histories are then
    estimated)."""
    if path:
        return HFTokenizer(path)
    remote = RemoteTokenizer.available(target.url, target.model)
    if remote is None and target.api == "messages":
        return MessagesTokenCounter.available(target.url, target.model)
    return remote


@dataclass(frozen=True)
class Setup:
    """What a worker needs for the whole run: where it is in the pool, its clock, the target, and
    the requests (or conversations) the driver built, so every worker draws from the same list.
    Pydantic models and dataclasses: they pickle across a process or to a Ray actor."""

    lane: Share  # its ids: lane.index, + lane.count, ... (apart from every other worker's)
    origin_monotonic_s: float  # the driver's run origin on this worker's clock (+ the offset)
    origin_unix_s: float
    target: ResolvedTarget
    keep_text: bool = False
    tokenizer: str | None = None  # --tokenizer: counts output tokens client-side
    requests: list[Request] | None = None
    unique_nonce: str | None = None
    trace: TracePlan | None = None  # --dataset trace: the worker opens the trace and builds its rows
    conversations: list[Conversation] | None = None  # --multi-turn
    sessions: SessionConfig | None = None
    max_model_len: int | None = None
    session_prefix: str = "s"
    programs: list[Program] | None = None  # --dataset programs: every worker runs from the same list
    dataset: DatasetConfig | None = None
    secrets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Order:
    """One point for one worker: the point, its share of the global schedule, when it starts."""

    index: int
    load: LoadPoint
    stop: StopConfig
    seed: int  # the run's seed (where the point's prompts start)
    point_seed: int  # the point's schedule seed
    share: Share
    start_s: float = 0.0  # run-clock time (the driver's axis), set by ``start``
    warm: int = 1  # connections to open before the point


@dataclass(frozen=True)
class WorkerInfo:
    """Where a worker runs (config.json's ``workers.clocks``)."""

    worker: int
    pid: int
    node: str


@dataclass
class Batch:
    """What a worker has to say since the last poll."""

    created: list[RequestRecord] = field(default_factory=list)  # still open: lost if the worker dies
    done: list[RequestRecord] = field(default_factory=list)
    client: list[Sample] = field(default_factory=list)  # the client monitor's samples
    in_flight: int = 0
    active_users: int = 0
    run: PointRun | None = None  # the point's part, once this worker finished it
    error: str | None = None  # the point failed in this worker (a bug): the driver loses it


@dataclass
class _Running:
    """A worker's state once set up: its clock, session, wire, requests and load generator."""

    lane: Share
    clock: RunClock
    target: ResolvedTarget
    session: aiohttp.ClientSession
    source: RequestSource | SessionSource | TraceSource | ProgramSource
    gen: LoadGenerator
    client: StreamingClient


class WorkerCore:
    """A worker's state between calls. Records are buffered until the next poll.

    ``local``: the core runs on the driver's own loop (LocalWorker), so its records are the
    driver's own (no ``worker`` stamped on them, no copies kept for a loss that cannot happen) and
    a failure is raised to the driver as it is, as any bug in the run's own process is."""

    def __init__(self, local: bool = False) -> None:
        self._local = local
        # a sink for each record as it ends (LocalWorker): written at once, not at the next poll
        self.deliver: Callable[[list[RequestRecord]], None] | None = None
        self._batch = Batch()
        self._task: asyncio.Future[PointRun] | None = None
        self._state: _Running | None = None

    # What a worker elsewhere may be asked by name (remote.RemoteWorker's methods, and close).
    CALLS = frozenset({"setup", "prepare", "start", "poll", "interrupt", "clock", "close"})

    async def call(self, method: str, args: tuple[Any, ...]) -> Any:
        """A call that came over a transport, by its name: only ``CALLS``."""
        if method not in self.CALLS:
            raise ValueError(f"a worker has no call {method!r} (it takes {', '.join(sorted(self.CALLS))})")
        result = getattr(self, method)(*args)
        return await result if asyncio.iscoroutine(result) else result

    @staticmethod
    def clock() -> float:
        return time.perf_counter()

    @property
    def _running(self) -> _Running:
        assert self._state is not None, "setup first"
        return self._state

    async def setup(self, setup: Setup) -> WorkerInfo:
        redact.register(*setup.secrets)
        clock = RunClock(setup.origin_monotonic_s, setup.origin_unix_s)
        target = setup.target
        session = make_session(target, clock.now)
        count = HFTokenizer(setup.tokenizer).count if setup.tokenizer else None
        keys = JoinKeys(run_key(setup.origin_unix_s))  # server spans: every request's traceparent
        client = StreamingClient(
            session, target, wire_for(target.api), clock.now, count, keep_text=setup.keep_text, keys=keys
        )
        worker = None if self._local else setup.lane.index
        gen = LoadGenerator(client, clock, self._done, LiveStats(), worker, notices=not self._local)
        self._state = _Running(setup.lane, clock, target, session, _source(setup), gen, client)
        return WorkerInfo(setup.lane.index, os.getpid(), platform.node())

    async def prepare(self, order: Order) -> None:
        """Before the point: this worker's place in the prompts, and its connections open."""
        state = self._running
        state.source.start_point(order.load, order.seed, order.share)
        if isinstance(state.source, TraceSource) and isinstance(order.load, ReplayLoad):
            state.source.ready(order.load, order.point_seed, order.stop, order.share)  # its first rows built
            await state.source.primed()  # the point starts once its first row can go
        if isinstance(state.source, ProgramSource):
            state.source.prime()  # the first sessions' prompts drawn before the clock matters
        await state.client.warm(order.warm)

    def start(self, order: Order) -> None:
        """Run the point (its share, from ``order.start_s``) in the background; polls report it."""
        self._task = asyncio.ensure_future(self._run(order, self._running))

    async def _run(self, order: Order, state: _Running) -> PointRun:
        gen = state.gen
        monitor = ClientMonitor(state.clock.now, lambda: gen.stats.in_flight, self._sample, state.lane.index)
        async with monitor.running():
            part = Part(order.share, order.start_s)
            return await gen.run_point(order.index, order.load, order.stop, state.source, order.point_seed, part=part)

    def _done(self, record: RequestRecord) -> None:
        if self.deliver is not None:
            self.deliver([record])
        else:
            self._batch.done.append(record)

    def _sample(self, sample: Sample) -> None:
        self._batch.client.append(sample)

    def poll(self) -> Batch:
        """Everything since the last poll; ``run`` is set once the point is over."""
        batch, self._batch = self._batch, Batch()
        if self._state is not None:
            gen = self._state.gen
            batch.created = gen.open.take_notices()
            batch.in_flight, batch.active_users = gen.stats.in_flight, gen.stats.active_users
        if self._task is not None and self._task.done():
            task, self._task = self._task, None
            exc = task.exception()
            if exc is not None and self._local:
                raise exc
            if exc is not None:
                batch.error = "".join(traceback.format_exception(exc))
            else:
                batch.run = task.result()
        return batch

    def interrupt(self) -> None:
        if self._state is not None:
            self._state.gen.interrupt()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self._state is not None:
            self._state.client.close()
            await self._state.session.close()


def _source(setup: Setup) -> RequestSource | SessionSource | TraceSource | ProgramSource:
    """The worker's own copy of where requests come from (the driver's list, its own ids; a
    trace: opened here, its rows built as the replay goes)."""
    if setup.trace is not None:
        return TraceSource(setup.trace, choose_tokenizer(setup.tokenizer, setup.target), lane=setup.lane)
    if setup.programs is not None:
        assert setup.dataset is not None
        tokenizer = choose_tokenizer(setup.tokenizer, setup.target)
        counter: Callable[[str], int] = tokenizer.count if tokenizer is not None else estimate_tokens
        return program_source(setup.programs, setup.dataset, tokenizer, counter, setup.session_prefix, setup.lane)
    if setup.conversations is None:
        assert setup.requests is not None
        return RequestSource(setup.requests, unique_nonce=setup.unique_nonce, lane=setup.lane)
    assert setup.sessions is not None
    tokenizer = choose_tokenizer(setup.tokenizer, setup.target)
    count: Callable[[str], int] = tokenizer.count if tokenizer is not None else estimate_tokens
    return SessionSource(
        setup.conversations,
        count,
        setup.sessions,
        setup.max_model_len,
        id_prefix=setup.session_prefix,
        lane=setup.lane,
    )


class LocalWorker:
    """The one worker of a run without ``--workers`` or ``--ray``: its core on the driver's own
    loop and clock, called directly (no pipe, no pickling, the records themselves, each handed to
    the driver as it ends: on disk at once, so a crash loses at most the requests in flight)."""

    same_clock = True  # no offset to measure

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.lost: str | None = None  # never set: a failure here raises in the driver
        self.core = WorkerCore(local=True)

    @property
    def describe(self) -> str:
        return "the run's own process"

    # The pool's calls, made on the core directly (timeouts are for workers elsewhere).
    async def setup(self, setup: Setup, timeout_s: float | None = None) -> WorkerInfo:
        return await self.core.setup(setup)

    async def prepare(self, order: Order, timeout_s: float | None = None) -> None:
        await self.core.prepare(order)

    async def start(self, order: Order, timeout_s: float | None = None) -> None:
        self.core.start(order)

    async def poll(self, timeout_s: float | None = None) -> Batch:
        return self.core.poll()

    async def interrupt(self, timeout_s: float | None = None) -> None:
        self.core.interrupt()

    async def clock(self, timeout_s: float | None = None) -> float:
        return self.core.clock()

    def deliver_to(self, sink: Callable[[list[RequestRecord]], None]) -> None:
        """Each record to ``sink`` as it ends, rather than in the next poll's batch."""
        self.core.deliver = sink

    async def stop(self) -> None:
        await self.core.close()
