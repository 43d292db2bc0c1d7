"""A worker in a local process (``--workers N``): ``python -m tokenbench.workers.process``, driven
over its stdin and stdout with length-prefixed pickled calls ``(id, method, args)`` and answers
``(id, ok, value)``. Its stderr goes to ``worker-<i>.log`` in the run directory.

The process ignores SIGINT (a Ctrl-C in the terminal reaches the whole process group): the driver
decides, and tells it to stop through ``interrupt``, so its requests in flight become records. It
exits when its stdin closes, so a driver that dies leaves no worker behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import pickle
import signal
import struct
import sys
from pathlib import Path
from typing import IO, Any

from tokenbench.workers import WorkerLost
from tokenbench.workers.core import WorkerCore
from tokenbench.workers.remote import CLOSE_TIMEOUT_S, RemoteWorker

_HEADER = struct.Struct("!I")


class ProcessWorker(RemoteWorker):
    """The driver's end of one worker process."""

    def __init__(self, index: int, proc: asyncio.subprocess.Process, log: IO[bytes]) -> None:
        self.index = index
        self.proc = proc
        self._log = log
        self._ids = itertools.count()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._reader = asyncio.ensure_future(self._read())
        self.lost: str | None = None
        self._stopping = False  # an exit after ``stop`` is no loss

    @property
    def describe(self) -> str:
        return f"worker {self.index} (pid {self.proc.pid})"

    @classmethod
    async def spawn(cls, index: int, log_path: Path) -> ProcessWorker:
        log = log_path.open("ab")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tokenbench.workers.process",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
        )
        return cls(index, proc, log)

    async def call(self, method: str, *args: Any, timeout_s: float | None = None) -> Any:
        if self.lost is not None:
            raise WorkerLost(f"{self.describe} was lost: {self.lost}")
        assert self.proc.stdin is not None
        call_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = future
        body = pickle.dumps((call_id, method, args), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            try:
                self.proc.stdin.write(_HEADER.pack(len(body)) + body)
                await self.proc.stdin.drain()
            # its pipe closed before the reader saw it die: a broken pipe, or (uvloop) "the handler
            # is closed"; a RuntimeError from the answer is the worker's own, and is not caught here
            except (ConnectionError, RuntimeError) as e:
                raise WorkerLost(f"{self.describe}: {await self._exit_reason(e)}") from None
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            raise WorkerLost(f"{self.describe} did not answer {method} within {timeout_s:g} s") from None
        finally:
            self._pending.pop(call_id, None)

    async def _read(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        try:
            while True:
                (size,) = _HEADER.unpack(await stdout.readexactly(_HEADER.size))
                call_id, ok, value = pickle.loads(await stdout.readexactly(size))
                future = self._pending.get(call_id)
                if future is not None and not future.done():
                    future.set_result(value) if ok else future.set_exception(RuntimeError(value))
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            reason = await self._exit_reason(e)
            if not self._stopping:
                self.lost = self.lost or reason
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(WorkerLost(f"{self.describe}: {reason}"))

    async def _exit_reason(self, error: BaseException) -> str:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.proc.wait(), 2.0)
        code = self.proc.returncode
        if code is None:
            return f"its pipe broke ({error!r})"
        if code < 0:
            return f"killed by signal {signal.Signals(-code).name}"
        return f"exited with code {code}"

    async def stop(self) -> None:
        """Close it (politely, then by force), and wait for it."""
        self._stopping = True
        if self.proc.returncode is None:
            with contextlib.suppress(Exception):
                await self.call("close", timeout_s=CLOSE_TIMEOUT_S)
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 5.0)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader
        self._log.close()


async def _serve() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(os.dup(0), "rb", 0))
    out = os.fdopen(os.dup(1), "wb", 0)
    os.dup2(2, 1)  # a stray print goes to the log, never into the answers
    core = WorkerCore()

    async def answer(call_id: int, method: str, args: tuple[Any, ...]) -> None:
        try:
            reply = (call_id, True, await core.call(method, args))
        except Exception as e:
            reply = (call_id, False, f"{type(e).__name__}: {e}")
        data = memoryview(_HEADER.pack(len(body := pickle.dumps(reply, pickle.HIGHEST_PROTOCOL))) + body)
        while data:  # from the loop's thread, whole: answers never interleave
            data = data[out.write(data) or 0 :]

    tasks: set[asyncio.Task[None]] = set()
    while True:
        try:
            (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
            call_id, method, args = pickle.loads(await reader.readexactly(size))
        except asyncio.IncompleteReadError:  # the driver is gone
            await core.close()
            return
        if method == "close":
            await core.close()
            await answer(call_id, "clock", ())
            return
        task = asyncio.ensure_future(answer(call_id, method, args))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import uvloop

        uvloop.run(_serve())
    except ImportError:  # pragma: no cover
        asyncio.run(_serve())


if __name__ == "__main__":
    main()
