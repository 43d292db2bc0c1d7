"""The typed calls of a worker in another process, for the driver's end of a worker process
(process.ProcessWorker) or of a Ray actor (ray_actor.RayWorker). Each transport carries a call as
its method's name and arguments (pickled over a pipe, or a Ray actor call) to ``WorkerCore.call``,
which runs only ``WorkerCore.CALLS``; the pool calls these methods, never a name."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from tokenbench.workers.core import Batch, Order, Setup, WorkerInfo

ANSWER_TIMEOUT_S = 30.0  # a worker silent this long is lost
READY_TIMEOUT_S = 120.0  # a setup (tokenizer, requests) or a point's preparation (connections) may take longer
CLOSE_TIMEOUT_S = 5.0  # a polite close, before the transport is shut by force


class RemoteWorker(ABC):
    """A worker reached through a transport (``call``): ``WorkerLost`` when it died or stopped
    answering, ``RuntimeError`` with the worker's message when a call failed there."""

    index: int
    lost: str | None
    same_clock = False  # another process, perhaps another machine: an offset is measured

    @abstractmethod
    async def call(self, method: str, *args: Any, timeout_s: float | None = None) -> Any:
        """The transport: ``method`` (one of WorkerCore.CALLS) run in the worker with ``args``."""

    async def setup(self, setup: Setup, timeout_s: float = READY_TIMEOUT_S) -> WorkerInfo:
        info: WorkerInfo = await self.call("setup", setup, timeout_s=timeout_s)
        return info

    async def prepare(self, order: Order, timeout_s: float = READY_TIMEOUT_S) -> None:
        await self.call("prepare", order, timeout_s=timeout_s)

    async def start(self, order: Order, timeout_s: float = ANSWER_TIMEOUT_S) -> None:
        await self.call("start", order, timeout_s=timeout_s)

    async def poll(self, timeout_s: float = ANSWER_TIMEOUT_S) -> Batch:
        batch: Batch = await self.call("poll", timeout_s=timeout_s)
        return batch

    async def interrupt(self, timeout_s: float = ANSWER_TIMEOUT_S) -> None:
        await self.call("interrupt", timeout_s=timeout_s)

    async def clock(self, timeout_s: float = ANSWER_TIMEOUT_S) -> float:
        return float(await self.call("clock", timeout_s=timeout_s))
