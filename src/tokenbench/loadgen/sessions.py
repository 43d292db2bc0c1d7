"""Multi-turn sessions under a load point: the load generator's conversations (``--multi-turn``).

A conversation sends its turns one after another. Turn k's request carries the whole history: the
system prompt, the earlier user turns and **the server's own replies** (the text it streamed,
which the client keeps for session records), then turn k's user text; on the completions API the
same history is one prompt (Request.as_prompt_text). Between a reply and the next turn the user
thinks ``--turn-think-time`` (fixed, or exponential with that mean); the next turn is scheduled
then (its queue delay counts from there).

- Closed loop (users): each user runs one conversation at a time, turn after turn, then waits
  ``--think-time`` and takes the next conversation: think time is the gap between a user's
  conversations, turn think time the gap inside one. A user whose conversations end at a failed
  turn again and again backs off before the next (failfast.Backoff), as a single-turn user does.
- Open loop (rate): conversations *start* at the rate's arrival times; each then proceeds turn
  after turn whatever the other conversations do. ``--max-concurrency`` caps requests in flight.

A conversation ends completed, at a failed turn (recorded, ``ended_by_error``), when its next
prompt (history + user text) would exceed ``--max-history-tokens`` or, with its reply, the
server's max model length when known (``ended_by_history_limit``: that turn is never sent, so it
has no record), or by the point's stop rules (deadline: no new turn starts after it;
max-requests counts turns; interrupt), counted ``ended_by_stop``. Every turn sent is one record,
as every request is (loadgen/__init__.py).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tokenbench.config import LoadPoint, RateLoad, ReplayLoad, SessionConfig, StopConfig, UsersLoad
from tokenbench.datasets.sessions import Conversation, Turn
from tokenbench.errors import BadInput
from tokenbench.loadgen.failfast import Backoff
from tokenbench.loadgen.schedule import Share, arrival_times
from tokenbench.loadgen.source import SessionDeal
from tokenbench.loadgen.stats import LiveStats
from tokenbench.records import Outcome, Request, RequestRecord, SessionTurn

Send = Callable[[Request, RequestRecord], Awaitable[None]]


class Driver(Protocol):
    """What the session driver needs of a load generator (loadgen.LoadGenerator is the one): its
    clock, its records (each written once) and sends, its slots and its users. The load generator
    imports this module, never the reverse."""

    @property
    def stats(self) -> LiveStats: ...

    @property
    def interrupted(self) -> bool: ...

    def now(self) -> float: ...

    async def sleep_until(self, t: float) -> bool: ...

    def new_record(self, **fields: Any) -> RequestRecord: ...

    async def send(self, request: Request, record: RequestRecord) -> None: ...

    def in_slot(self, load: RateLoad | ReplayLoad, share: Share) -> Send: ...

    async def run_users(self, load: UsersLoad, share: Share, user: Callable[[int, float], Awaitable[None]]) -> None: ...


class Span(Protocol):
    """A point's span as the session driver writes it (loadgen.PointRun)."""

    index: int
    start_s: float
    user_spans: list[tuple[float, float]]
    sessions: SessionTally | None
    last_arrival_s: float | None


class Budget(Protocol):
    """Requests issued against ``max_requests`` (None: unbounded)."""

    limit: int | None
    issued: int

    def take(self) -> bool: ...


class Point(Protocol):
    """One point as it runs (loadgen.PointState), as the session driver reads it."""

    @property
    def run(self) -> Span: ...

    @property
    def stop(self) -> StopConfig: ...

    @property
    def seed(self) -> int: ...

    @property
    def deadline_s(self) -> float | None: ...

    @property
    def budget(self) -> Budget: ...

    @property
    def source(self) -> object: ...  # what the point draws from: each driver checks it is its kind

    @property
    def share(self) -> Share: ...

    @property
    def tasks(self) -> set[asyncio.Future[Any]]: ...

    @property
    def tripped(self) -> asyncio.Event: ...  # the point's circuit breaker tripped (failfast.py)


@dataclass
class SessionTally:
    """A point's conversations by how they ended (results' ``sessions``, over the whole point)."""

    started: int = 0
    completed: int = 0
    ended_by_error: int = 0
    ended_by_history_limit: int = 0
    ended_by_stop: int = 0


class SessionSource(SessionDeal[Conversation]):
    """Hands out conversations in order, cycling (loadgen.source.SessionDeal: where each point
    starts, the run's unique request and session ids)."""

    def __init__(
        self,
        conversations: list[Conversation],
        count: Callable[[str], int],
        settings: SessionConfig,
        max_model_len: int | None = None,
        id_prefix: str = "s",
        lane: Share = Share(),
    ) -> None:
        if not conversations:
            raise BadInput("the dataset produced no conversations")
        super().__init__(conversations, id_prefix, lane)
        self.count = count
        self.settings = settings
        self.max_model_len = max_model_len

    @property
    def conversations(self) -> list[Conversation]:
        return self._items

    def next_conversation(self) -> tuple[str, Conversation]:
        return self.next_session()

    def over_limit(self, history_tokens: int, turn: Turn) -> bool:
        """Whether the turn's prompt would exceed --max-history-tokens, or prompt and reply the
        server's max model length."""
        prompt = history_tokens + turn.tokens
        limit = self.settings.max_history_tokens
        if limit is not None and prompt > limit:
            return True
        return self.max_model_len is not None and prompt + turn.max_tokens > self.max_model_len

    def think_s(self, rng: random.Random) -> float:
        mean = self.settings.turn_think_time_s
        if mean <= 0:
            return 0.0
        return rng.expovariate(1.0 / mean) if self.settings.turn_think_dist == "exponential" else mean


async def run_sessions(gen: Driver, point: Point, load: LoadPoint) -> None:
    """The point's conversations: per user (closed loop) or started at the rate (open loop)."""
    point.run.sessions = SessionTally()
    if isinstance(load, UsersLoad):
        await _users(gen, point, load)
    elif isinstance(load, RateLoad):
        await _starts(gen, point, load)
    else:
        raise BadInput("--multi-turn runs under --users or --rate, not a trace replay or a staged point")


@dataclass
class _Conv:
    """One conversation as it runs: who sends it, how, and its history so far."""

    sid: str
    conversation: Conversation
    user: int | None
    send: Send
    history: list[dict[str, Any]] = field(default_factory=list)
    history_tokens: int = 0


async def _users(gen: Driver, point: Point, load: UsersLoad) -> None:
    run, source = point.run, point.source
    assert isinstance(source, SessionSource)

    async def user(u: int, offset_s: float) -> None:
        scheduled = run.start_s + offset_s  # its ramp time: a late wake is queue delay, not hidden
        if not await gen.sleep_until(scheduled):
            return
        began = gen.now()
        gen.stats.active_users += 1
        rng = random.Random(f"{point.seed}-{u}")
        backoff = Backoff()
        try:
            while not _stopped(gen, point):
                sid, conversation = source.next_conversation()
                last = await _converse(gen, point, _Conv(sid, conversation, u, gen.send), scheduled, rng)
                wait_s = max(load.think_time_s, backoff.after(last) if last is not None else 0.0)
                scheduled = gen.now() + wait_s
                deadline = point.deadline_s
                if wait_s and not await gen.sleep_until(scheduled if deadline is None else min(scheduled, deadline)):
                    break
        finally:
            gen.stats.active_users -= 1
            run.user_spans.append((began, gen.now()))

    await gen.run_users(load, point.share, user)


async def _starts(gen: Driver, point: Point, load: RateLoad) -> None:
    """New conversations at the rate's arrival times; then wait for them until the deadline (the
    drain that follows lets their last turns finish). With a duration the load lasts all of it,
    as a rate's does (loadgen._arrivals): the window ends there, and so must the point."""
    run, source, tasks = point.run, point.source, point.tasks
    assert isinstance(source, SessionSource)
    send = gen.in_slot(load, point.share)
    # one stream of think times per worker (one worker: the seed's own, as without --workers)
    rng = random.Random(point.seed if point.share.count == 1 else f"{point.seed}-w{point.share.index}")
    for i, offset in enumerate(arrival_times(load, point.seed, point.stop)):
        if not point.share.mine(i):
            continue
        if not await gen.sleep_until(run.start_s + offset) or _stopped(gen, point):
            break
        sid, conversation = source.next_conversation()
        # its first turn is scheduled at the arrival: a late start shows as queue delay
        conv = _Conv(sid, conversation, None, send)
        task = asyncio.ensure_future(_converse(gen, point, conv, run.start_s + offset, rng))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    pending = {t for t in tasks if not t.done()}
    if pending:
        limit = None if point.deadline_s is None else max(0.0, point.deadline_s - gen.now())
        await asyncio.wait(pending, timeout=limit)
    if point.deadline_s is not None:
        await gen.sleep_until(point.deadline_s)


def _stopped(gen: Driver, point: Point) -> bool:
    """No new turn: interrupted, the circuit breaker tripped, past the deadline, or max-requests issued."""
    budget = point.budget
    return (
        gen.interrupted
        or point.tripped.is_set()
        or (point.deadline_s is not None and gen.now() >= point.deadline_s)
        or (budget.limit is not None and budget.issued >= budget.limit)
    )


async def _converse(gen: Driver, point: Point, conv: _Conv, scheduled_s: float, rng: random.Random) -> Outcome | None:
    """One conversation, turn after turn; its end is tallied (a cancelled one as stopped). The
    outcome of its last turn sent (None: none was)."""
    source, tally = point.source, point.run.sessions
    assert isinstance(source, SessionSource) and tally is not None
    c = conv.conversation
    if c.system:
        conv.history.append({"role": "system", "content": c.system})
    conv.history_tokens = c.system_tokens
    ended = "ended_by_stop"
    started = False
    last: Outcome | None = None
    try:
        for k, turn in enumerate(c.turns):
            if k > 0:
                scheduled_s = gen.now() + source.think_s(rng)
                if not await gen.sleep_until(scheduled_s):
                    return last
            if _stopped(gen, point):
                return last
            started = True
            if source.over_limit(conv.history_tokens, turn):
                ended = "ended_by_history_limit"
                return last
            point.budget.take()
            record = await _turn(gen, point, conv, k, scheduled_s)
            last = record.outcome
            if not record.ok:
                ended = "ended_by_error"
                return last
            reply = record.output_text or ""
            conv.history += [{"role": "user", "content": turn.text}, {"role": "assistant", "content": reply}]
            conv.history_tokens += turn.tokens + (source.count(reply) if reply else 0)
            if record.tool_messages and source.settings.tool_result is not None:
                conv.history_tokens += _tool_result(conv, record.tool_messages, source.settings.tool_result, source)
        ended = "completed"
        return last
    finally:
        if started:
            tally.started += 1
            setattr(tally, ended, getattr(tally, ended) + 1)


def _tool_result(conv: _Conv, calls: tuple[dict[str, object], ...], result: str, source: SessionSource) -> int:
    """the reply's tool calls on its assistant message, then one ``tool`` message per call
    with the canned --tool-result (OpenAI's shape): the next turn continues after them. The tokens
    the history grew by (the calls' arguments and the results)."""
    conv.history[-1] = {**conv.history[-1], "content": conv.history[-1]["content"] or None, "tool_calls": list(calls)}
    conv.history += [{"role": "tool", "tool_call_id": call["id"], "content": result} for call in calls]
    arguments = "".join(str(call.get("function", {}).get("arguments", "")) for call in calls)  # type: ignore[attr-defined]
    return len(calls) * source.count(result) + (source.count(arguments) if arguments else 0)


async def _turn(gen: Driver, point: Point, conv: _Conv, k: int, scheduled_s: float) -> RequestRecord:
    """Send turn ``k`` with the history so far; its record (written when it ends)."""
    source = point.source
    assert isinstance(source, SessionSource)
    c = conv.conversation
    turn = c.turns[k]
    session = SessionTurn(conv.sid, k, conv.history_tokens)
    request = Request(
        messages=(*conv.history, {"role": "user", "content": turn.text}),
        max_tokens=turn.max_tokens,
        expected_prompt_tokens=conv.history_tokens + turn.tokens,
        session=session,
        # routing: the conversation's group, its tenant header after the session's
        headers=((source.settings.header, conv.sid), *c.headers),
        images=turn.images,  # images: this turn's own
        image_pixels=turn.image_pixels,
        group=c.group,
    )
    record = gen.new_record(
        point=point.run.index,
        id=source.next_id(),
        scheduled_s=scheduled_s,
        user=conv.user,
        dataset_prompt_tokens=request.expected_prompt_tokens,
        session=session,
        group=request.group,
    )
    await conv.send(request, record)
    return record
