"""A point the server failed, as results say it: the first distinct error texts the server gave
(``errors_seen``), why a point stopped early (``stopped_early``: the load generator's circuit
breaker, failfast.py), and the rule by which a point failed (``point_failed``), read by the run's
exit code and the report's verdict alike.

The rule: a point failed when more than ``FAILED_SHARE`` (half) of its finished requests failed
(finished: every request but those the run itself cut, ``UNFINISHED_OUTCOMES``: cancelled at the
point's end, never sent, worker lost), or when the circuit breaker stopped it. A point where no
request finished (every one cut) did not fail by this rule: the server was never seen to fail.
"""

from __future__ import annotations

from collections.abc import Mapping

from tokenbench.common.frozen import FrozenModel
from tokenbench.records import UNFINISHED
from tokenbench.results.base import Number

FAILED_SHARE = 0.5  # a point fails when more of its finished requests than this failed
ERRORS_SEEN = 5  # the distinct error texts a point keeps (the first ones, in the order they ended)
ERROR_TEXT_CHARS = 200  # each kept text, at most
UNFINISHED_OUTCOMES = frozenset(o.value for o in UNFINISHED)  # by_outcome's keys for them


class ErrorSeen(FrozenModel):
    """One distinct failure of a point: its outcome, HTTP status (None without a response), the
    error text (masked, at most ERROR_TEXT_CHARS) and how many of the point's requests ended so."""

    outcome: str
    status: int | None
    text: str
    count: int


class StoppedEarly(FrozenModel):
    """Why a point's load stopped before its end: ``by`` (``circuit_breaker``), the reason in
    words, and when (run clock, seconds)."""

    by: str
    reason: str
    at_s: Number


def failed_share(by_outcome: Mapping[str, int]) -> float | None:
    """The share of a point's finished requests that failed (None: none finished)."""
    finished = sum(n for outcome, n in by_outcome.items() if outcome not in UNFINISHED_OUTCOMES)
    if not finished:
        return None
    return (finished - by_outcome.get("ok", 0)) / finished


def point_failed(by_outcome: Mapping[str, int], stopped_early: StoppedEarly | None = None) -> bool:
    """The rule (module doc): most finished requests failed, or the circuit breaker stopped it."""
    share = failed_share(by_outcome)
    return stopped_early is not None or (share is not None and share > FAILED_SHARE)
