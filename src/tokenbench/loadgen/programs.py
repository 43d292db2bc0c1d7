"""Agent programs under a load point (``--dataset programs``): each session a graph of dependent calls.

A session starts at its load's time: a closed-loop user's next (``--users N``: N sessions at
once, each user's next one ``--think-time`` after its last ends), a rate's arrival (``--rate R``:
sessions started per second), or its own start on the trace's clock (a replay: ``--replay-speed``
divides it). Within a session each call is sent when every parent's anchor (its end, its start
or its first token) plus the edge's delay has passed, and no sooner than its own offset from the
session's start; recorded waits are multiplied by ``--program-time-scale``. The call's prompt
then takes its parents' live replies (or the recorded ones: ``--program-output recorded``).

A call's end is its stream's end (``closed_s``: the reply complete, as an agent sees it, usage
and end marker included), not its last content chunk. The time the parents allowed is the record's ``scheduled_s`` (and ``program_ready_s``): a call
sent later, the loop busy or no slot free (``--max-concurrency``), shows the lag as its queue
delay, as an open-loop request's. A parent's start and first token are watched while it streams
(every ``WATCH_S``): a child waiting on them may lag by up to that, and the lag is measured.

A call whose parent failed is never sent (it has no record): its session ends by error. No session
starts after the deadline; one under way goes on within the drain (``--drain-timeout``), so a
point's measured sessions are not only its short ones. A session is counted by how it ended
(``ProgramTally``): completed, by error, or by the point's stop rules (max-requests and an
interrupt send no new call; the drain's end cancels what is left).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tokenbench.config import DatasetConfig, LoadPoint, RateLoad, ReplayLoad, StagedLoad, UsersLoad
from tokenbench.datasets.programs.model import Call, Program
from tokenbench.datasets.programs.prompts import Drawn, Messages, ProgramPrompts, Reply, filled
from tokenbench.datasets.tokenizers import Tokenizer
from tokenbench.errors import BadInput
from tokenbench.loadgen.failfast import Backoff
from tokenbench.loadgen.schedule import Share, arrival_times
from tokenbench.loadgen.sessions import Driver, Point, Send, Span
from tokenbench.loadgen.source import SessionDeal
from tokenbench.records import Outcome, ProgramCall, Request, RequestRecord, failed

DRAWN_PROGRAMS = 64  # programs whose drawn prompts are kept (a Weka session's: ~15 MB of text)
WATCH_S = 0.001  # how often a parent's start and first token are looked for, for children waiting on them


@dataclass(frozen=True)
class ProgramSettings:
    output: str = "live"  # "live" | "recorded"
    time_scale: float = 1.0
    max_tokens: int | None = None  # --output-tokens: every call's reply length (None: each call's own)


@dataclass
class ProgramTally:
    """A point's sessions by how they ended (results' ``programs.sessions``)."""

    started: int = 0
    completed: int = 0
    ended_by_error: int = 0
    ended_by_stop: int = 0
    calls_not_sent: int = 0  # calls of sessions that ended before their parents allowed them


class ProgramSource(SessionDeal[Program]):
    """Hands out programs in order, cycling (loadgen.source.SessionDeal: where each point starts,
    the run's unique request and session ids); a replay takes each once, in the order of its start."""

    def __init__(
        self,
        programs: list[Program],
        prompts: ProgramPrompts,
        settings: ProgramSettings,
        id_prefix: str = "p",
        lane: Share = Share(),
    ) -> None:
        if not programs:
            raise BadInput("the dataset produced no agent session")
        super().__init__(programs, id_prefix, lane)
        self.prompts = prompts
        self.settings = settings
        self._drawn: dict[str, dict[str, Drawn]] = {}
        # calls some child waits on by their start or first token: watched while they stream
        self._watched = {p.id: {e.parent for c in p.calls for e in c.parents if e.anchor != "end"} for p in programs}

    @property
    def programs(self) -> list[Program]:
        return self._items

    def next_program(self) -> tuple[str, Program]:
        return self.next_session()

    def watched(self, program: Program) -> set[str]:
        return self._watched[program.id]

    def drawn(self, program: Program) -> dict[str, Drawn]:
        """The program's calls' static prompts, drawn once and kept for the next session of it (the
        most recent ``DRAWN_PROGRAMS``): drawing a long session's blocks takes ~0.1 s of the loop."""
        found = self._drawn.pop(program.id, None)
        if found is None:
            found = {c.id: self.prompts.draw(c) for c in program.calls}
        self._drawn[program.id] = found
        while len(self._drawn) > DRAWN_PROGRAMS:
            self._drawn.pop(next(iter(self._drawn)))
        return found

    def prime(self) -> None:
        """Draw the programs a point starts with before it starts (as many as are kept)."""
        for p in self._items[:DRAWN_PROGRAMS]:
            self.drawn(p)

    def replay_starts(self, load: ReplayLoad) -> list[tuple[float, Program]]:
        """Each program once at its start on the recording's clock, those in ``[--replay-start,
        --replay-end)`` of it, from the first of them, scaled (``--program-time-scale``) and sped."""
        lo, hi = load.start_s or 0.0, load.end_s
        order = sorted((p for p in self._items if p.start_s >= lo and (hi is None or p.start_s < hi)), key=_start)
        if not order:
            raise BadInput(
                f"no agent session starts in the replay's window [{lo:g}, {hi if hi is not None else 'end'}) s"
            )
        first = order[0].start_s
        return [((p.start_s - first) * self.settings.time_scale / load.speed, p) for p in order]


class ProgramSpan(Span, Protocol):
    programs: ProgramTally | None


class ProgramPoint(Point, Protocol):
    @property
    def run(self) -> ProgramSpan: ...


def program_source(
    programs: list[Program],
    dataset: DatasetConfig,
    tokenizer: Tokenizer | None,
    count: Callable[[str], int],
    id_prefix: str = "p",
    lane: Share = Share(),
) -> ProgramSource:
    """The programs to run, their prompts drawn with ``tokenizer`` (else estimated), as the dataset
    says. A block's text depends on its id alone (not the run's seed): every worker, and every run
    of the same file, sends the same prompts."""
    settings = ProgramSettings(dataset.program_output, dataset.program_time_scale, dataset.output_tokens)
    return ProgramSource(programs, ProgramPrompts(tokenizer, count), settings, id_prefix, lane)


def _start(p: Program) -> float:
    return p.start_s


async def run_programs(gen: Driver, point: ProgramPoint, load: LoadPoint) -> None:
    source = point.source
    assert isinstance(source, ProgramSource)
    tally = ProgramTally()
    point.run.programs = tally
    if isinstance(load, UsersLoad):
        await _users(gen, point, load, source, tally)
    elif isinstance(load, StagedLoad):
        raise BadInput("agent programs run under --users, --rate or their own clock: not --stages/--load-shape")
    else:
        await _starts(gen, point, load, source, tally)


async def _users(gen: Driver, point: Point, load: UsersLoad, source: ProgramSource, tally: ProgramTally) -> None:
    run = point.run

    async def user(u: int, offset_s: float) -> None:
        scheduled = run.start_s + offset_s
        if not await gen.sleep_until(scheduled):
            return
        began = gen.now()
        gen.stats.active_users += 1
        backoff = Backoff()
        try:
            while not _stopped(gen, point):
                sid, program = source.next_program()
                last = await _session(gen, point, _Session(sid, program, u, gen.send, scheduled), source, tally)
                wait_s = max(load.think_time_s, backoff.after(last) if last is not None else 0.0)
                scheduled = gen.now() + wait_s
                deadline = point.deadline_s
                if wait_s and not await gen.sleep_until(scheduled if deadline is None else min(scheduled, deadline)):
                    break
        finally:
            gen.stats.active_users -= 1
            run.user_spans.append((began, gen.now()))

    await gen.run_users(load, point.share, user)


async def _starts(
    gen: Driver, point: Point, load: RateLoad | ReplayLoad, source: ProgramSource, tally: ProgramTally
) -> None:
    """Sessions started at the rate's arrivals, or (a replay) at their own starts; then waited for
    until the deadline (the drain that follows lets their last calls finish)."""
    run, tasks = point.run, point.tasks
    send = gen.in_slot(load, point.share)
    if isinstance(load, RateLoad):
        starts: Any = ((off, None) for off in arrival_times(load, point.seed, point.stop))
    else:
        starts = iter(source.replay_starts(load))
    for i, (offset, program) in enumerate(starts):
        if not point.share.mine(i):
            continue
        at = run.start_s + offset
        if not await gen.sleep_until(at) or _stopped(gen, point):
            break
        if program is None:
            sid, program = source.next_program()
        else:
            sid = source.session_id()
        run.last_arrival_s = at
        task = asyncio.ensure_future(_session(gen, point, _Session(sid, program, None, send, at), source, tally))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    pending = {t for t in tasks if not t.done()}
    if pending:
        limit = None if point.deadline_s is None else max(0.0, point.deadline_s - gen.now())
        await asyncio.wait(pending, timeout=limit)
    if point.deadline_s is not None:
        await gen.sleep_until(point.deadline_s)


def _stopped(gen: Driver, point: Point) -> bool:
    """No new session: the calls' cut, or past the deadline."""
    return _cut(gen, point) or (point.deadline_s is not None and gen.now() >= point.deadline_s)


def _cut(gen: Driver, point: Point) -> bool:
    """No new call, even in a session under way: interrupted, the breaker tripped, or
    max-requests issued. (A session started before the deadline goes on after it, within the
    drain: cutting it there would leave only the short sessions of a point measured.)"""
    budget = point.budget
    return gen.interrupted or point.tripped.is_set() or (budget.limit is not None and budget.issued >= budget.limit)


@dataclass
class _Session:
    sid: str
    program: Program
    user: int | None
    send: Send
    start_s: float  # its scheduled start on the run clock


@dataclass
class _Sent:
    """A call as its children see it: its record (once created), its reply and prompt, and events
    set when it was sent, when its first token came, and when it ended (ok or not)."""

    record: RequestRecord | None = None
    messages: Messages = ()
    tokens: int = 0
    reply: Reply | None = None
    sent: asyncio.Event = field(default_factory=asyncio.Event)
    first: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)


async def _session(
    gen: Driver, point: Point, s: _Session, source: ProgramSource, tally: ProgramTally
) -> Outcome | None:
    """One session's calls, each a task waiting on its parents; its end tallied. The outcome of
    the last call that ended (None: none was sent)."""
    calls = {c.id: _Sent() for c in s.program.calls}
    watched = source.watched(s.program)
    drawn = source.drawn(s.program)
    tally.started += 1
    tasks = [
        asyncio.ensure_future(_call(gen, point, s, c, calls, drawn[c.id], c.id in watched, source))
        for c in s.program.calls
    ]
    try:
        results = await asyncio.gather(*tasks)
    except asyncio.CancelledError:
        for t in tasks:
            t.cancel()
        tally.ended_by_stop += 1
        raise
    tally.calls_not_sent += sum(1 for r in results if r is None)
    records = [c.record for c in calls.values() if c.record is not None]
    if any(failed(r.outcome) for r in records):
        tally.ended_by_error += 1
    elif len(records) == len(calls) and all(r.ok for r in records):
        tally.completed += 1
    else:
        tally.ended_by_stop += 1
    ended = [r for r in records if r.closed_s is not None]
    return max(ended, key=lambda r: r.closed_s or 0.0).outcome if ended else None


async def _call(
    gen: Driver,
    point: Point,
    s: _Session,
    call: Call,
    calls: dict[str, _Sent],
    drawn: Drawn,
    watched: bool,
    source: ProgramSource,
) -> RequestRecord | None:
    """Wait for the parents, then send the call; None when it is never sent (a parent failed,
    or the point stopped first)."""
    me = calls[call.id]
    try:
        scale = source.settings.time_scale
        ready = s.start_s + call.not_before_s * scale
        after = None
        for edge in call.parents:
            parent = calls[edge.parent]
            at = await _anchor(parent, edge.anchor)
            if at is None:
                return None  # the parent failed: no reply to build on
            allowed = at + edge.delay_s * scale
            if allowed >= ready:
                ready, after = allowed, edge
        if not await gen.sleep_until(ready) or _cut(gen, point):
            return None
        replies = {e.parent: calls[e.parent].reply for e in call.parents}
        prompts = {e.parent: calls[e.parent].messages for e in call.parents}
        tokens = {e.parent: calls[e.parent].tokens for e in call.parents}
        messages, total, prefix = filled(drawn, replies, prompts, tokens)  # type: ignore[arg-type]
        me.messages, me.tokens = messages, total
        point.budget.take()
        request = Request(
            messages=messages,
            max_tokens=source.settings.max_tokens or call.max_tokens,
            expected_prompt_tokens=total,
            headers=(("X-Session-ID", s.sid),),
        )
        record = gen.new_record(
            point=point.run.index,
            id=source.next_id(),
            scheduled_s=ready,
            user=s.user,
            dataset_prompt_tokens=total,
            program=ProgramCall(
                program_session=s.sid,
                program_id=s.program.id,
                program_call=call.id,
                program_depth=call.depth,
                program_role=call.role,
                program_start_s=s.start_s,
                program_ready_s=ready,
                program_after=after.parent if after is not None else None,
                program_anchor=after.anchor if after is not None else None,
                program_delay_s=after.delay_s * scale if after is not None else None,
                program_tool_s=after.tool_s * scale if after is not None else None,
                program_parents=tuple(e.parent for e in call.parents),
                program_prefix_tokens=prefix,
                program_calls=len(s.program.calls),
            ),
        )
        me.record = record
        sending = asyncio.ensure_future(s.send(request, record))
        if watched:
            await _watch(sending, record, me)
        await sending
        if record.ok:
            if source.settings.output == "recorded":
                me.reply = source.prompts.recorded_reply(call)
            else:
                text = record.output_text or ""
                n = record.output_tokens if record.output_tokens is not None else source.prompts.count(text)
                me.reply = Reply(text, n)
        return record
    finally:
        me.sent.set()
        me.first.set()
        me.ended.set()


async def _watch(sending: asyncio.Future[None], record: RequestRecord, me: _Sent) -> None:
    """Set the call's sent and first-token events as they happen, until its send ends."""
    while not sending.done():
        if not me.sent.is_set() and record.sent_s is not None:
            me.sent.set()
        if not me.first.is_set() and record.chunk_times_s:
            me.first.set()
        if me.sent.is_set() and me.first.is_set():
            break
        await asyncio.wait({sending}, timeout=WATCH_S)


async def _anchor(parent: _Sent, anchor: str) -> float | None:
    """When the parent's anchor happened (run clock); None: the parent failed or was never sent."""
    event = {"start": parent.sent, "first_token": parent.first, "end": parent.ended}[anchor]
    await event.wait()
    r = parent.record
    if r is None:
        return None
    if anchor == "start":
        return r.sent_s
    if anchor == "first_token":
        return r.chunk_times_s[0] if r.chunk_times_s else None
    return r.closed_s if r.ok else None  # its reply complete: the stream ended (usage, [DONE])
