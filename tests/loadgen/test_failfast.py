"""A failing server is not flooded: a user's backoff and a point's circuit breaker (known answers)."""

import pytest

from tokenbench.loadgen.failfast import BACKOFF_CAP_S, BREAKER_FAILURES, CIRCUIT_BREAKER, Backoff, CircuitBreaker
from tokenbench.records import Outcome, failed

FAIL, OK, CUT = Outcome.HTTP_ERROR, Outcome.OK, Outcome.CANCELLED


def test_a_user_backs_off_after_three_failures_in_a_row_doubling_to_the_cap():
    backoff = Backoff()
    waits = [backoff.after(FAIL) for _ in range(9)]
    assert waits == pytest.approx([0, 0, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0])
    assert max(waits) == BACKOFF_CAP_S


def test_a_success_resets_the_backoff_and_the_runs_own_cuts_count_neither_way():
    backoff = Backoff()
    assert [backoff.after(o) for o in (FAIL, FAIL, CUT, FAIL, FAIL)] == pytest.approx([0, 0, 0, 0.1, 0.2])
    assert backoff.after(OK) == 0 and backoff.after(FAIL) == 0 and backoff.after(FAIL) == 0
    assert not failed(Outcome.NOT_SENT) and not failed(Outcome.WORKER_LOST) and failed(Outcome.TIMEOUT)


def test_the_breaker_trips_once_after_its_failures_in_a_row_and_says_why():
    breaker = CircuitBreaker()
    trips = [breaker.observe(FAIL, now_s=float(i)) for i in range(BREAKER_FAILURES + 5)]
    assert trips.index(True) == BREAKER_FAILURES - 1 and trips.count(True) == 1
    assert breaker.trip is not None and breaker.trip.by == CIRCUIT_BREAKER
    assert breaker.trip.at_s == BREAKER_FAILURES - 1
    assert "20 requests in a row failed since the point's start" in breaker.trip.reason


def test_an_ok_between_failures_or_cut_requests_never_trip_the_breaker():
    breaker = CircuitBreaker()
    for i in range(10 * BREAKER_FAILURES):  # a server failing 19 in 20 is slow to measure, not dead
        breaker.observe(OK if i % BREAKER_FAILURES == 0 else FAIL, 0.0)
        breaker.observe(CUT, 0.0)
    assert breaker.trip is None
    for _ in range(BREAKER_FAILURES):
        breaker.observe(FAIL, 1.0)
    assert breaker.trip is not None and "(10 ok before)" in breaker.trip.reason
