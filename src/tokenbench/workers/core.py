"""One worker: its own event loop's connections, client and load generator, driven by a few calls
(``setup``, ``clock``, ``prepare``, ``start``, ``poll``, ``interrupt``, ``close``) from the driver,
whichever carries them (a pipe to a local process, or a Ray actor's methods)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import TypeAdapter

from .. import redact
from ..clients import wire_for
from ..clients.stream import StreamingClient, make_session, warm_connections
from ..config import LoadPoint, SessionConfig, StopConfig, TargetConfig
from ..datasets.sessions import Conversation, estimate_tokens
from ..datasets.tokenizers import HFTokenizer, RemoteTokenizer
from ..live import LiveStats
from ..load import Share
from ..loadgen import LoadGenerator, Part, PointRun
from ..records import Request, RequestRecord, RunClock
from ..request_source import RequestSource
from ..session_load import SessionSource
from ..telemetry.client_monitor import ClientMonitor

_LOAD: TypeAdapter[LoadPoint] = TypeAdapter(LoadPoint)


@dataclass(frozen=True)
class Setup:
    """What a worker needs for the whole run: where it is in the pool, its clock, the target, and
    the requests (or conversations) the driver built, so every worker draws from the same list."""

    lane: Share  # its ids: lane.index, + lane.count, ... (apart from every other worker's)
    origin_monotonic_s: float  # the driver's run origin on this worker's clock (+ the offset)
    origin_unix_s: float
    target: dict[str, Any]  # TargetConfig, resolved (url, model, api)
    keep_text: bool = False
    tokenizer: str | None = None  # --tokenizer: counts output tokens client-side
    requests: list[Request] | None = None
    unique_nonce: str | None = None
    conversations: list[Conversation] | None = None  # --multi-turn
    sessions: dict[str, Any] | None = None  # SessionConfig
    max_model_len: int | None = None
    session_prefix: str = "s"
    secrets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Order:
    """One point for one worker: the point, its share of the global schedule, when it starts."""

    index: int
    load: dict[str, Any]
    stop: dict[str, Any]
    seed: int  # the run's seed (where the point's prompts start)
    point_seed: int  # the point's schedule seed
    share: Share
    start_s: float = 0.0  # run-clock time (the driver's axis), set by ``start``
    warm: int = 1  # connections to open before the point


@dataclass
class Batch:
    """What a worker has to say since the last poll."""

    created: list[RequestRecord] = field(default_factory=list)  # still open: lost if the worker dies
    done: list[RequestRecord] = field(default_factory=list)
    client: list[dict[str, Any]] = field(default_factory=list)  # the client monitor's samples
    in_flight: int = 0
    active_users: int = 0
    run: PointRun | None = None  # the point's part, once this worker finished it
    error: str | None = None  # the point failed in this worker (a bug): the driver loses it


class WorkerCore:
    """A worker's state between calls. Records are buffered until the next poll."""

    def __init__(self) -> None:
        self._batch = Batch()
        self._created: dict[int, RequestRecord] = {}
        self._task: asyncio.Future[PointRun] | None = None
        self._gen: LoadGenerator | None = None

    async def call(self, method: str, args: tuple[Any, ...]) -> Any:
        result = getattr(self, method)(*args)
        return await result if asyncio.iscoroutine(result) else result

    @staticmethod
    def clock() -> float:
        return time.perf_counter()

    async def setup(self, setup: Setup) -> dict[str, Any]:
        redact.register(*setup.secrets)
        self.lane = setup.lane
        self.clock_ = RunClock(setup.origin_monotonic_s, setup.origin_unix_s)
        target = TargetConfig.model_validate(setup.target)
        self.session = make_session(target, self.clock_.now)
        assert target.api is not None, "the driver resolves the API"
        self.target, self.wire = target, wire_for(target.api)
        count = HFTokenizer(setup.tokenizer).count if setup.tokenizer else None
        client = StreamingClient(
            self.session, target, self.wire, self.clock_.now, count_tokens=count, keep_text=setup.keep_text
        )
        self.source = _source(setup, target)
        self.stats = LiveStats()
        self._gen = LoadGenerator(client, self.clock_, self._finished, self.stats, created=self._new)
        return {"worker": setup.lane.index, "pid": os.getpid(), "node": platform.node()}

    def _new(self, record: RequestRecord) -> None:
        record.worker = self.lane.index
        self._created[record.id] = replace(record)

    def _finished(self, record: RequestRecord) -> None:
        self._created.pop(record.id, None)  # reported done: no notice needed
        self._batch.done.append(record)

    async def prepare(self, order: Order) -> None:
        """Before the point: this worker's place in the prompts, and its connections open."""
        self.source.start_point(_LOAD.validate_python(order.load), order.seed, order.share)
        await warm_connections(self.session, self.target, self.wire, order.warm)

    def start(self, order: Order) -> None:
        """Run the point (its share, from ``order.start_s``) in the background; polls report it."""
        assert self._gen is not None, "setup first"
        self._task = asyncio.ensure_future(self._run(order, self._gen))

    async def _run(self, order: Order, gen: LoadGenerator) -> PointRun:
        load, stop = _LOAD.validate_python(order.load), StopConfig.model_validate(order.stop)
        monitor = ClientMonitor(self.clock_.now, lambda: gen.stats.in_flight, self._batch_sample, self.lane.index)
        async with monitor.running():
            part = Part(order.share, order.start_s)
            return await gen.run_point(order.index, load, stop, self.source, order.point_seed, part=part)

    def _batch_sample(self, sample: dict[str, Any]) -> None:
        self._batch.client.append(sample)

    def poll(self) -> Batch:
        """Everything since the last poll; ``run`` is set once the point is over."""
        batch, self._batch = self._batch, Batch()
        batch.created, self._created = list(self._created.values()), {}
        if self._gen is not None:
            batch.in_flight, batch.active_users = self._gen.stats.in_flight, self._gen.stats.active_users
        if self._task is not None and self._task.done():
            task, self._task = self._task, None
            if task.exception() is not None:
                exc = task.exception()
                batch.error = "".join(traceback.format_exception(exc)) if exc else None
            else:
                batch.run = task.result()
        return batch

    def interrupt(self) -> None:
        if self._gen is not None:
            self._gen.interrupt()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self._gen is not None:
            await self.session.close()


def _source(setup: Setup, target: TargetConfig) -> RequestSource | SessionSource:
    if setup.conversations is None:
        assert setup.requests is not None
        return RequestSource(setup.requests, unique_nonce=setup.unique_nonce, lane=setup.lane)
    if setup.tokenizer:
        count = HFTokenizer(setup.tokenizer).count
    else:
        assert target.url is not None
        remote = RemoteTokenizer.available(target.url, target.model)
        count = remote.count if remote is not None else estimate_tokens
    settings = SessionConfig.model_validate(setup.sessions)
    prefix = setup.session_prefix
    return SessionSource(setup.conversations, count, settings, setup.max_model_len, id_prefix=prefix, lane=setup.lane)
