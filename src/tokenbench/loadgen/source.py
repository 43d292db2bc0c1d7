"""Where a run's requests come from, in order: a point's sequence, fixed by its load and the seed
(``RequestSource``), and a trace's rows on a replay's schedule, built as the replay nears them
(``TraceSource``)."""

from __future__ import annotations

import asyncio
import itertools
import json
import queue
import threading
import zlib
from collections import deque
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from tokenbench.config import LoadPoint, ReplayLoad, StopConfig
from tokenbench.datasets import with_prefix
from tokenbench.datasets.pooling import group_size, pooled
from tokenbench.datasets.tokenizers import Tokenizer
from tokenbench.datasets.trace_requests import TracePlan, TraceRequests, TraceTally
from tokenbench.datasets.traces import TraceDigest, TraceRow
from tokenbench.errors import BadInput
from tokenbench.loadgen.schedule import ReplaySend, Share, replay_offsets
from tokenbench.records import Request


def start_index(load: LoadPoint, seed: int, n: int) -> int:
    """Where a point starts in a list of ``n`` prompts (or conversations): fixed by its load and
    the seed, whatever earlier points used."""
    key = json.dumps([seed, load.model_dump(mode="json")], sort_keys=True).encode()
    return zlib.crc32(key) % n


T = TypeVar("T")


class SessionDeal(Generic[T]):
    """Sessions (multi-turn conversations, agent programs) dealt in order, cycling: each point
    starts at an offset fixed by its load and the seed (as RequestSource does), a worker taking
    every ``share.count``-th from ``share.index``. Request ids and session ids
    (``{id_prefix}-{n}``: a per-run prefix, so two runs' sessions never share an id) are unique
    per run, a worker's ``lane`` keeping its own apart from the others'."""

    def __init__(self, items: list[T], id_prefix: str, lane: Share) -> None:
        self._items = items
        self._prefix = id_prefix
        self._cursor = 0
        self._stride = 1
        self._lane = lane
        self._next_id = lane.index
        self._next_session = lane.index

    @property
    def items(self) -> list[T]:
        """The sessions dealt, in order (``run --dry-run`` reads their lengths)."""
        return self._items

    @property
    def id_prefix(self) -> str:
        return self._prefix

    def start_point(self, load: LoadPoint, seed: int, share: Share = Share()) -> None:
        self._cursor = start_index(load, seed, len(self._items)) + share.index
        self._stride = share.count

    def next_session(self) -> tuple[str, T]:
        item = self._items[self._cursor % len(self._items)]
        self._cursor += self._stride
        return self.session_id(), item

    def session_id(self) -> str:
        sid = f"{self._prefix}-{self._next_session}"
        self._next_session += self._lane.count
        return sid

    def next_id(self) -> int:
        i = self._next_id
        self._next_id += self._lane.count
        return i


class RequestSource:
    """Hands out Requests in order from a finite list, cycling; ids are unique per run.

    Each load point draws its own sequence: it starts at an offset fixed by the load and the seed
    (``start_point``), never where the previous point stopped. So "4 users" gets the same prompts
    in every configuration and every run with that seed, however many requests earlier points
    completed (which depends on the server's speed), and different loads start at different
    places in the list (fewer repeats between points for the prefix cache to catch).

    With ``unique_nonce`` every request gets a prefix no earlier request or run had, so neither a
    cycled prompt nor a repeated run hits the server's prefix cache.

    A worker (``--workers``) holds a copy: its ``lane`` keeps its ids apart from the others' (ids
    ``lane.index``, ``+ lane.count``, ...), and a point's ``share`` makes it take every
    ``share.count``-th prompt from ``share.index`` on, so arrival i gets the prompt it would get
    from one process.
    """

    def __init__(self, requests: list[Request], unique_nonce: str | None = None, lane: Share = Share()) -> None:
        if not requests:
            raise BadInput("the dataset produced no requests")
        self._requests = requests
        self._nonce = unique_nonce
        self._next_id = lane.index
        self._id_step = lane.count
        self._cursor = 0  # index of the next prompt in the list
        self._stride = 1

    @property
    def requests(self) -> list[Request]:
        return self._requests

    @property
    def unique_nonce(self) -> str | None:
        return self._nonce

    def start_point(self, load: LoadPoint, seed: int, share: Share = Share()) -> None:
        self._cursor = start_index(load, seed, len(self._requests)) + share.index
        self._stride = share.count

    def take(self) -> tuple[int, Request]:
        request = self._requests[self._cursor % len(self._requests)]
        self._cursor += self._stride
        return self.issue(request)

    def issue(self, request: Request) -> tuple[int, Request]:
        """``request`` (one of the list's, e.g. a trace row's) with the next id."""
        i = self._next_id
        self._next_id += self._id_step
        if self._nonce is not None:
            request = with_prefix(request, f"[{self._nonce}-{i}] ")
        return i, request


# Requests built ahead of a replay's schedule, at most: the rows in flight are what a replay holds
# (a Mooncake row's prompt is ~70 KB of text, its longest ~700 KB).
LOOKAHEAD = 64


@dataclass(frozen=True, slots=True)
class ReplayItem:
    """One row of a replay's global schedule: its offset from the point's start, the row, and its
    request when this generator sends it (None: another worker's)."""

    offset_s: float
    row: TraceRow
    request: Request | None


class _End:
    """The schedule ended (``error``: it could not go on: a malformed row, say)."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


class TraceSource:
    """A replay's requests: the trace's rows in the point's window, in send order, each built into
    a Request by a thread that keeps at most ``LOOKAHEAD`` of them ahead of the schedule, so the
    first send waits for one row, not the window, and memory holds the rows in flight, not the
    trace. The event loop never builds a prompt (a long one would stall every stream's timing).

    A point's schedule is cut where the load ends: ``--duration`` (rows whose offset is past it)
    and ``--max-requests`` (the global count). Rows the load generator sends (or passes, as
    another worker's) are told to ``sent``: counted in the point's ``tally`` with the prefix reuse
    they bring, so the tally is over the rows sent, not those built ahead. A worker (``lane``)
    keeps its ids apart from the others' as RequestSource does."""

    def __init__(self, plan: TracePlan, tokenizer: Tokenizer | None, lane: Share = Share()) -> None:
        self.plan = plan
        self.trace = TraceRequests(plan, tokenizer)
        self._next_id = lane.index
        self._id_step = lane.count
        self.tally: TraceTally | None = None  # the point's, once it is started
        self._ahead: _Ahead | None = None
        self.digest: TraceDigest | None = None  # the driver's: the file's sha256 and rows, on the side

    def start_point(self, load: LoadPoint, seed: int, share: Share = Share()) -> None:
        """Nothing: a replay's rows start at its window (``ready`` sets its schedule up)."""

    def ready(self, load: ReplayLoad, seed: int, stop: StopConfig, share: Share = Share()) -> None:
        """Before a point: its schedule set up and the first requests built, in the background."""
        self.close()
        self.tally = self.trace.new_tally()
        self._ahead = _Ahead(self._items(load, seed, stop, share, self.tally)).start()

    async def primed(self) -> None:
        """Wait (off the loop) until the point's first row is built: a gzipped trace is read up to
        the window first, and a point that started before its first row could be sent would show
        that read as every early row's lag."""
        if self._ahead is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._ahead.first.wait)

    async def sends(
        self, load: ReplayLoad, seed: int, stop: StopConfig, share: Share = Share()
    ) -> AsyncGenerator[ReplayItem, None]:
        """The point's items, in order, from the thread ``ready`` started (started now if not)."""
        if self._ahead is None:
            self.ready(load, seed, stop, share)
        ahead = self._ahead
        assert ahead is not None
        try:
            while (item := await ahead.get()) is not None:
                yield item
        finally:
            self.close()

    def items(self, load: ReplayLoad, seed: int, stop: StopConfig, share: Share = Share()) -> Iterator[ReplayItem]:
        """The point's items built inline, in order (a simulated replay: nothing waits on time)."""
        self.tally = self.trace.new_tally()
        return self._items(load, seed, stop, share, self.tally)

    def sent(self, row: TraceRow) -> None:
        """``row`` went out (this generator's send, or another worker's row passed)."""
        if self.tally is not None:
            self.trace.issue(self.tally, row)

    def issue(self, request: Request) -> tuple[int, Request]:
        i = self._next_id
        self._next_id += self._id_step
        return i, request

    def close(self) -> None:
        if self._ahead is not None:
            self._ahead.stop()
            self._ahead = None

    def schedule(
        self, load: ReplayLoad, seed: int, stop: StopConfig, tally: TraceTally
    ) -> Iterator[tuple[int, ReplaySend[TraceRow]]]:
        """The point's schedule, numbered, with no prompt built: the window's rows at their
        offsets, cut where the load ends (--duration, --max-requests). ``run --dry-run`` reads it."""
        rows = self.trace.rows(tally, load.start_s, load.end_s)
        duration, limit = stop.duration_s, stop.max_requests
        sends = replay_offsets(rows, load.speed, jitter_s=load.jitter_s, seed=seed)
        return itertools.takewhile(
            lambda x: (duration is None or x[1].offset_s < duration) and (limit is None or x[0] < limit),
            enumerate(sends),
        )

    def _items(
        self, load: ReplayLoad, seed: int, stop: StopConfig, share: Share, tally: TraceTally
    ) -> Iterator[ReplayItem]:
        kept = self.schedule(load, seed, stop, tally)
        if self.plan.pooling is None:
            for i, send in kept:
                yield ReplayItem(send.offset_s, send.row, self.trace.request(send.row) if share.mine(i) else None)
            return
        yield from self._pooled(kept, share, *self.plan.pooling)

    def _pooled(
        self, sends: Iterator[tuple[int, ReplaySend[TraceRow]]], share: Share, api: str, batch_size: int
    ) -> Iterator[ReplayItem]:
        """Pooling requests: row i's holds rows i..i+group-1's texts (the last rows' wrap to the
        first ones, as datasets.pooling does a list): built ``group`` rows behind the schedule."""
        group = group_size(api, batch_size)
        window: deque[tuple[int, ReplaySend[TraceRow], Request]] = deque()
        first: list[Request] = []

        def item(picked: list[Request]) -> ReplayItem:
            i, send, _ = window.popleft()
            return ReplayItem(send.offset_s, send.row, pooled(picked, api) if share.mine(i) else None)

        for i, send in sends:
            request = self.trace.request(send.row)
            if len(first) < group - 1:
                first.append(request)
            window.append((i, send, request))
            if len(window) == group:
                yield item([r for _, _, r in window])
        while window:
            picked = [r for _, _, r in window] + first
            while len(picked) < group:
                picked += first
            yield item(picked[:group])


class _Ahead:
    """Items of an iterator made by a thread, at most ``LOOKAHEAD`` built requests ahead of the
    one reading them (rows of other workers cost nothing to hold and do not count)."""

    def __init__(self, items: Iterator[ReplayItem]) -> None:
        self._items = items
        self._queue: queue.Queue[ReplayItem | _End] = queue.Queue()
        self._room = threading.Semaphore(LOOKAHEAD)
        self._stopped = threading.Event()
        self.first = threading.Event()  # the first item (or the end) is in the queue
        self._thread = threading.Thread()

    def start(self) -> _Ahead:
        self._thread = threading.Thread(target=self._fill, name="trace-ahead", daemon=True)
        self._thread.start()
        return self

    def _fill(self) -> None:
        try:
            for item in self._items:
                while item.request is not None and not self._room.acquire(timeout=0.1):
                    if self._stopped.is_set():
                        return
                if self._stopped.is_set():
                    return
                self._queue.put(item)
                self.first.set()
            self._queue.put(_End())
        except BaseException as exc:  # the reader raises it in its own thread
            self._queue.put(_End(exc))
        finally:
            self.first.set()  # the first item, or the end (primed waits for either)

    async def get(self) -> ReplayItem | None:
        """The next item (None: the schedule ended), waiting off the event loop when the thread
        is behind (the wait is the replay's lag, seen in the sends' queue delay)."""
        try:
            item = self._queue.get_nowait()
        except queue.Empty:
            item = await asyncio.get_running_loop().run_in_executor(None, self._queue.get)
        if isinstance(item, _End):
            self._queue.put(item)  # every later get ends too
            if item.error is not None:
                raise item.error
            return None
        if item.request is not None:
            self._room.release()
        return item

    def stop(self) -> None:
        """The thread stops at its next item (waited for: the next point's thread shares the
        prompt builder); a wait for one ends."""
        self._stopped.set()
        self._queue.put(_End())
        self.first.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
