"""The rule by which a point failed (results/failures.py)."""

import pytest

from tokenbench.results.failures import StoppedEarly, failed_share, point_failed


def test_the_failed_share_is_over_finished_requests_the_runs_own_cuts_aside():
    assert failed_share({"ok": 3, "http_error": 1, "cancelled": 100, "not_sent": 5, "worker_lost": 2}) == 0.25
    assert failed_share({"cancelled": 4}) is None and failed_share({}) is None


@pytest.mark.parametrize(
    "outcomes,failed",
    [
        ({"ok": 10, "timeout": 10}, False),  # half: not more than half
        ({"ok": 9, "timeout": 11}, True),
        ({"http_error": 1}, True),  # no request succeeded
        ({"cancelled": 3}, False),  # none finished: the server was never seen to fail
        ({"ok": 1}, False),
    ],
)
def test_a_point_fails_when_more_than_half_its_finished_requests_failed(outcomes, failed):
    assert point_failed(outcomes) is failed


def test_a_point_the_breaker_stopped_failed_whatever_its_share():
    trip = StoppedEarly(by="circuit_breaker", reason="20 in a row", at_s=1.0)
    assert point_failed({"ok": 1000, "http_error": 20}, trip)
