"""A worker's clock offset from the driver's, estimated NTP-style (pure).

The driver reads its monotonic clock (t0), asks the worker for its own (tw) and reads its clock
again when the answer arrives (t1). If the worker read its clock halfway through the round trip,
``offset = tw - (t0 + t1) / 2``; whatever the split of the round trip, the true offset lies within
``(t1 - t0) / 2`` of it. Of several pings the one with the shortest round trip bounds it best.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

PINGS = 9


@dataclass(frozen=True)
class Offset:
    """The worker's monotonic clock minus the driver's, and the bound on its error."""

    offset_s: float
    uncertainty_s: float


def estimate(pings: Sequence[tuple[float, float, float]]) -> Offset:
    """The offset from ``(t0, tw, t1)`` pings: the shortest round trip's midpoint estimate."""
    if not pings:
        raise ValueError("no clock pings")
    t0, tw, t1 = min(pings, key=lambda p: p[2] - p[0])
    return Offset(tw - (t0 + t1) / 2, (t1 - t0) / 2)


async def measure(
    worker_clock: Callable[[], Awaitable[float]],
    now: Callable[[], float] = time.perf_counter,
    pings: int = PINGS,
) -> Offset:
    """Ping ``worker_clock`` ``pings`` times and estimate its offset from ``now``'s clock."""
    samples = []
    for _ in range(pings):
        t0 = now()
        tw = await worker_clock()
        samples.append((t0, tw, now()))
    return estimate(samples)
