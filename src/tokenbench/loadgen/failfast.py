"""How the load generator treats a server that fails: it never floods a broken server (pure: the
load generator reads the clock and sleeps; these only count and say how long).

- ``Backoff`` (one per closed-loop user): after ``BACKOFF_AFTER`` failed requests in a row the
  user waits before its next one, ``BACKOFF_FIRST_S`` doubling up to ``BACKOFF_CAP_S`` (0.1, 0.2,
  0.4 ... 2 s); a success resets it. A user whose requests succeed never waits.
- ``CircuitBreaker`` (one per point, per load generator: each worker of ``--workers`` has its own
  over its share): it trips after ``BREAKER_FAILURES`` finished requests in a row failed with
  none ok between them; the point then issues nothing more, lets its requests in flight drain and
  ends, stopped early (results' ``stopped_early``).

A failure is records.failed: a finished request whose outcome is not ok; requests the run itself
cut (records.UNFINISHED: cancelled, not sent, worker lost) count neither way.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenbench.records import Outcome, failed

BACKOFF_AFTER = 3  # failures in a row of one user before it waits
BACKOFF_FIRST_S = 0.1
BACKOFF_CAP_S = 2.0
BREAKER_FAILURES = 20  # finished requests in a row that failed, none ok between: the point stops
CIRCUIT_BREAKER = "circuit_breaker"  # results' stopped_early.by


class Backoff:
    """One closed-loop user's wait before its next request, from its outcomes so far."""

    def __init__(self) -> None:
        self.failures = 0  # in a row

    def after(self, outcome: Outcome) -> float:
        """Seconds to wait before the next request, given how the last one ended."""
        if outcome is Outcome.OK:
            self.failures = 0
        elif failed(outcome):
            self.failures += 1
        if self.failures < BACKOFF_AFTER:
            return 0.0
        return min(BACKOFF_FIRST_S * 2.0 ** (self.failures - BACKOFF_AFTER), BACKOFF_CAP_S)


@dataclass(frozen=True)
class Trip:
    """Why and when a point stopped early (results' ``stopped_early``)."""

    by: str
    reason: str
    at_s: float


class CircuitBreaker:
    """A point's breaker: trips once ``BREAKER_FAILURES`` finished requests in a row failed."""

    def __init__(self, limit: int = BREAKER_FAILURES) -> None:
        self.limit = limit
        self.in_a_row = 0
        self.ok = 0
        self.trip: Trip | None = None

    def observe(self, outcome: Outcome, now_s: float) -> bool:
        """Count a finished request; True the moment the breaker trips (once)."""
        if outcome is Outcome.OK:
            self.ok += 1
            self.in_a_row = 0
        elif failed(outcome):
            self.in_a_row += 1
        if self.trip is not None or self.in_a_row < self.limit:
            return False
        since = "the point's start" if self.ok == 0 else f"the last ok one ({self.ok} ok before)"
        reason = f"{self.in_a_row} requests in a row failed since {since}: the server fails everything"
        self.trip = Trip(CIRCUIT_BREAKER, reason, now_s)
        return True
