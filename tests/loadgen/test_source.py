"""Where a point's requests come from: a trace's rows for a replay, with ids unique per run."""

import pytest

from tokenbench.loadgen.source import RequestSource
from tokenbench.records import Request


def test_a_trace_is_its_rows_requests_with_their_trace_times_and_ids_go_on():
    rows = [Request(prompt=f"r{i}", max_tokens=1, trace_row=i + 1, trace_time_s=i * 0.5) for i in range(3)]
    source = RequestSource(rows, unique_nonce="n")
    trace = source.trace()
    assert [(t.timestamp_s, t.request.trace_row) for t in trace] == [(0.0, 1), (0.5, 2), (1.0, 3)]
    source.take()
    rid, sent = source.issue(trace[2].request)
    assert rid == 1 and sent.prompt == "[n-1] r2" and sent.trace_row == 3  # the nonce keeps the row


def test_a_replay_without_a_trace_is_an_error():
    with pytest.raises(ValueError, match="--dataset trace"):
        RequestSource([Request(prompt="p")]).trace()
