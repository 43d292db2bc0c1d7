"""The client's ``client`` samples (telemetry.client_monitor) -> a point's ``client`` block and each
time-series window's client figures (pure).

A sample belongs to a period when its midpoint lies in it (samples are 0.5 s; a period too short to
hold a midpoint takes the samples that overlap it). Per worker: CPU utilization of a sample =
its process CPU seconds / its length (a fraction of one core); the point's ``cpu_util_mean`` is
the CPU seconds over the samples' seconds, ``cpu_util_max`` the busiest sample; the loop lag
percentiles pool the ticks of the worker's samples (numpy's linear percentile, as every
distribution). Over workers: the worst worker's figure (a point is as limited as its busiest
worker).

The rule (client health): a point is ``limited`` when, for some worker,

- loop lag: its ticks' p99 exceeds ``LOOP_LAG_LIMIT_S`` (5 ms: its chunk timestamps may be that
  late) by the margin ``LAG_MARGIN`` (p99 > 6 ms) *and* at least ``MIN_SLOW_TICKS`` (3) of its
  ticks ran later than the limit: with ~100 ticks the p99 is one tick, and one slow tick (a GC
  pause, a neighbour's burst) is no verdict (seen: "limited" at 2 req/s on a 5.04 ms p99 of 95
  ticks); or
- CPU: its busiest sample exceeds ``CPU_LIMIT`` (90% of a core: its loop has no room left) and at
  least ``CPU_SHARE`` (10%) of its samples do, so one busy half-second of a long point is not one;

- send lag: an open-loop point without ``--max-concurrency`` (a rate or a replay: its
  sends are due on the schedule whatever the server does) whose requests' send lag (the exchange
  begun - the time it was due, ``http_start_s - scheduled_s``) has a p99 over ``SEND_LAG_LIMIT_S``
  (10 ms) with at least ``MIN_SLOW_TICKS`` sends later than that: the client did not send the
  offered rate on time, even where its loop ticks and CPU samples looked fine (a burst of sends
  between two ticks);

then the client, not the server, may have set the point's numbers. ``advice`` words what to do
for the cause it saw: the client's own CPU busy (the load it drives: fewer users or --workers),
or its loop late while its CPU was low (another process or the engine shares its cores).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from tokenbench.results import PointResult
from tokenbench.results.client import Client, WindowHealth

LOOP_LAG_LIMIT_S = 0.005
LAG_MARGIN = 1.2  # the p99 must exceed the limit by 20%
MIN_SLOW_TICKS = 3  # ticks later than the limit, in one worker
CPU_LIMIT = 0.90
SEND_LAG_LIMIT_S = 0.010  # an open-loop request begun this late against its schedule
CPU_SHARE = 0.10  # of a worker's samples over CPU_LIMIT
# A lag verdict with the client's mean CPU below this (a fraction of a core): the client was not
# busy itself, so the usual cause is something else on its cores (the engine, another process).
LOW_CPU = 0.5

Sample = dict[str, Any]  # one ``client`` line of samples.jsonl, read back as JSON (an edge: read key by key)


def _inside(samples: Sequence[Sample], start_s: float, end_s: float) -> list[Sample]:
    mid = [s for s in samples if start_s <= (s["start_s"] + s["t_s"]) / 2 < end_s]
    return mid or [s for s in samples if s["start_s"] < end_s and s["t_s"] > start_s]


def _by_worker(samples: Sequence[Sample]) -> dict[int, list[Sample]]:
    workers: dict[int, list[Sample]] = {}
    for s in samples:
        workers.setdefault(int(s.get("worker", 0)), []).append(s)
    return workers


def _util(s: Sample) -> float:
    length = s["t_s"] - s["start_s"]
    return float(s["cpu_s"]) / length if length > 0 else 0.0


def _mean_util(samples: Sequence[Sample]) -> float | None:
    seconds = sum(s["t_s"] - s["start_s"] for s in samples)
    return sum(float(s["cpu_s"]) for s in samples) / seconds if seconds > 0 else None


def _lags(samples: Sequence[Sample]) -> list[float]:
    return [float(lag) for s in samples for lag in s.get("lag_s") or []]


def _p99(values: list[float]) -> float | None:
    return float(np.percentile(np.array(values, dtype=np.float64), 99)) if values else None


def _worst(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def point_client(
    samples: Sequence[Sample], start_s: float, end_s: float, send_lags: Sequence[float] | None = None
) -> Client | None:
    """The client's health over [start_s, end_s]; None when no sample covers it (a run from
    before the client was sampled). ``send_lags``: an open-loop point's requests' send lags in
    the window (None: a closed-loop point, or one whose sends wait for a slot)."""
    inside = _inside(samples, start_s, end_s)
    if not inside:
        return None
    workers = _by_worker(inside).values()
    lags = [_lags(w) for w in workers]
    lag_p99 = _worst([_p99(x) for x in lags])
    cpu_max = max(_util(s) for s in inside)
    limited_by: list[Literal["loop_lag", "cpu", "send_lag"]] = []
    if any(lag_limited(x) for x in lags):
        limited_by.append("loop_lag")
    if any(cpu_limited(w) for w in workers):
        limited_by.append("cpu")
    if send_lags is not None and send_limited(send_lags):
        limited_by.append("send_lag")
    # an open-loop point's send lag: only where it has one (absent elsewhere, as before)
    send = {"send_lag_p99_s": _p99(list(send_lags))} if send_lags else {}
    return Client(
        **send,
        workers=len(workers),
        period_s=[min(s["start_s"] for s in inside), max(s["t_s"] for s in inside)],
        samples=len(inside),
        ticks=sum(len(x) for x in lags),
        cpu_util_max=cpu_max,
        cpu_util_mean=_worst([_mean_util(w) for w in workers]),
        loop_lag_p99_s=lag_p99,
        loop_lag_max_s=_worst([max(x) if x else None for x in lags]),
        connections_max=_connections_max(inside),
        limited=bool(limited_by),
        limited_by=limited_by,
    )


def lag_limited(lags: list[float]) -> bool:
    """One worker's ticks say its loop was late: p99 over the limit by the margin, and at least
    ``MIN_SLOW_TICKS`` ticks over the limit (a p99 of ~100 ticks is one tick)."""
    p99 = _p99(lags)
    slow = sum(1 for lag in lags if lag > LOOP_LAG_LIMIT_S)
    return p99 is not None and p99 > LOOP_LAG_LIMIT_S * LAG_MARGIN and slow >= MIN_SLOW_TICKS


def send_limited(lags: Sequence[float]) -> bool:
    """An open-loop point's sends were late: their p99 over ``SEND_LAG_LIMIT_S`` and at least
    ``MIN_SLOW_TICKS`` of them over it (one late send is no verdict)."""
    p99 = _p99(list(lags))
    slow = sum(1 for lag in lags if lag > SEND_LAG_LIMIT_S)
    return p99 is not None and p99 > SEND_LAG_LIMIT_S and slow >= MIN_SLOW_TICKS


def cpu_limited(samples: Sequence[Sample]) -> bool:
    """One worker's samples say its CPU was full: at least ``CPU_SHARE`` of them (and one) over
    ``CPU_LIMIT``."""
    busy = sum(1 for s in samples if _util(s) > CPU_LIMIT)
    return busy > 0 and busy >= CPU_SHARE * len(samples)


def advice(client: Client) -> str:
    """What to do about a limited point, for the cause its figures show."""
    if client.limited_by == ["send_lag"]:
        return (
            "the client could not send the offered rate on time (its sends ran late against the schedule): "
            "spread the load with --workers N (`tokenbench calibrate --target-rate` says how many), or lower the rate"
        )
    return advice_for("cpu" in client.limited_by, client.cpu_util_mean)


def advice_for(cpu_full: bool, cpu_util: float | None) -> str:
    """The advice for a limited point: its CPU full (the load it drives is too much for one
    process), or its loop late while ``cpu_util`` (a fraction of a core) was below ``LOW_CPU``
    (something else ran on its cores), or neither."""
    if cpu_full:
        return (
            "the client's CPU was full: rerun with fewer users (or a lower rate) per client process, "
            "or spread the load over processes with --workers N"
        )
    if cpu_util is not None and cpu_util < LOW_CPU:
        return (
            f"the client's own CPU was low ({cpu_util:.0%} of a core), so another process or the "
            "engine may share the client's cores: run the client on other cores (taskset) or another machine, "
            "then rerun"
        )
    return "the client's loop was late under this load: rerun with fewer users or spread the load with --workers N"


def window_client(samples: Sequence[Sample], start_s: float, end_s: float) -> WindowHealth | None:
    """One time-series window's client figures: the busiest worker's mean CPU, the longest tick
    lag and the most connections one worker held, of the samples whose midpoint lies in it; None
    when none does."""
    inside = [s for s in samples if start_s <= (s["start_s"] + s["t_s"]) / 2 < end_s]
    if not inside:
        return None
    lags = _lags(inside)
    return WindowHealth(
        client_cpu_util=_worst([_mean_util(w) for w in _by_worker(inside).values()]),
        client_loop_lag_max_s=max(lags) if lags else None,
        client_connections_max=_connections_max(inside),
    )


def _connections_max(samples: Sequence[Sample]) -> int | None:
    """The most requests in flight one worker held (each holds one connection)."""
    in_flight = [int(s["in_flight_max"]) for s in samples if s.get("in_flight_max") is not None]
    return max(in_flight) if in_flight else None


def _cpu_util_max(point: PointResult) -> float | None:
    return None if point.client is None else point.client.cpu_util_max


def _cpu_util_mean(point: PointResult) -> float | None:
    return None if point.client is None else point.client.cpu_util_mean


def _loop_lag_p99_s(point: PointResult) -> float | None:
    return None if point.client is None else point.client.loop_lag_p99_s


def client_limited(point: PointResult) -> float | None:
    """1.0 when the client limited the point, 0.0 when not (the mean over trials is the share of
    trials it limited); None on a point of a run from before the client was sampled."""
    return None if point.client is None else float(point.client.limited)


# The metric catalogue's entries for the client (catalogue.METRICS; aggregated and in the report,
# lower is better, None on runs before the client was sampled): key, title, shown unit, scale from
# the stored unit, getter.
CLIENT_POPULATION = "the client's own samples, their midpoints in the window (telemetry.client_health)"
CLIENT_METRICS: tuple[tuple[str, str, str, float, Callable[[PointResult], float | None]], ...] = (
    ("client_cpu_util_max", "client CPU max", "%", 100.0, _cpu_util_max),
    ("client_cpu_util_mean", "client CPU mean", "%", 100.0, _cpu_util_mean),
    ("client_loop_lag_p99_s", "client loop lag p99", "ms", 1e3, _loop_lag_p99_s),
    ("client_limited", "client-limited share", "%", 100.0, client_limited),
)
