"""The mock's scripted scaler (``--replicas-script``): a fleet of scripted replicas whose count
follows a script, each with ``--max-streams`` generation slots, so the capacity the mock serves
with is known at every moment: the known answers of autoscaling's measurements.

The script, ``"0:1,4:2,12:1"``: from 0 s one replica, from 4 s two, from 12 s one. Its times are
seconds since the mock's **first request** arrived (not since it started: a test or run does not
know how long the mock took to come up, but it knows when it sent its first request), so a
script lines up with a run's points. Before the first request the script's first count serves.

- The replicas at 0 s are RUNNING from the start (up before the run, as a deployed fleet is).
- A rise adds replicas STARTING at the step's time and RUNNING ``--replica-startup-s`` later:
  a STARTING replica serves nothing.
- A fall sets the newest replicas STOPPING at the step's time: they take no new request and are
  gone once their requests in flight end (at once when idle).
- A request takes a free slot on the RUNNING replica with the fewest requests in flight (the
  first such, by id); with none free it waits, first come first served (with ``--priority-queue``
  by its priority, lower first, then in arrival order), and its timing starts when it is admitted,
  as with ``--max-streams`` alone. Its reply carries ``x-served-by:
  replica-K`` (K from 1, in the order replicas were made, never reused) and its delivery logs K.

``GET /mock/replicas`` answers the replicas now in Ray Serve's shape (the dashboard's
``GET /api/serve/applications/``: ``applications.mock.deployments.mock`` with
``target_num_replicas`` and ``replicas[]`` of ``{"replica_id", "state", "start_time_s"}``), so the
``ray-serve`` reader polls it (telemetry/scaler.py). ``GET /mock/replica-log`` is the mock's own
log: ``origin_s`` (the first request's arrival) and each transition as it happened, ``{"replica",
"state", "at_s"}`` on the machine's monotonic clock (time.perf_counter, as deliveries), state
"STOPPED" when a replica is gone: what a test compares a measured timeline with.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from dataclasses import dataclass, field

from tokenbench.common.replica_states import ReplicaState

SERVED_BY_HEADER = "x-served-by"  # TargetConfig.replica_header's default: records name the replica
APP = "mock"  # the application's and the deployment's name in the Ray Serve shape


@dataclass(frozen=True)
class ScriptStep:
    at_s: float  # since the first request
    replicas: int


def parse_script(text: str) -> tuple[ScriptStep, ...]:
    """``"0:1,4:2,12:1"`` -> its steps; the first at 0 s, times rising, counts >= 0."""
    steps: list[ScriptStep] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        at, sep, count = part.partition(":")
        try:
            step = ScriptStep(float(at), int(count))
        except ValueError:
            step = None
        if not sep or step is None or step.replicas < 0 or step.at_s < 0:
            raise ValueError(f"--replicas-script: write SECONDS:REPLICAS,... (e.g. 0:1,4:2,12:1), got {part!r}")
        if steps and step.at_s <= steps[-1].at_s:
            raise ValueError(f"--replicas-script: times must rise, got {part!r} after {steps[-1].at_s:g}:")
        steps.append(step)
    if not steps or steps[0].at_s != 0:
        raise ValueError(f"--replicas-script must start at 0 s (e.g. 0:1,4:2), got {text!r}")
    return tuple(steps)


@dataclass
class Replica:
    id: str
    state: ReplicaState
    started_unix_s: float
    in_flight: int = 0


@dataclass
class _Transition:
    replica: str
    state: str  # a ReplicaState, or "STOPPED" (gone)
    at_s: float  # time.perf_counter()


@dataclass
class ReplicaPool:
    """The scripted replicas and their slots (module docstring). Timers run on the serving loop."""

    script: tuple[ScriptStep, ...]
    slots: int  # per replica
    startup_s: float
    replicas: list[Replica] = field(default_factory=list)
    log: list[_Transition] = field(default_factory=list)
    origin_s: float | None = None
    by_priority: bool = False  # waiters admitted by priority (lower first), then in arrival order
    _made: int = 0
    _waiting: list[tuple[float, int, asyncio.Future[Replica]]] = field(default_factory=list)  # a heap
    _arrivals: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        for _ in range(self.script[0].replicas):
            self._make("RUNNING")

    def _make(self, state: ReplicaState) -> Replica:
        self._made += 1
        replica = Replica(f"replica-{self._made}", state, time.time())
        self.replicas.append(replica)
        self._note(replica, state)
        return replica

    def _note(self, replica: Replica, state: str) -> None:
        self.log.append(_Transition(replica.id, state, time.perf_counter()))

    def first_request(self, received_s: float) -> None:
        """The script's clock starts: each later step is timed from ``received_s``."""
        if self.origin_s is not None:
            return
        self.origin_s = received_s
        loop = asyncio.get_running_loop()
        for step in self.script[1:]:
            loop.call_at(loop.time() + step.at_s - (time.perf_counter() - received_s), self._scale, step.replicas)

    def _scale(self, count: int) -> None:
        active = [r for r in self.replicas if r.state != "STOPPING"]
        for _ in range(count - len(active)):
            replica = self._make("STARTING")
            asyncio.get_running_loop().call_later(self.startup_s, self._ready, replica)
        for replica in reversed(active[count:] if count < len(active) else []):
            replica.state = "STOPPING"
            self._note(replica, "STOPPING")
            self._drop_if_idle(replica)

    def _ready(self, replica: Replica) -> None:
        if replica.state != "STARTING":  # stopped while starting
            return
        replica.state = "RUNNING"
        self._note(replica, "RUNNING")
        self._dispatch()

    def _drop_if_idle(self, replica: Replica) -> None:
        if replica.state == "STOPPING" and replica.in_flight == 0:
            self.replicas.remove(replica)
            self._note(replica, "STOPPED")

    def _free(self) -> Replica | None:
        ready = [r for r in self.replicas if r.state == "RUNNING" and r.in_flight < self.slots]
        return min(ready, key=lambda r: r.in_flight) if ready else None  # min keeps the first of equals

    def _dispatch(self) -> None:
        while self._waiting:
            replica = self._free()
            if replica is None:
                return
            _, _, fut = heapq.heappop(self._waiting)
            if fut.done():
                continue
            replica.in_flight += 1
            fut.set_result(replica)

    async def acquire(self, priority: float = 0.0) -> Replica:
        """A slot on a RUNNING replica, waiting for one (first come first served, or by priority)."""
        replica = self._free() if not self._waiting else None
        if replica is not None:
            replica.in_flight += 1
            return replica
        fut: asyncio.Future[Replica] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (priority if self.by_priority else 0.0, next(self._arrivals), fut))
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # admitted as it was cancelled: give the slot back
                self.release(fut.result())
            raise

    def release(self, replica: Replica) -> None:
        replica.in_flight -= 1
        self._drop_if_idle(replica)
        self._dispatch()

    def details(self) -> dict[str, object]:
        """The replicas now, in Ray Serve's ``ServeInstanceDetails`` shape (module docstring)."""
        target = sum(1 for r in self.replicas if r.state != "STOPPING")
        replicas = [{"replica_id": r.id, "state": r.state, "start_time_s": r.started_unix_s} for r in self.replicas]
        deployment = {"name": APP, "status": "HEALTHY", "target_num_replicas": target, "replicas": replicas}
        app = {"name": APP, "status": "RUNNING", "deployments": {APP: deployment}}
        return {"applications": {APP: app}}

    def log_json(self) -> dict[str, object]:
        return {"origin_s": self.origin_s, "transitions": [t.__dict__ for t in self.log]}
