"""The client monitor on a real event loop (telemetry.client_monitor): a loop blocked on purpose
shows as lag and limits the point; samples are emitted as they close, the last one on exit."""

from __future__ import annotations

import asyncio
import math
import time

from tokenbench.telemetry.client_health import LOOP_LAG_LIMIT_S, point_client
from tokenbench.telemetry.client_monitor import ClientMonitor


async def test_a_blocked_loop_shows_as_lag_and_limits_the_point() -> None:
    emitted: list[dict] = []
    monitor = ClientMonitor(time.perf_counter, lambda: 7, emitted.append)
    async with monitor.running(tick_s=0.01, sample_s=0.1):
        await asyncio.sleep(0.05)
        for _ in range(3):
            time.sleep(0.08)  # the loop is blocked: the wake-up due within 10 ms runs >= 70 ms late
            await asyncio.sleep(0.03)
    assert emitted and emitted == monitor.samples  # every sample emitted once, the last on exit
    assert all(a["t_s"] == b["start_s"] for a, b in zip(emitted, emitted[1:]))  # back to back
    client = point_client(emitted, -math.inf, math.inf)
    assert client is not None and client.ticks >= 3
    assert client.loop_lag_max_s is not None and client.loop_lag_max_s >= 0.07
    assert client.loop_lag_p99_s is not None and client.loop_lag_p99_s > LOOP_LAG_LIMIT_S
    assert client.limited is True and "loop_lag" in client.limited_by
    assert client.connections_max == 7


async def test_cpu_time_is_the_process_cpu_over_each_sample() -> None:
    """A scripted CPU clock: 0.2 s of CPU per reading, one reading as each sample opens and closes."""
    readings = iter(range(1000))
    monitor = ClientMonitor(time.perf_counter, lambda: 0, lambda s: None, cpu_time=lambda: 0.2 * next(readings))
    async with monitor.running(tick_s=0.01, sample_s=0.05):
        await asyncio.sleep(0.2)
    assert len(monitor.samples) >= 2
    assert all(math.isclose(s["cpu_s"], 0.2) for s in monitor.samples)
    assert all(s["worker"] == 0 and s["kind"] == "client" for s in monitor.samples)
