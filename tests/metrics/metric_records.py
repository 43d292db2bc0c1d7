"""Hand-built records and spans for the metrics tests (a point's span, a request with known timing)."""

from tokenbench.metrics import PointSpan, Window
from tokenbench.records import Outcome, RequestRecord, TokenSource


def users(start, end):
    """A closed-loop point's span: window [start, end), the point ending with it."""
    return PointSpan(Window(start, end), open_loop=False, end_s=end)


def rates(start, end, point_end=None):
    return PointSpan(Window(start, end), open_loop=True, end_s=end if point_end is None else point_end)


def rec(i, sent, ttft, n_chunks, itl, tokens=None, outcome=Outcome.OK, scheduled=None):
    chunks = [sent + ttft + k * itl for k in range(n_chunks)]
    return RequestRecord(
        point=0,
        id=i,
        scheduled_s=sent if scheduled is None else scheduled,
        sent_s=sent,
        chunk_times_s=chunks,
        end_s=chunks[-1] if chunks else None,
        closed_s=(chunks[-1] if chunks else sent) + 0.001,
        outcome=outcome,
        output_tokens=tokens if tokens is not None else (n_chunks or None),
        output_tokens_source=TokenSource.SERVER,
        prompt_tokens=10,
    )


def served(i, scheduled, sent, ttft, n, itl, outcome=Outcome.OK):
    r = rec(i, sent=sent, ttft=ttft, n_chunks=n, itl=itl, scheduled=scheduled, outcome=outcome)
    r.end_marker = True
    return r
