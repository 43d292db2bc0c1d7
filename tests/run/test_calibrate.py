"""calibrate.py's arithmetic on hand-made numbers: client-measured minus mock-delivered per request
(TTFT, ITL, chunk and send delay), the records it must skip, the steady window's CPU and
throughput from CPU samples, the offered rate, the table's cells. No mock is started."""

from __future__ import annotations

import io
import math
import os

import numpy as np
import pytest
from rich.console import Console

from tokenbench.records import Outcome, RequestRecord
from tokenbench.results import Clock, PointResult, Requests, RunResults
from tokenbench.run.calibrate import (
    CalibrationResult,
    CalibrationSpec,
    CpuSampler,
    RequestCost,
    RequestTimes,
    _compare,
    _Measured,
    _proc_cpu_s,
    _steady,
    calibration_table,
    ceiling_text,
    request_ceiling,
    request_cost,
)
from tokenbench.rundir import RunWriter

ORIGIN = 100.0  # the run's clock origin on the monotonic clock the mock logs on
SPEC = CalibrationSpec(users=2, requests=4, ttft_ms=50.0, itl_ms=10.0, output_tokens=3)


def _record(i: int, rid: str | None, sent: float, chunks: list[float], outcome: Outcome = Outcome.OK) -> RequestRecord:
    return RequestRecord(
        point=0, id=i, scheduled_s=sent, sent_s=sent, chunk_times_s=chunks, outcome=outcome, response_id=rid
    )


def _measured(tmp_path, records: list[RequestRecord], deliveries: dict, sampler: CpuSampler | None = None):
    writer = RunWriter(tmp_path / "run")
    for r in records:
        writer.write_record(r)
    writer.close()
    # results.json's clock and its one point's request counts: all _compare reads of it
    requests = Requests.model_construct(ok=3, total=4)
    results = RunResults.model_construct(
        clock=Clock.model_construct(origin_monotonic_s=ORIGIN), points=[PointResult.model_construct(requests=requests)]
    )
    return _Measured(tmp_path / "run", results, deliveries, sampler or CpuSampler())


def _delivery(received: float, chunks: list[float]) -> dict:
    return {"received_s": ORIGIN + received, "chunk_times_s": [ORIGIN + t for t in chunks]}


def test_compare_errors_against_what_the_mock_delivered(tmp_path):
    records = [
        _record(0, "mock-1", 1.0, [1.060, 1.071, 1.082]),
        _record(1, "mock-2", 2.0, [2.05, 2.06]),  # the mock logged 3 chunks: not comparable, skipped
        _record(2, None, 2.5, [], Outcome.HTTP_ERROR),  # failed: skipped
        _record(3, "mock-9", 2.7, []),  # no delivery logged: skipped
        _record(4, "mock-5", 3.0, [3.10, 3.13]),
    ]
    deliveries = {
        "mock-1": _delivery(1.002, [1.055, 1.065, 1.075]),
        "mock-2": _delivery(2.001, [2.04, 2.05, 2.06]),
        "mock-5": _delivery(3.010, [3.08, 3.10]),
    }
    result = _compare(SPEC, _measured(tmp_path, records, deliveries))
    # TTFT error = (client first chunk - sent) - (mock first chunk - received): 7 ms and 30 ms
    assert result.ttft_error_ms_mean == pytest.approx(18.5)
    assert result.ttft_error_ms_p99 == pytest.approx(7 + 0.99 * 23)
    # ITL error per gap: 11-10, 11-10 and 30-20 ms
    assert result.itl_error_ms_mean == pytest.approx(4.0)
    assert result.itl_error_ms_p99 == pytest.approx(float(np.percentile([1, 1, 10], 99)))
    # chunk delay = client arrival - mock write: 5, 6, 7, 20, 30 ms
    assert result.chunk_delay_ms_mean == pytest.approx(13.6)
    assert result.chunk_delay_ms_p99 == pytest.approx(20 + 0.96 * 10)
    # send delay = mock received - client sent: 2 and 10 ms
    assert result.send_delay_ms_mean == pytest.approx(6.0)
    assert result.send_delay_ms_p99 == pytest.approx(2 + 0.99 * 8)
    assert (result.ok, result.total) == (3, 4)  # from results.json, not recounted
    # 7 chunks in all: too few for a steady window, so no CPU or throughput figure (never 0)
    assert (result.cpu_us_per_token, result.mock_cpu_fraction, result.achieved_tokens_per_s) == (None, None, None)
    # offered: users * tokens / (TTFT + (tokens - 1) * ITL) = 2 * 3 / 0.07 s
    assert result.offered_tokens_per_s == pytest.approx(6 / 0.07)
    assert result.run_dir == str(tmp_path / "run")


def test_compare_with_nothing_comparable_gives_none(tmp_path):
    records = [_record(0, None, 1.0, [], Outcome.CONNECT_ERROR)]
    result = _compare(SPEC, _measured(tmp_path, records, {}))
    assert result.ttft_error_ms_mean is None and result.chunk_delay_ms_p99 is None and result.send_delay_ms_mean is None


def _linear_sampler(own_cpu_per_s: float, mock_cpu_per_s: float) -> CpuSampler:
    sampler = CpuSampler()
    sampler.samples = [(ORIGIN + t, own_cpu_per_s * t, mock_cpu_per_s * t) for t in range(21)]
    return sampler


def test_steady_window_cpu_and_throughput():
    chunks = [float(t) for t in reversed(range(20))]  # arrivals 0..19 s after the origin, any order
    steady = _steady(chunks, _linear_sampler(0.5, 0.25), ORIGIN)
    # window: the 10% and 90% arrivals (2 s and 18 s), 16 chunks in it
    assert steady.achieved_tokens_per_s == pytest.approx(16 / 16)
    assert steady.cpu_us_per_token == pytest.approx(0.5 * 16 / 16 * 1e6)
    assert steady.mock_cpu_fraction == pytest.approx(0.25)


def test_steady_needs_more_than_ten_chunks_over_some_time():
    sampler = _linear_sampler(1, 1)
    assert _steady([float(t) for t in range(10)], sampler, ORIGIN).achieved_tokens_per_s is None
    assert _steady([5.0] * 50, sampler, ORIGIN).cpu_us_per_token is None  # no time between 10% and 90%


def test_cpu_between_interpolates_the_samples():
    sampler = CpuSampler()
    sampler.samples = [(0.0, 0.0, 10.0), (1.0, 2.0, 11.0), (3.0, 2.0, 15.0)]
    assert sampler.cpu_between(0.5, 2.0) == pytest.approx(2.0 - 1.0)
    assert sampler.cpu_between(0.0, 3.0, column=2) == pytest.approx(5.0)


def test_proc_cpu_of_another_process():
    assert math.isnan(_proc_cpu_s(None))
    assert math.isnan(_proc_cpu_s(2**23))  # above any pid_max: no such process
    own = _proc_cpu_s(os.getpid())
    assert math.isfinite(own) and own >= 0


def test_table_cells():
    result = CalibrationResult(
        spec=SPEC,
        ok=3,
        total=4,
        ttft_error_ms_mean=18.5,
        ttft_error_ms_p99=29.77,
        itl_error_ms_mean=None,
        itl_error_ms_p99=None,
        chunk_delay_ms_mean=13.6,
        chunk_delay_ms_p99=29.6,
        send_delay_ms_mean=6.0,
        send_delay_ms_p99=9.92,
        cpu_us_per_token=12.34,
        mock_cpu_fraction=0.25,
        achieved_tokens_per_s=None,
        offered_tokens_per_s=6 / 0.07,
        run_dir="x",
        cost=RequestCost(4, 412.4, 85.6, None, None, None, None),
    )
    out = io.StringIO()
    Console(file=out, width=400).print(calibration_table([result]))
    row = [line for line in out.getvalue().splitlines() if "3/4" in line]
    assert len(row) == 1
    cells = [c.strip() for c in row[0].strip("│ ").split("│")]
    assert cells == [
        "2",
        "4",
        "3/4",
        "18.50",
        "29.77",
        "-",
        "-",
        "6.00/9.92",
        "13.60/29.60",
        "12.3",
        "412",
        "86",
        "25%",
        "-",
        "86",
    ]


def _sampler(points: list[tuple[float, float, float]]) -> CpuSampler:
    sampler = CpuSampler()
    sampler.samples = list(points)
    return sampler


def test_request_cost_by_hand():
    """the compiled client: 4 requests over [10.0, 12.0] s (first send, last end) while this process spent
    0.002 s of CPU (1 ms/s) and the mock 1.0 s: 500 µs per request, 2 requests/s, 0.1% and 50%
    of a core. TTFT errors: (10.06-10.0)-(0.05) = +10 ms and (11.03-11.0)-(0.02) = +10 ms; a
    whole answer: latency (12.0-11.5)-(0.48) = +20 ms; the fourth has no delivery: skipped."""
    sampler = _sampler([(10.0, 1.0, 5.0), (12.0, 1.002, 6.0)])
    times = [
        RequestTimes(10.0, 10.06, 10.2, "mock-1"),
        RequestTimes(11.0, 11.03, 11.5, "mock-2"),
        RequestTimes(11.5, None, 12.0, "mock-3"),
        RequestTimes(11.6, 11.7, 11.9, "unknown"),
    ]
    deliveries = {
        "mock-1": {"received_s": 20.0, "chunk_times_s": [20.05], "finished_s": 20.1},
        "mock-2": {"received_s": 30.0, "chunk_times_s": [30.02], "finished_s": 30.3},
        "mock-3": {"received_s": 40.0, "chunk_times_s": [], "finished_s": 40.48},
    }
    cost = request_cost(times, deliveries, sampler)
    assert cost.requests == 4
    assert cost.cpu_us_per_request == pytest.approx(500.0)
    assert cost.requests_per_s == pytest.approx(2.0)
    assert cost.cpu_util == pytest.approx(0.001) and cost.mock_cpu_util == pytest.approx(0.5)
    assert cost.error_ms_mean == pytest.approx((10 + 10 + 20) / 3)


def test_request_ceiling_and_the_workers_a_target_needs():
    """450 µs per request: 0.9 / 450e-6 = 2,000 requests/s per process; 5,000/s needs 3."""
    cost = RequestCost(100, 450.0, 800.0, 1.0, 2.0, 0.36, 0.4)
    ceiling = request_ceiling(cost, 5000.0)
    assert ceiling is not None
    assert ceiling.requests_per_s == pytest.approx(2000.0) and ceiling.workers == 3
    assert ceiling.measured_requests_per_s == 800.0
    text = ceiling_text(CalibrationSpec(users=128, requests=1024, output_tokens=4), ceiling)
    assert "2,000 requests/s of 4-token streamed replies" in text and "needs --workers 3" in text
    from tokenbench.clients import COMPILED

    assert ("the client compiled with mypyc" in text) == (COMPILED == "compiled")  # which client measured it
    assert request_ceiling(RequestCost(1, None, None, None, None, None, None)) is None
