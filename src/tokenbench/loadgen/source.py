"""Where a run's requests come from, in order: a point's sequence, fixed by its load and the seed
(``RequestSource``), and a trace's rows for a replay's schedule (``RequestSource.trace``)."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass

from tokenbench.config import LoadPoint
from tokenbench.datasets import with_prefix
from tokenbench.errors import BadInput
from tokenbench.loadgen.schedule import Share
from tokenbench.records import Request


def start_index(load: LoadPoint, seed: int, n: int) -> int:
    """Where a point starts in a list of ``n`` prompts (or conversations): fixed by its load and
    the seed, whatever earlier points used."""
    key = json.dumps([seed, load.model_dump(mode="json")], sort_keys=True).encode()
    return zlib.crc32(key) % n


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

    def trace(self) -> list[_TraceSend]:
        """The requests that are a trace's rows (``trace_time_s`` set), for a replay's schedule."""
        rows = [_TraceSend(r.trace_time_s, r) for r in self._requests if r.trace_time_s is not None]
        if not rows:
            raise ValueError("a replay needs a trace's requests (--dataset trace)")
        return rows


@dataclass(frozen=True, slots=True)
class _TraceSend:
    """A trace row's request and its trace time: what load.replay_offsets schedules."""

    timestamp_s: float
    request: Request
