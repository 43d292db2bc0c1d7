"""The one engine for a point: a pool of workers, whether the load runs from the run's own process,
beyond it (``--workers N``) or beyond one machine (``--ray``, ``--ray-address``).

The driver (the ``tokenbench run`` process) owns the plan, the server's telemetry and the run
directory; workers only send requests and time them. Each worker is a ``WorkerCore`` (core.py)
with its connections, client, requests and load generator: on the driver's own loop
(``LocalWorker``, a run without --workers or --ray: called directly, the driver's clock, its
records the driver's own), in a local process (process.py) or a Ray async actor (ray_actor.py),
reached through the same few calls (``Handle``); the runner only ever talks to the pool (pool.py),
set up from the run's settings by wiring.py. Every worker
computes the point's one global schedule from the same seed and runs its share of it
(``load.Share``: user, arrival or conversation ``i`` is worker ``i % N``'s, users keeping their
global ramp times), so the schedule is the same whatever N. Records, started-request notices and
the client's own samples come back in batches (pool.py polls every ``POLL_S``); the driver writes
one records.jsonl (each record with its ``worker``) and derives results as for one process.

Clocks (clock.py): durations come from each worker's own monotonic clock; its run-clock origin is
the driver's shifted by an offset estimated NTP-style before the first point and checked at the
end, so every timestamp lands on the driver's time axis; both estimates and their uncertainty are
in results' ``workers``.

A worker that dies (its process exits, its actor is lost, or it stops answering for
``ANSWER_TIMEOUT_S``): its requests in flight become ``worker_lost`` records, the point is marked
(``workers_lost``), and the run goes on with the others, the same global schedule dealt among the
survivors from the next point on; when none is left, the run stops after that point with a
message naming each lost worker and why.
"""

from __future__ import annotations


class WorkerLost(RuntimeError):
    """A worker died or stopped answering; the message says which and why."""
