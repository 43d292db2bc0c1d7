"""Drives a client under one load point. The one place that reads the clock to schedule work.

Closed loop (UsersLoad): user i starts at its ramp offset and sends its next request when its last
one ended (+ think time). Open loop (RateLoad): requests start at their arrival times whatever the
responses; with ``max_concurrency`` they may wait for a slot, and that wait is queue delay
(``sent_s - scheduled_s``), never hidden. A trace replay (ReplayLoad) is open loop whose arrival
times are the trace's (load.replay_offsets) and whose requests are the trace's rows, in order: a
send that is late (the loop busy, or no slot) shows as queue delay, the replay's lag.

Stopping: at ``duration_s`` (or once ``max_requests`` were issued) no new request starts; requests
in flight may finish within ``drain_timeout_s``, then are cancelled. An interrupt (Ctrl-C) cancels
everything in flight at once. Every request that was created becomes exactly one record.

A failing server is not flooded (failfast.py): a closed-loop user backs off after failures in a
row, and a point's circuit breaker stops it early (no new request; those in flight drain as at the
deadline) once the server failed every request for a while (``PointRun.stopped_early``).

A point can also stop by its own figures (autostop.py): ``--duration auto`` once they are
precise (its requests in flight drain as at the deadline), ``--stop-oversaturated`` once its
backlog grows without bound (those in flight are cancelled at once: draining an unbounded queue
would take what the stop saves); ``--warmup auto`` moves its window's start to where steady state
began (``PointRun.auto_stop``, ``window_start_s``).

Multi-turn sessions (loadgen/sessions.py) run under the same loads and stopping rules; a worker
(workers/) runs its ``Part`` of a point.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tokenbench.clients import Client
from tokenbench.config import LoadPoint, RateLoad, ReplayLoad, StagedLoad, StopConfig, UsersLoad, open_loop
from tokenbench.datasets.trace_requests import TraceTally
from tokenbench.errors import BadInput
from tokenbench.loadgen.autostop import CEILING, MAX_REQUESTS, OVER_SATURATED, AutoStop, PointMonitor, stop_facts
from tokenbench.loadgen.failfast import Backoff, CircuitBreaker, Trip
from tokenbench.loadgen.programs import ProgramSource, ProgramTally, run_programs
from tokenbench.loadgen.schedule import (
    Share,
    UserSpan,
    arrival_times,
    ramp_up_s,
    staged_arrival_times,
    staged_user_spans,
    user_start_times,
)
from tokenbench.loadgen.sessions import SessionSource, SessionTally, run_sessions
from tokenbench.loadgen.source import RequestSource, TraceSource
from tokenbench.loadgen.stats import LiveStats
from tokenbench.records import ImageInput, Outcome, Pooling, Request, RequestRecord, RunClock
from tokenbench.results.stopping import AutoStopFacts

__all__ = [
    "LiveStats",
    "LoadGenerator",
    "OpenRecords",
    "Part",
    "PointRun",
    "PointState",
    "RequestSource",
    "new_run",
    "stopped_window",
]


@dataclass
class PointRun:
    """What the load generator knows about a point beyond its records: its time span and users."""

    index: int
    load: LoadPoint
    start_s: float
    ramp_end_s: float  # start + ramp-up
    window_start_s: float  # ramp end + warm-up
    # The end of the measurement window: the deadline when the point has a duration (even if the
    # last request finished earlier); without one, closed loop: when the last request ended, open
    # loop: the last arrival plus one mean gap (N arrivals span N gaps).
    load_end_s: float
    end_s: float  # after drain
    user_spans: list[tuple[float, float]] = field(default_factory=list)
    interrupted: bool = False
    num_records: int = 0
    last_arrival_s: float | None = None  # open loop: the last scheduled arrival
    sessions: SessionTally | None = None  # a --multi-turn point's conversations (loadgen.sessions)
    programs: ProgramTally | None = None  # an agent-programs point's sessions (loadgen.programs)
    trace: TraceTally | None = None  # a replay's use of the trace's rows (loadgen.source.TraceSource)
    stopped_early: Trip | None = None  # the circuit breaker stopped the point (failfast.py)
    auto_stop: AutoStop | None = None  # autostop: the point stopped by its own figures (autostop.py)
    stopping: AutoStopFacts | None = None  # autostop: a point that judged itself: why it stopped, its precision


RecordSink = Callable[[RequestRecord], None]
WATCH_TICK_S = 0.2  # how often a point's monitor samples the backlog and judges (autostop.py)


class OpenRecords:
    """The records of requests created and not yet written: the one book that keeps "every request
    becomes exactly one record". A record leaves it once: when its send ends, as never sent when
    its point ends first (LoadGenerator), or as ``worker_lost`` when its worker is lost (the
    driver's book of a worker's records, workers.pool).

    With ``notices`` the book also keeps a copy of each new record as it was created, until
    ``take_notices``: what a worker in another process tells its driver, so a lost worker's
    requests in flight can still be written (a worker on the driver's loop cannot be lost: none)."""

    def __init__(self, notices: bool = False) -> None:
        self._open: dict[int, RequestRecord] = {}
        self._notices: dict[int, RequestRecord] | None = {} if notices else None

    def add(self, record: RequestRecord) -> None:
        self._open[record.id] = record
        if self._notices is not None:
            self._notices[record.id] = replace(record)

    def close(self, record: RequestRecord) -> bool:
        """Take ``record`` out; False if it was not open (it was written already)."""
        if self._notices is not None:
            self._notices.pop(record.id, None)  # ended before it was noticed: no notice needed
        return self._open.pop(record.id, None) is not None

    def left(self, worker: int | None = None) -> list[RequestRecord]:
        """The records still open (of ``worker``, when given)."""
        return [r for r in self._open.values() if worker is None or r.worker == worker]

    def take_notices(self) -> list[RequestRecord]:
        """The records created since the last call and still open, as they were created."""
        if not self._notices:
            return []
        notices, self._notices = list(self._notices.values()), {}
        return notices


@dataclass(frozen=True)
class Part:
    """The part of a point this generator runs (``share``: all of it by default) and its start
    on the run clock (None: now; workers get one start a little ahead, to begin together)."""

    share: Share = Share()
    start_s: float | None = None


class LoadGenerator:
    def __init__(
        self,
        client: Client,
        clock: RunClock,
        sink: RecordSink,
        stats: LiveStats | None = None,
        worker: int | None = None,
        notices: bool = False,
    ) -> None:
        """``worker``: stamped on every record (a worker of a scale-out; None: the run's own
        process); ``notices``: the open records keep notices for a driver in another process."""
        self._client = client
        self._clock = clock
        self._sink = sink
        self._worker = worker
        self.stats = stats or LiveStats()
        self._interrupt = asyncio.Event()
        # Whatever is still open when a point ends (a task cancelled before it ever ran) is
        # written as never sent: every request is one record.
        self.open = OpenRecords(notices)
        self._point: PointState | None = None  # the point running: its breaker sees every record

    # new_record, now, sleep_until, send, in_slot, run_users: loadgen.sessions.Driver, how it drives a point
    def new_record(self, **fields: Any) -> RequestRecord:
        """A record that will be written exactly once (when its send ends, or as the point ends)."""
        record = RequestRecord(**fields, worker=self._worker)
        self.open.add(record)
        return record

    def _finish(self, record: RequestRecord) -> None:
        if not self.open.close(record):
            return
        # counted where the live view reads (the driver's pool: workers.pool._done), not here too
        self._sink(record)
        point = self._point
        if point is not None and point.monitor is not None:
            point.monitor.observe(record)
        if point is not None and point.breaker.observe(record.outcome, self._clock.now()):
            point.run.stopped_early = point.breaker.trip
            point.tripped.set()

    def now(self) -> float:
        return self._clock.now()

    def interrupt(self) -> None:
        """Stop now: cancel in-flight requests (they are recorded as cancelled)."""
        self._interrupt.set()

    @property
    def interrupted(self) -> bool:
        return self._interrupt.is_set()

    async def sleep_until(self, t: float) -> bool:
        """Sleep to run-clock time ``t``; False if interrupted first."""
        # a loop may fire a timer up to its clock's resolution early: sleep again until past t
        while (delay := t - self._clock.now()) > 0 and not self._interrupt.is_set():
            try:
                await asyncio.wait_for(self._interrupt.wait(), delay)
            except TimeoutError:
                continue
        return not self._interrupt.is_set()

    async def send(self, request: Request, record: RequestRecord) -> None:
        """Send through the client; the record is written when it ends (or is cancelled). One
        issued as the circuit breaker tripped is never sent (a never-sent record)."""
        if request.images:  # images
            record.image_input = ImageInput.of(request)
        point = self._point
        if point is not None and point.tripped.is_set():
            record.outcome, record.closed_s = Outcome.NOT_SENT, self._clock.now()
            record.error = "not sent: the circuit breaker had stopped the point"
            self._finish(record)
            return
        stats = self.stats
        stats.in_flight += 1
        try:
            await self._client.send(request, record)
        finally:
            stats.in_flight -= 1
            self._finish(record)

    async def run_point(
        self,
        index: int,
        load: LoadPoint,
        stop: StopConfig,
        source: RequestSource | SessionSource | TraceSource | ProgramSource,
        seed: int,
        started: Callable[[PointRun], None] | None = None,
        part: Part = Part(),
    ) -> PointRun:
        """Run one point (``part`` of it); ``started`` is told its span as it starts (the runner
        logs it, so a point the process never finishes still has one)."""
        if part.start_s is not None and not await self.sleep_until(part.start_s):
            part = Part(part.share, self._clock.now())  # interrupted while waiting: an empty point
        run = new_run(index, load, stop, self._clock.now() if part.start_s is None else part.start_s)
        if started is not None:
            started(run)
        self._show(run, stop)
        budget = _Budget(part.share.of(stop.max_requests))
        point = PointState(run, stop, seed, _deadline_s(run, stop), budget, source, part.share, _mean_gap_s(load))
        monitor = PointMonitor(stop, run.start_s, run.ramp_end_s, run.window_start_s, open_loop=open_loop(load))
        point.monitor = monitor if monitor.active else None
        self._point = point
        try:
            await self._issue_until_stopped(point)
            now = self._clock.now()
            self._finish_unsent(now)
            self._end(point, now)
        finally:
            self._point = None
        return run

    def _show(self, run: PointRun, stop: StopConfig) -> None:
        self.stats.point, self.stats.started_s, self.stats.planned_s = run.index, run.start_s, stop.duration_s

    async def _issue_until_stopped(self, point: PointState) -> None:
        """Issue the point's requests until its load ends (or an interrupt), let those in flight
        drain, then cancel whatever is left (each becomes a cancelled record)."""
        load, stop, tasks = point.run.load, point.stop, point.tasks
        source = point.source
        if isinstance(source, SessionSource):
            issuer = run_sessions(self, point, load)
        elif isinstance(source, ProgramSource):
            issuer = run_programs(self, point, load)
        elif isinstance(source, TraceSource):
            assert isinstance(load, ReplayLoad), "a trace's rows go on a replay's schedule"
            issuer = self._replay(point, load, source)
        elif isinstance(load, UsersLoad):
            issuer = self._users(point, load, source)
        elif isinstance(load, StagedLoad) and not load.open_loop:
            issuer = self._staged_users(point, load, source)
        else:
            assert not isinstance(load, ReplayLoad), "a trace replay draws from a TraceSource"
            issuer = self._arrivals(point, load, source)
        issue_task = asyncio.ensure_future(issuer)
        interrupt_task = asyncio.ensure_future(self._interrupt.wait())
        tripped_task = asyncio.ensure_future(point.tripped.wait())
        halted_task = asyncio.ensure_future(point.halted.wait())
        watch_task = asyncio.ensure_future(self._watch(point))
        stops = {issue_task, interrupt_task, tripped_task, halted_task}
        closed_loop = not open_loop(load)
        if closed_loop:
            # Users stop issuing at the deadline; their last requests drain inside this wait.
            deadline = point.deadline_s
            limit = None if deadline is None else deadline + stop.drain_timeout_s - self._clock.now()
            await asyncio.wait(stops, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        else:
            await asyncio.wait(stops, return_when=asyncio.FIRST_COMPLETED)
        halted = point.run.auto_stop
        if halted is not None and halted.reason == OVER_SATURATED and not self.interrupted:
            pass  # its backlog grows without bound: what is in flight is cancelled below, not drained
        elif (point.tripped.is_set() or halted is not None) and not self.interrupted:
            # The breaker (or precise figures): nothing new is issued (a user waiting or backing
            # off stops), and the requests in flight drain as they would at the deadline.
            if point.user_tasks is not None:  # closed loop: a user sends inline (_users)
                for user in [t for t in point.user_tasks if t not in tasks]:
                    user.cancel()  # waiting: it stops; one sending ends after its request
            else:
                issue_task.cancel()
                await asyncio.gather(issue_task, return_exceptions=True)
            await self._drain(tasks, stop.drain_timeout_s)
        elif not closed_loop and not self.interrupted:
            await self._drain(tasks, stop.drain_timeout_s)
        issue_task.cancel()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(issue_task, *tasks, return_exceptions=True)
        interrupt_task.cancel()
        tripped_task.cancel()
        halted_task.cancel()
        watch_task.cancel()
        await asyncio.gather(watch_task, return_exceptions=True)
        if not issue_task.cancelled() and isinstance(issue_task.exception(), BadInput):
            # the point's input could not go on (a trace's malformed row, read as the replay
            # reached it): its records so far are kept, and the run stops saying which
            raise issue_task.exception()  # type: ignore[misc]

    async def _watch(self, point: PointState) -> None:
        """Every ``WATCH_TICK_S`` while the point issues: the backlog sampled, the monitor asked
        whether the point has stopped by its own figures (autostop.py)."""
        monitor = point.monitor
        if monitor is None:
            return
        while True:
            await asyncio.sleep(WATCH_TICK_S)
            now = self._clock.now()
            if monitor.wants_backlog:
                monitor.sample_backlog(now, len(point.tasks))
            if point.deadline_s is not None and now >= point.deadline_s:
                return
            found = monitor.check(now)
            if found is not None:
                point.run.auto_stop = found
                point.halted.set()
                return

    def _finish_unsent(self, now: float) -> None:
        """Every record still open is written: one whose task never ran as never sent."""
        for record in self.open.left():
            if record.sent_s is None:  # its task was cancelled before it ever ran
                record.outcome = Outcome.NOT_SENT
                record.error = record.error or "not sent: the point ended first"
                record.closed_s = record.closed_s if record.closed_s is not None else now
            self._finish(record)

    def _end(self, point: PointState, now: float) -> None:
        run, deadline = point.run, point.deadline_s
        planned = _planned_end_s(point)
        trip = run.stopped_early
        if point.monitor is not None and point.monitor.window_start_s is not None:
            run.window_start_s = point.monitor.window_start_s  # --warmup auto: where steady state began
        halted = run.auto_stop
        if trip is not None and not self.interrupted:
            run.load_end_s = min(trip.at_s, deadline) if deadline is not None else trip.at_s  # the load stopped there
        elif halted is not None and not self.interrupted:
            run.load_end_s = min(halted.at_s, deadline) if deadline is not None else halted.at_s
        elif planned is not None and not self.interrupted:
            run.load_end_s = planned
        else:
            run.load_end_s = min(now, deadline) if deadline is not None else now
        run.end_s = self._clock.now()
        run.interrupted = self.interrupted
        run.num_records = point.budget.issued
        stopped_window(run)
        if point.monitor is not None:
            run.stopping = stop_facts(point.monitor, self._stop_reason(point), run.load_end_s, run.window_start_s)

    def _stop_reason(self, point: PointState) -> str:
        """Why a point's load ended, in results' words (a point that judged itself: autostop.py)."""
        run, limit = point.run, point.budget.limit
        if run.auto_stop is not None and not self.interrupted:
            return run.auto_stop.reason
        if self.interrupted:
            return "interrupted"
        if run.stopped_early is not None:
            return run.stopped_early.by
        if point.deadline_s is not None and run.load_end_s >= point.deadline_s - 1e-6:
            return CEILING if point.stop.duration_auto else "duration"
        if limit is not None and point.budget.issued >= limit:
            return MAX_REQUESTS
        return "schedule"

    async def _drain(self, tasks: set[asyncio.Future[Any]], timeout_s: float) -> None:
        pending = {t for t in tasks if not t.done()}
        if not pending:
            return
        interrupt_task = asyncio.ensure_future(self._interrupt.wait())
        gathered = asyncio.ensure_future(asyncio.wait(pending))
        await asyncio.wait({gathered, interrupt_task}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        gathered.cancel()
        interrupt_task.cancel()

    async def _users(self, point: PointState, load: UsersLoad, source: RequestSource) -> None:
        users = point.user_tasks = set()

        # A user sends its requests itself, one at a time (no task, and no shield, of
        # its own per request). While it sends, its task is in ``tasks``, the point's requests in
        # flight: cancelled at the end (a cancelled record), left to drain when the breaker or the
        # point's own figures stop the point (_issue_until_stopped then cancels only the users
        # waiting; one sending stops after its request).
        async def user(u: int, offset_s: float) -> None:
            me = asyncio.current_task()
            assert me is not None
            users.add(me)
            try:
                start_s = point.run.start_s + offset_s
                if await self.sleep_until(start_s):
                    await self._user_sends(point, load, source, u, me, start_s)
            finally:
                users.discard(me)

        await self.run_users(load, point.share, user)

    async def _user_sends(
        self,
        point: PointState,
        load: UsersLoad | StagedLoad,
        source: RequestSource,
        u: int,
        me: asyncio.Task[Any],
        start_s: float,
        retire_s: float | None = None,
    ) -> None:
        """User ``u``'s requests, one after another from its start (``me``: its task; ``start_s``:
        its ramp time, when its first request is scheduled: a late wake is queue delay, not hidden)
        until the point's deadline, or (a staged point's) ``retire_s``: then it sends no new one."""
        run, budget, tasks = point.run, point.budget, point.tasks
        deadline = point.deadline_s if retire_s is None else _before(retire_s, point.deadline_s)
        began = self._clock.now()
        self.stats.active_users += 1
        scheduled = start_s
        backoff = Backoff()
        try:
            while (deadline is None or self._clock.now() < deadline) and not point.tripped.is_set():
                if not budget.take():
                    break
                rid, request = source.take()
                record = self.new_record(
                    point=run.index,
                    id=rid,
                    scheduled_s=scheduled,
                    user=u,
                    dataset_prompt_tokens=request.expected_prompt_tokens,
                    pooling=Pooling.of(request),
                    group=request.group,
                )
                tasks.add(me)
                try:
                    await self.send(request, record)
                finally:
                    tasks.discard(me)
                if point.tripped.is_set() or point.halted.is_set():
                    break  # the point stops issuing: the breaker, or its own figures
                # after failures in a row the user waits longer than it thinks (failfast.Backoff)
                wait_s = max(load.think_time_s, backoff.after(record.outcome))
                scheduled = self._clock.now() + wait_s
                if wait_s and not await self.sleep_until(_before(scheduled, deadline)):
                    break
        finally:
            self.stats.active_users -= 1
            run.user_spans.append((began, self._clock.now()))

    async def _staged_users(self, point: PointState, load: StagedLoad, source: RequestSource) -> None:
        """A staged closed loop: each user (of the share) sends through its spans in turn
        (schedule.staged_user_spans), one request at a time; a span that begins while the user's
        last request is still in flight begins late, its first request's delay queue delay."""
        users = point.user_tasks = set()

        async def user(u: int, spans: list[UserSpan]) -> None:
            me = asyncio.current_task()
            assert me is not None
            users.add(me)
            try:
                for span in spans:
                    start_s = point.run.start_s + span.start_s
                    if not await self.sleep_until(start_s) or point.tripped.is_set() or point.halted.is_set():
                        return
                    retire_s = point.run.start_s + span.end_s
                    await self._user_sends(point, load, source, u, me, start_s, retire_s)
            finally:
                users.discard(me)

        every = staged_user_spans(load)
        tasks = [
            asyncio.ensure_future(user(u, spans)) for u, spans in enumerate(every) if point.share.mine(u) and spans
        ]
        try:
            if tasks:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
                for task in done:
                    if not task.cancelled() and (exc := task.exception()) is not None:
                        raise exc
        finally:
            for task in tasks:
                task.cancel()

    @staticmethod
    async def run_users(load: UsersLoad, share: Share, user: Callable[[int, float], Awaitable[None]]) -> None:
        """Every user of a closed-loop point (of ``share``) at once (``user(index, start offset)``:
        the global index and ramp time), until all end; the ones still running when this is
        cancelled are cancelled with it, and so are the others when one fails. A user cancelled
        alone (a waiting one, when the breaker stops the point) just ends: the others go on."""
        starts = enumerate(user_start_times(load))
        users = [asyncio.ensure_future(user(u, off)) for u, off in starts if share.mine(u)]
        try:
            if users:
                done, _ = await asyncio.wait(users, return_when=asyncio.FIRST_EXCEPTION)
                for task in done:
                    if not task.cancelled() and (exc := task.exception()) is not None:
                        raise exc
        finally:
            for task in users:
                task.cancel()

    async def _arrivals(self, point: PointState, load: RateLoad | StagedLoad, source: RequestSource) -> None:
        """Open loop, a rate's or a staged point's: each request scheduled at its arrival time
        whatever the responses (a late send is queue delay, never a moved schedule)."""
        one = self.in_slot(load, point.share)
        if isinstance(load, StagedLoad):
            times = staged_arrival_times(load, point.seed, point.stop)
        else:
            times = arrival_times(load, point.seed, point.stop)
        for i, offset in enumerate(times):
            if not point.share.mine(i):
                continue
            if not await self._arrive(point, offset):
                break
            self._open_loop_send(point, one, *source.take(), offset)
        await self._until_planned_end(point)

    async def _replay(self, point: PointState, load: ReplayLoad, source: TraceSource) -> None:
        """A trace's rows on its schedule (TraceSource.sends: built ahead, cut by --duration and
        --max-requests); the mean gap (for the planned end) is the schedule's over the rows sent.
        On the point's end the trace's tally of what was sent goes in its PointRun."""
        one = self.in_slot(load, point.share)
        first: float | None = None
        n = 0
        try:
            sends = source.sends(load, point.seed, point.stop, point.share)
            async with contextlib.aclosing(sends):  # a stop ends the builder thread at once
                async for item in sends:
                    # the mean gap over the global schedule (every worker's rows), as a rate's is
                    first = item.offset_s if first is None else first
                    n += 1
                    if n > 1:
                        point.mean_gap_s = (item.offset_s - first) / (n - 1)
                    if item.request is None:  # another worker's row: passed, counted as sent
                        source.sent(item.row)
                        continue
                    if not await self._arrive(point, item.offset_s):
                        break
                    source.sent(item.row)
                    self._open_loop_send(point, one, *source.issue(item.request), item.offset_s)
        finally:
            point.run.trace = source.tally
        await self._until_planned_end(point)

    async def _arrive(self, point: PointState, offset: float) -> bool:
        """Wait for an arrival's time; False: the point stops issuing (an interrupt, the breaker,
        its share of --max-requests spent)."""
        return await self.sleep_until(point.run.start_s + offset) and not point.tripped.is_set() and point.budget.take()

    def _open_loop_send(
        self,
        point: PointState,
        one: Callable[[Request, RequestRecord], Awaitable[None]],
        rid: int,
        request: Request,
        offset: float,
    ) -> None:
        run, tasks = point.run, point.tasks
        run.last_arrival_s = run.start_s + offset
        record = self.new_record(
            point=run.index,
            id=rid,
            scheduled_s=run.start_s + offset,
            dataset_prompt_tokens=request.expected_prompt_tokens,
            trace_row=request.trace_row,
            pooling=Pooling.of(request),
            group=request.group,
        )
        task = asyncio.ensure_future(one(request, record))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def _until_planned_end(self, point: PointState) -> None:
        # The load lasts its whole period even when the schedule's last arrival came earlier (a
        # low rate): the window ends there, and the point (with the server's scrapes) must too.
        planned = _planned_end_s(point)
        if planned is not None:
            await self.sleep_until(planned)

    def in_slot(
        self, load: RateLoad | ReplayLoad | StagedLoad, share: Share = Share()
    ) -> Callable[[Request, RequestRecord], Awaitable[None]]:
        """How an arrival is sent: at once, or (``max_concurrency``) after waiting for a slot; one
        still waiting when the point ends is a never-sent record. A worker holds its share of the
        slots (at least one)."""
        cap = share.of(load.max_concurrency)
        slots = asyncio.Semaphore(max(1, cap)) if cap is not None else None

        async def one(request: Request, record: RequestRecord) -> None:
            if slots is None:
                await self.send(request, record)
                return
            try:
                await slots.acquire()
            except asyncio.CancelledError:
                record.outcome = Outcome.NOT_SENT
                record.closed_s = self._clock.now()
                record.error = "still waiting for a concurrency slot when the point ended"
                self._finish(record)
                raise
            try:
                await self.send(request, record)
            finally:
                slots.release()

        return one


def stopped_window(run: PointRun) -> None:
    """A point the breaker (or its own figures) stopped during its ramp-up or warm-up has an empty
    window where its load stopped (never one that ends before it starts)."""
    if run.stopped_early is not None or run.auto_stop is not None:
        run.window_start_s = min(run.window_start_s, run.load_end_s)


def _before(t: float, deadline: float | None) -> float:
    """``t``, or the deadline if that comes first (a user past it issues nothing more)."""
    return t if deadline is None else min(t, deadline)


def new_run(index: int, load: LoadPoint, stop: StopConfig, start: float) -> PointRun:
    """A point's span as it starts: the load and window ends are set when it ends."""
    ramp_end = start + ramp_up_s(load)
    return PointRun(
        index=index,
        load=load,
        start_s=start,
        ramp_end_s=ramp_end,
        window_start_s=ramp_end + stop.warmup_s,
        load_end_s=start,
        end_s=start,
    )


def _deadline_s(run: PointRun, stop: StopConfig) -> float | None:
    """When no new request may start (None: the point ends by ``max_requests`` or its schedule)."""
    return run.start_s + stop.duration_s if stop.duration_s is not None else None


def _planned_end_s(point: PointState) -> float | None:
    """Where a point's load ends by plan: the deadline; without one, open loop ends one mean gap
    after its last arrival (N arrivals span N gaps); closed loop has no plan (its last reply)."""
    run = point.run
    if point.stop.duration_s is not None:
        return run.start_s + point.stop.duration_s
    if point.mean_gap_s is not None and run.last_arrival_s is not None:
        return run.last_arrival_s + point.mean_gap_s
    return None


def _mean_gap_s(load: LoadPoint) -> float | None:
    """A rate's mean gap; a replay's is set from its schedule as it goes (_replay); closed loop has none."""
    return 1.0 / load.rate_per_s if isinstance(load, RateLoad) else None


class _Budget:
    """Counts issued requests against ``max_requests`` (None = unbounded): a worker's share."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.issued = 0

    def take(self) -> bool:
        if self.limit is not None and self.issued >= self.limit:
            return False
        self.issued += 1
        return True


@dataclass
class PointState:
    """One point as it runs: its span, how it stops, and what its requests are drawn from."""

    run: PointRun
    stop: StopConfig
    seed: int
    deadline_s: float | None
    budget: _Budget
    source: RequestSource | SessionSource | TraceSource | ProgramSource
    share: Share = Share()  # the part of the global schedule this generator runs
    mean_gap_s: float | None = None  # open loop: the schedule's mean gap between arrivals
    tasks: set[asyncio.Future[Any]] = field(default_factory=set)  # requests in flight
    breaker: CircuitBreaker = field(default_factory=CircuitBreaker)  # stops a point the server fails
    tripped: asyncio.Event = field(default_factory=asyncio.Event)  # set when the breaker trips
    monitor: PointMonitor | None = None  # autostop: judges the point by its own figures (autostop.py)
    halted: asyncio.Event = field(default_factory=asyncio.Event)  # set when the monitor stops the point
    # a closed loop's users (_users), each sending inline; None: the point's sends are tasks of their own
    user_tasks: set[asyncio.Task[Any]] | None = None
