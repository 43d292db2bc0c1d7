"""The client's own health: ``client`` on a point (over its window) and the client figures of a
time-series window (telemetry.client_health; docs/scale-out.md, "The client's own health"). A point of a run
recorded before the client was sampled has no ``client`` key, and its windows neither figure."""

from __future__ import annotations

from typing import Literal

from tokenbench.common.frozen import FrozenModel
from tokenbench.results.base import Number


class Client(FrozenModel):
    """The load generator's process(es) over the point's window: did the client keep up?

    CPU utilization is a fraction of one core (process CPU seconds / wall seconds, per sample);
    loop lag is how late a 50 ms wake-up ran on the client's event loop; connections are the most
    requests in flight at a tick (each streaming request holds one connection). Over several
    workers each figure is the worst worker's. ``limited``: a worker's loop lag p99 > 6 ms with at
    least 3 ticks over 5 ms, or at least 10% of its samples over 90% of a core
    (telemetry.client_health's rule), or an open-loop point's sends ran late against
    their schedule (send lag p99 > 10 ms with at least 3 sends over it); ``limited_by`` says which.
    ``send_lag_p99_s``: that p99 (an open-loop point without --max-concurrency only)."""

    workers: int
    period_s: list[Number]  # what the samples cover (they are 0.5 s; their midpoints in the window)
    samples: int
    ticks: int
    cpu_util_max: Number
    cpu_util_mean: Number | None
    loop_lag_p99_s: Number | None
    loop_lag_max_s: Number | None
    connections_max: int | None
    limited: bool
    limited_by: list[Literal["loop_lag", "cpu", "send_lag"]]
    send_lag_p99_s: Number | None = None


class WindowHealth(FrozenModel):
    """A time-series window as the client's own samples saw it: absent from a window no sample
    fell in (and from runs before the client was sampled)."""

    client_cpu_util: Number | None = None  # the busiest worker's mean CPU, a fraction of one core
    client_loop_lag_max_s: Number | None = None  # the longest tick lag
    client_connections_max: int | None = None  # the most requests (connections) one worker held open


class WorkerClock(FrozenModel):
    """One worker's clock against the driver's (workers.clock): its monotonic clock minus the
    driver's, estimated before the first point and again at the end, each within its uncertainty
    (half the shortest ping's round trip). Record timestamps are on the driver's axis through the
    start estimate; durations never cross clocks."""

    worker: int
    node: str | None
    pid: int | None
    offset_s: Number | None
    uncertainty_s: Number | None
    end_offset_s: Number | None  # None: the worker was lost before the end
    end_uncertainty_s: Number | None
    lost: str | None  # why the worker was lost (None: it ran to the end)


class Workers(FrozenModel):
    """How the load was sent when more than one process sent it (``--workers``, ``--ray``):
    absent from a run of one process."""

    mode: Literal["process", "ray"]
    count: int
    ray_address: str | None
    cpus_per_worker: Number | None
    clocks: list[WorkerClock]


class WorkerLoss(FrozenModel):
    """A worker that died during a point: when the driver noticed, why, and how many of its
    requests in flight became ``worker_lost`` records (the point lost its share of the schedule
    from then on)."""

    worker: int
    at_s: Number
    reason: str
    in_flight: int
