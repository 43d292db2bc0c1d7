"""Load profiles turned into schedules: when each user starts, when each open-loop request arrives.

Pure and seeded: the same load and seed give the same times. Times are seconds from the start of
the load point.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .config import LoadPoint, RateLoad, StopConfig, UsersLoad


def user_start_times(load: UsersLoad) -> list[float]:
    """Users spawned evenly over the ramp: user i starts at i * ramp / users (the first at 0)."""
    step = load.ramp_up_s / load.users
    return [i * step for i in range(load.users)]


def arrival_times(load: RateLoad, seed: int, stop: StopConfig) -> Iterator[float]:
    """Open-loop arrival times, ending before ``stop.duration_s`` or after ``stop.max_requests``.

    constant: every 1/rate s, the first at 0. poisson: exponential gaps with mean 1/rate. gamma:
    gaps with shape ``burstiness`` and mean 1/rate (burstiness < 1 is burstier than poisson, > 1
    smoother; the same convention as vLLM's ``--burstiness``). For poisson and gamma the first
    gap is drawn too (a renewal process started at 0): an arrival pinned at t = 0 would add one
    request to the expected rate x duration.
    """
    rng = np.random.default_rng(seed)
    mean_gap = 1.0 / load.rate_per_s

    def gap() -> float:
        if load.arrival == "poisson":
            return float(rng.exponential(mean_gap))
        return float(rng.gamma(load.burstiness, mean_gap / load.burstiness))

    t = 0.0 if load.arrival == "constant" else gap()
    n = 0
    while stop.max_requests is None or n < stop.max_requests:
        if stop.duration_s is not None and t >= stop.duration_s:
            return
        yield t
        n += 1
        t = n * mean_gap if load.arrival == "constant" else t + gap()  # constant: no float drift


def ramp_up_s(load: LoadPoint) -> float:
    return load.ramp_up_s if isinstance(load, UsersLoad) else 0.0


def describe(load: LoadPoint) -> str:
    if isinstance(load, UsersLoad):
        return f"{load.users} users" + (f", ramp {load.ramp_up_s:g}s" if load.ramp_up_s else "")
    cap = f", max {load.max_concurrency} in flight" if load.max_concurrency else ""
    return f"{load.rate_per_s:g} req/s {load.arrival}{cap}"
