"""The client's own health while a point runs: a small task on the load generator's event loop.

Every ``tick_s`` (50 ms) it wakes and notes how late it woke (event-loop lag = actual wake-up -
scheduled wake-up: what every callback on the loop, a chunk's timestamp included, waited too) and
the requests in flight (each streaming request holds one connection: the proxy for open
connections, read from the load generator's own counter rather than aiohttp's private connector
fields). Every ``sample_s`` (0.5 s) it emits one ``client`` sample: the process's CPU time over
the sample (``time.process_time()``: every thread of this process), the ticks' lags and the most
requests in flight. Each worker (workers.core) runs one while its part of a point runs; the
driver's pool writes each sample into samples.jsonl through the sampler (``Sampler.event``) as
its polls bring them, the run's one timeline, where ``tokenbench recompute`` finds it beside the
point's span; telemetry.client_health turns samples into results (pure).

A tick costs a clock read, a list append and a counter read (benchmarks/client_overhead.py
measures it); a sample one ``json.dumps`` and a pipe write every 0.5 s. Nothing here blocks.

Sample line: ``{"kind": "client", "worker": 0, "start_s", "t_s", "cpu_s", "tick_s",
"lag_s": [...], "in_flight_max"}`` (run-clock seconds; ``worker``: the worker's index, 0 when the
run's own process sends the load).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

TICK_S = 0.05
SAMPLE_S = 0.5

Sample = dict[str, Any]


class ClientMonitor:
    """Samples this process's CPU and its loop's lag while ``running()`` is entered."""

    def __init__(
        self,
        now: Callable[[], float],
        in_flight: Callable[[], int],
        emit: Callable[[Sample], None],
        worker: int = 0,
        cpu_time: Callable[[], float] = time.process_time,
    ) -> None:
        self._now, self._in_flight, self._emit, self._cpu = now, in_flight, emit, cpu_time
        self.worker = worker
        self.samples: list[Sample] = []  # the samples emitted since the last ``running()`` began

    @contextlib.asynccontextmanager
    async def running(self, tick_s: float = TICK_S, sample_s: float = SAMPLE_S) -> AsyncIterator[ClientMonitor]:
        """Sample from entry to exit; the last, partial sample is emitted on exit."""
        self.samples = []
        task = asyncio.ensure_future(self._run(tick_s, sample_s))
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self, tick_s: float, sample_s: float) -> None:
        state = _Open(self._now(), self._cpu(), self._in_flight())
        due = state.start_s + tick_s
        try:
            while True:
                await asyncio.sleep(max(0.0, due - self._now()))
                t = self._now()
                state.tick(max(0.0, t - due), self._in_flight())
                # the next wake-up on the grid; after a long stall, the next one from now (no burst)
                due = due + tick_s if due + tick_s > t else t + tick_s
                if t - state.start_s >= sample_s:
                    state = self._close(state, t, tick_s)
        finally:
            self._close(state, self._now(), tick_s)

    def _close(self, state: _Open, t: float, tick_s: float) -> _Open:
        """Emit the sample ``state`` holds, ending at ``t``; the next one starts there."""
        cpu = self._cpu()
        sample = {
            "kind": "client",
            "worker": self.worker,
            "start_s": state.start_s,
            "t_s": t,
            "cpu_s": cpu - state.cpu_start_s,
            "tick_s": tick_s,
            "lag_s": [round(lag, 6) for lag in state.lags_s],
            "in_flight_max": state.in_flight_max,
        }
        if t > state.start_s:
            self.samples.append(sample)
            self._emit(sample)
        return _Open(t, cpu, self._in_flight())


class _Open:
    """A sample being gathered: when it began, the CPU time then, its ticks so far."""

    def __init__(self, start_s: float, cpu_start_s: float, in_flight: int) -> None:
        self.start_s, self.cpu_start_s, self.in_flight_max = start_s, cpu_start_s, in_flight
        self.lags_s: list[float] = []

    def tick(self, lag_s: float, in_flight: int) -> None:
        self.lags_s.append(lag_s)
        self.in_flight_max = max(self.in_flight_max, in_flight)
