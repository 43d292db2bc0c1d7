"""The join key every request carries: a W3C ``traceparent`` and an ``X-Request-Id``.

The trace id is the run's 16 hex digits (a hash of the run clock's wall-time origin, which every
worker shares: unique per run and reproducible from config.json's clock) followed by the request's point (4 hex), worker (4 hex, ffff
for the run's own process) and id (8 hex): unique within the run, and a span's trace id names its
record without a lookup table. The parent span id is the run's 8 hex digits and the id's 8. Sampled
flag 01 (a server that honours the incoming context, vLLM among them, then exports the span).

Built on the hot path: the run's part is computed once, a request's header is one f-string.
"""

from __future__ import annotations

import hashlib

TRACEPARENT = "traceparent"
REQUEST_ID = "X-Request-Id"
NO_WORKER = 0xFFFF


def run_key(origin_unix_s: float) -> str:
    """The run's 16 hex digits: a hash of its clock's wall-time origin (never all zeros)."""
    digest = hashlib.blake2b(repr(float(origin_unix_s)).encode(), digest_size=8).hexdigest()
    return digest if digest.strip("0") else "0" * 15 + "1"


class JoinKeys:
    """A run's join keys: ``trace_id(point, id, worker)`` and the two headers of a request."""

    __slots__ = ("run", "_span", "_of", "_prefix")

    def __init__(self, run: str) -> None:
        self.run = run
        self._span = run[:8]
        self._of: tuple[int, int | None] | None = None  # the (point, worker) of _prefix
        self._prefix = ""  # the trace id's first 24 hex digits for that point and worker

    def trace_id(self, point: int, id: int, worker: int | None) -> str:
        return (
            f"{self.run}{point & 0xFFFF:04x}{NO_WORKER if worker is None else worker & 0xFFFF:04x}{id & 0xFFFFFFFF:08x}"
        )

    def headers(self, point: int, id: int, worker: int | None) -> tuple[str, str]:
        """(traceparent, X-Request-Id) of one request."""
        if self._of != (point, worker):  # (trace_id's format, its run, point and worker made once)
            self._of = (point, worker)
            self._prefix = f"{self.run}{point & 0xFFFF:04x}{NO_WORKER if worker is None else worker & 0xFFFF:04x}"
        i = f"{id & 0xFFFFFFFF:08x}"
        trace = self._prefix + i
        return f"00-{trace}-{self._span}{i}-01", trace


def parse_trace_id(trace_id: str, run: str) -> tuple[int, int, int | None] | None:
    """(point, id, worker) a trace id of this run names; None for another run's (or none of ours)."""
    if len(trace_id) != 32 or not trace_id.startswith(run):
        return None
    try:
        point, worker, id = int(trace_id[16:20], 16), int(trace_id[20:24], 16), int(trace_id[24:], 16)
    except ValueError:
        return None
    return point, id, None if worker == NO_WORKER else worker
