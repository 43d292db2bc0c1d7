"""A burst reaches the server's slots in the server's order, not the client's. Twelve
users sent to vLLM's 8 slots within 0.8 ms: the first four sent got their first token last (1.0 s,
the last four sent 0.24 s). Counted as requests that found a free slot (fewer than 8 sent before
them), their wait for a slot went into the fit's TTFT rows: on that run a 171 ms overhead and a
prefill cost of 0.14 ms a token, where the run's prefill stalls read ~0.33."""

from __future__ import annotations

import numpy as np

from tokenbench.model.fit import in_flight_at_send
from tokenbench.model.observe import PointObs


def _point(sent: list[float], last: list[float]) -> PointObs:
    n = len(sent)
    ones = np.ones(n)
    return PointObs(
        run="r", index=0, label="x", sent=np.array(sent), first=np.array(sent) + 0.1, last=np.array(last),
        chunks=ones, prompt=ones, output=ones, kv_scrapes=[], prompt_extra=np.zeros(n),
    )  # fmt: skip


def test_every_request_of_a_burst_counts_the_whole_burst_in_flight():
    burst = [10.0 + 0.00007 * i for i in range(12)]  # sent within 0.8 ms
    got = in_flight_at_send(_point(burst, [12.0] * 12))
    assert got.tolist() == [11.0] * 12  # none of them knows it found a free slot of 8


def test_requests_sent_apart_count_only_those_before_them_still_in_flight():
    # sent 0.1 s apart; the first ends before the third is sent
    got = in_flight_at_send(_point([0.0, 0.1, 0.2, 0.3], [0.15, 1.0, 1.0, 1.0]))
    assert got.tolist() == [0.0, 1.0, 1.0, 2.0]
