"""A point's first distinct error texts (metrics/errors.py): known answers from hand-built records."""

from tokenbench.metrics.errors import errors_seen
from tokenbench.records import Outcome, RequestRecord
from tokenbench.results.failures import ERROR_TEXT_CHARS


def _rec(i: int, outcome: Outcome, error: str | None, status: int | None = None) -> RequestRecord:
    return RequestRecord(point=0, id=i, scheduled_s=0.0, outcome=outcome, status=status, error=error)


def test_the_first_distinct_errors_in_the_order_they_ended_with_their_counts():
    records = [
        _rec(0, Outcome.OK, None, 200),
        _rec(1, Outcome.HTTP_ERROR, "HTTP 400: bad", 400),
        _rec(2, Outcome.CANCELLED, "in flight when the run stopped"),  # the run's cut: not the server's
        _rec(3, Outcome.TIMEOUT, "timed out after 1.0s", 200),
        _rec(4, Outcome.HTTP_ERROR, "HTTP 400: bad", 400),
        _rec(5, Outcome.HTTP_ERROR, "HTTP 400: bad", 500),  # another status: another kind
    ]
    seen = [e.model_dump() for e in errors_seen(records)]
    assert seen == [
        {"outcome": "http_error", "status": 400, "text": "HTTP 400: bad", "count": 2},
        {"outcome": "timeout", "status": 200, "text": "timed out after 1.0s", "count": 1},
        {"outcome": "http_error", "status": 500, "text": "HTTP 400: bad", "count": 1},
    ]
    assert errors_seen(records[:1]) == []


def test_at_most_five_kinds_each_masked_on_one_line_and_cut():
    records = [_rec(i, Outcome.STREAM_ERROR, f"error {i}") for i in range(8)]
    records += [_rec(8, Outcome.STREAM_ERROR, "error 0"), _rec(9, Outcome.STREAM_ERROR, "error 7")]
    seen = errors_seen(records)
    assert [(e.text, e.count) for e in seen] == [
        ("error 0", 2),
        ("error 1", 1),
        ("error 2", 1),
        ("error 3", 1),
        ("error 4", 1),
    ]
    long = errors_seen([_rec(0, Outcome.HTTP_ERROR, "HTTP 401: key sk-abcdefghijkl wrong\n" + "x" * 500, 401)])
    assert long[0].text.startswith("HTTP 401: key *** wrong x") and "sk-abc" not in long[0].text
    assert len(long[0].text) == ERROR_TEXT_CHARS and long[0].text.endswith("…")
