"""What the client monitor costs (a program, not a test): CPU-µs per tick, on an idle event loop.

The monitor (telemetry.client_monitor) wakes every 50 ms in a run; here it ticks every 1 ms for
a few seconds so its cost stands out of the noise: (process CPU with the monitor - without) / ticks.
A tick is one asyncio.sleep wake-up, a clock read, a list append; a sample (every 0.5 s in a run)
adds one json line handed to a callback (here a no-op: in a run, a pipe write to the sampler).

    python benchmarks/client_monitor.py
"""

from __future__ import annotations

import asyncio
import time

from tokenbench.telemetry.client_monitor import ClientMonitor

DURATION_S = 3.0
TICK_S = 0.001


async def _idle(monitored: bool) -> tuple[float, int]:
    monitor = ClientMonitor(time.perf_counter, lambda: 0, lambda sample: None)
    cpu = time.process_time()
    if monitored:
        async with monitor.running(tick_s=TICK_S, sample_s=0.5):
            await asyncio.sleep(DURATION_S)
    else:
        await asyncio.sleep(DURATION_S)
    return time.process_time() - cpu, sum(len(s["lag_s"]) for s in monitor.samples)


def main() -> None:
    try:
        import uvloop

        run = uvloop.run
    except ImportError:  # pragma: no cover
        run = asyncio.run
    base, _ = run(_idle(False))
    with_monitor, ticks = run(_idle(True))
    per_tick_us = (with_monitor - base) / ticks * 1e6
    print(f"{ticks} ticks in {DURATION_S:g} s: {per_tick_us:.1f} CPU-µs per tick")
    print(f"at the run's 50 ms tick: {per_tick_us * 20 / 1e6:.4%} of a core")


if __name__ == "__main__":
    main()
