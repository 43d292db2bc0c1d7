"""`tokenbench calibrate`: the client's own measurement error and CPU cost at a given load.

Starts the mock server in a child process (pinned to one core, the client to another when the
machine has two), runs a closed-loop load against it, then compares what the client measured with
what the mock logged it delivered. Both processes read the same monotonic clock
(``time.perf_counter`` is CLOCK_MONOTONIC on Linux), so per-chunk delivery delay is exact.
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict, cast

import numpy as np
from rich.console import Console
from rich.table import Table

from tokenbench.common.procs import child_preexec, free_port, stop, wait_http
from tokenbench.config import (
    DatasetConfig,
    LoadPoint,
    RateLoad,
    RunConfig,
    StopConfig,
    TargetConfig,
    UsersLoad,
    WorkersConfig,
)
from tokenbench.records import RequestRecord
from tokenbench.results import RunResults
from tokenbench.results.layout import SAMPLES
from tokenbench.rundir import read_records
from tokenbench.telemetry.client_health import CPU_LIMIT
from tokenbench.telemetry.sampler import SamplesFile


@dataclass(frozen=True)
class CalibrationSpec:
    users: int
    requests: int
    ttft_ms: float = 50.0
    itl_ms: float = 10.0
    output_tokens: int = 128
    pin_cores: bool = True
    workers: int = 1  # --workers: the load from this many processes (or Ray actors with ray)
    ray: bool = False
    api: Literal["chat", "embeddings"] = "chat"  # embeddings: a whole JSON answer, never streamed
    rate: float | None = None  # open loop at this many requests/s (users: none) instead of users

    @property
    def streaming(self) -> bool:
        return self.api == "chat"


@dataclass(frozen=True)
class CalibrationResult:
    spec: CalibrationSpec
    ok: int
    total: int
    ttft_error_ms_mean: float | None
    ttft_error_ms_p99: float | None
    itl_error_ms_mean: float | None
    itl_error_ms_p99: float | None
    chunk_delay_ms_mean: float | None  # client arrival - mock write, per chunk
    chunk_delay_ms_p99: float | None
    send_delay_ms_mean: float | None  # mock received - client sent
    send_delay_ms_p99: float | None
    cpu_us_per_token: float | None
    mock_cpu_fraction: float | None  # of one core, in the steady window: near 1.0 = mock-bound
    achieved_tokens_per_s: float | None
    offered_tokens_per_s: float
    run_dir: str
    # With workers: cpu_us_per_token is the driver's and the workers' CPU together; the workers'
    # own (their CPU / the tokens they received, the mean over workers), and their loop lag p99.
    worker_cpu_us_per_token: float | None = None
    loop_lag_p99_ms: float | None = None
    # Per request: this process's CPU over [first send, last end] / the requests sent
    # in it, and those requests over that time; a whole answer's error is its latency's.
    cost: RequestCost | None = None
    client_limited_by: tuple[str, ...] = ()  # the run's own verdict on its client (results' client)


class CpuSampler(threading.Thread):
    """Samples this process's CPU time against the monotonic clock (for CPU per token)."""

    def __init__(self, other_pid: int | None = None, interval_s: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, float, float]] = []
        self._other_pid = other_pid
        self._interval_s = interval_s
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.samples.append((time.perf_counter(), time.process_time(), _proc_cpu_s(self._other_pid)))
            self._halt.wait(self._interval_s)

    def stop(self) -> None:
        self._halt.set()
        self.join()

    def cpu_between(self, t0: float, t1: float, column: int = 1) -> float:
        ts = np.array([s[0] for s in self.samples])
        cpu = np.array([s[column] for s in self.samples])
        return float(np.interp(t1, ts, cpu) - np.interp(t0, ts, cpu))


def _proc_cpu_s(pid: int | None) -> float:
    """user+system CPU seconds of another process (Linux /proc); NaN where unavailable. One read
    of one file, not procs.tree_cpu_s: this runs every 0.1 s inside the process it measures."""
    if pid is None:
        return float("nan")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def calibrate(spec: CalibrationSpec, out_root: Path | None = None) -> CalibrationResult:
    with pinned_mock(spec) as (url, mock):
        return calibrate_against(spec, url, mock, out_root)


def calibrate_against(
    spec: CalibrationSpec, url: str, mock: subprocess.Popen[bytes], out_root: Path | None = None
) -> CalibrationResult:
    """One tokenbench run of ``spec`` against a mock already up (pinned_mock), compared with what
    it delivered."""
    return _compare(spec, _measure(spec, url, mock, out_root))


@contextmanager
def pinned_mock(spec: CalibrationSpec) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The mock for ``spec``, answering on its URL, pinned to one core and this process to
    another (when the machine has two) until the block ends."""
    port = free_port()
    mock = _start_mock(spec, port)
    own_affinity = os.sched_getaffinity(0)
    pinned = spec.pin_cores and len(own_affinity) >= 2
    url = f"http://127.0.0.1:{port}"
    try:
        if pinned:
            _pin(mock.pid, own_affinity)
        wait_http(url + "/health", 60.0, mock)  # a busy machine starts it slowly
        yield url, mock
    finally:
        if pinned:
            os.sched_setaffinity(0, own_affinity)
        stop(mock)


def mock_deliveries(url: str) -> dict[str, _Delivery]:
    """What the mock logged it delivered, by response id (``GET /mock/deliveries``)."""
    with urllib.request.urlopen(url + "/mock/deliveries", timeout=30) as resp:
        deliveries: dict[str, _Delivery] = json.loads(resp.read())  # the mock's JSON (mock.Delivery)
    return deliveries


@dataclass(frozen=True)
class RequestTimes:
    """One request as a client saw it, on the monotonic clock (perf_counter): sent, its first
    content chunk (None: a whole answer), its end, and the id the server gave its answer."""

    sent_s: float
    first_s: float | None
    end_s: float
    response_id: str


@dataclass(frozen=True)
class RequestCost:
    """A client's cost per request over a run: its CPU over [first send, last end]
    divided by the requests, the requests per second over that time, and its error on each
    request's TTFT (a whole answer: its latency) against what the mock logged."""

    requests: int
    cpu_us_per_request: float | None
    requests_per_s: float | None
    error_ms_mean: float | None
    error_ms_p99: float | None
    cpu_util: float | None  # this process's CPU over that time, a fraction of one core
    mock_cpu_util: float | None


def request_cost(times: Sequence[RequestTimes], deliveries: dict[str, _Delivery], sampler: CpuSampler) -> RequestCost:
    """The per-request figures of ``times`` (one client's requests of one run; CPU from ``sampler``)."""
    if len(times) < 2:
        return RequestCost(len(times), None, None, None, None, None, None)
    t0, t1 = min(t.sent_s for t in times), max(t.end_s for t in times)
    errors: list[float] = []
    for t in times:
        d = deliveries.get(t.response_id)
        if d is None:
            continue
        if t.first_s is not None and d["chunk_times_s"]:
            errors.append((t.first_s - t.sent_s) - (d["chunk_times_s"][0] - d["received_s"]))
        elif t.first_s is None and d.get("finished_s") is not None:
            errors.append((t.end_s - t.sent_s) - (float(d["finished_s"] or 0.0) - d["received_s"]))
    cpu = sampler.cpu_between(t0, t1)
    return RequestCost(
        requests=len(times),
        cpu_us_per_request=cpu / len(times) * 1e6,
        requests_per_s=len(times) / (t1 - t0) if t1 > t0 else None,
        error_ms_mean=_ms(errors),
        error_ms_p99=_ms(errors, 99),
        cpu_util=cpu / (t1 - t0) if t1 > t0 else None,
        mock_cpu_util=sampler.cpu_between(t0, t1, column=2) / (t1 - t0) if t1 > t0 else None,
    )


class _Delivery(TypedDict):
    """What calibrate reads of one of the mock's deliveries (``GET /mock/deliveries``, mock.Delivery)."""

    received_s: float
    chunk_times_s: list[float]
    finished_s: float | None


class _ClientSample(TypedDict):
    """What calibrate reads of a worker's client sample in samples.jsonl (telemetry.client_monitor)."""

    worker: int
    start_s: float
    t_s: float
    cpu_s: float


# Each worker's client samples and the chunk times of its records (_worker_cpu), keyed by worker.
_WorkerCpu = dict[int, tuple[list[_ClientSample], list[float]]]


@dataclass(frozen=True)
class _Measured:
    """A calibration run: what the client recorded, what the mock delivered, the CPU samples."""

    run_dir: Path
    results: RunResults
    deliveries: dict[str, _Delivery]  # by response id
    sampler: CpuSampler


def _start_mock(spec: CalibrationSpec, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tokenbench",
            "mock",
            "--port",
            str(port),
            "--ttft-ms",
            str(spec.ttft_ms),
            "--itl-ms",
            str(spec.itl_ms),
            "--output-tokens",
            str(spec.output_tokens),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=child_preexec(),
    )


def _pin(mock_pid: int, own_affinity: set[int]) -> None:
    """The mock on one core, this process on another, so neither measures the other's load."""
    cores = sorted(own_affinity)
    os.sched_setaffinity(mock_pid, {cores[0]})
    os.sched_setaffinity(0, {cores[1]})


def _measure(spec: CalibrationSpec, url: str, mock: subprocess.Popen[bytes], out_root: Path | None) -> _Measured:
    from tokenbench.run import run

    out_dir = Path(tempfile.mkdtemp(prefix="calibrate-", dir=out_root))
    config = _run_config(spec, url, out_dir)
    sampler = CpuSampler(other_pid=mock.pid)
    sampler.start()
    result = run(config, Console(file=io.StringIO()))
    sampler.stop()
    deliveries = mock_deliveries(url)
    (out_dir / "deliveries.json").write_text(json.dumps(deliveries))
    return _Measured(result.run_dir, RunResults.from_json(result.results), deliveries, sampler)


def _run_config(spec: CalibrationSpec, url: str, out_dir: Path) -> RunConfig:
    load: LoadPoint = UsersLoad(users=spec.users) if spec.rate is None else RateLoad(rate_per_s=spec.rate)
    return RunConfig(
        target=TargetConfig(url=url, api=spec.api),
        loads=[load],
        stop=StopConfig(max_requests=spec.requests),
        dataset=DatasetConfig(name="synthetic", input_tokens=16, output_tokens=spec.output_tokens, num_prompts=64),
        live=False,
        out_dir=out_dir / "run",
        # Ray actors reserve no CPU: four of them fit on a 2-core machine, as four processes do
        workers=WorkersConfig(count=spec.workers, ray=spec.ray, cpus_per_worker=0.0),
    )


def _compare(spec: CalibrationSpec, measured: _Measured) -> CalibrationResult:
    run_dir, results, deliveries, sampler = measured.run_dir, measured.results, measured.deliveries, measured.sampler
    if results.clock is None:
        raise RuntimeError(f"{run_dir}: results.json has no clock to align the mock's times with")
    origin = results.clock.origin_monotonic_s
    records = read_records(run_dir)
    ttft_err: list[float] = []
    itl_err: list[float] = []
    delay: list[float] = []
    send: list[float] = []
    all_chunks: list[float] = []
    for r in records:
        all_chunks.extend(r.chunk_times())
        d = deliveries.get(r.response_id or "")
        if not r.ok or r.sent_s is None or d is None or len(d["chunk_times_s"]) != len(r.chunk_times_s):
            continue
        if not r.chunk_times_s:  # a whole answer (embeddings): no chunks to compare (request_cost)
            continue
        mock_times = np.array(d["chunk_times_s"]) - origin
        mine = np.array(r.chunk_times_s)
        send.append(d["received_s"] - origin - r.sent_s)
        ttft_err.append((mine[0] - r.sent_s) - (mock_times[0] - (d["received_s"] - origin)))
        itl_err.extend(np.diff(mine) - np.diff(mock_times))
        delay.extend(mine - mock_times)
    steady = _steady(
        all_chunks, sampler, origin, _worker_cpu(run_dir, records) if spec.workers > 1 or spec.ray else None
    )
    req, client = results.points[0].requests, results.points[0].client
    loop_lag_p99_s = client.loop_lag_p99_s if client is not None else None
    stream_s = (spec.ttft_ms + (spec.output_tokens - 1) * spec.itl_ms) / 1e3
    offered = spec.users / stream_s if spec.rate is None else spec.rate  # requests/s
    times = [
        RequestTimes(
            r.sent_s + origin,
            r.chunk_times_s[0] + origin if r.chunk_times_s else None,
            r.closed_s + origin,
            r.response_id or "",
        )
        for r in records
        if r.ok and r.sent_s is not None and r.closed_s is not None
    ]
    return CalibrationResult(
        spec=spec,
        ok=req.ok,
        total=req.total,
        ttft_error_ms_mean=_ms(ttft_err),
        ttft_error_ms_p99=_ms(ttft_err, 99),
        itl_error_ms_mean=_ms(itl_err),
        itl_error_ms_p99=_ms(itl_err, 99),
        chunk_delay_ms_mean=_ms(delay),
        chunk_delay_ms_p99=_ms(delay, 99),
        send_delay_ms_mean=_ms(send),
        send_delay_ms_p99=_ms(send, 99),
        cpu_us_per_token=steady.cpu_us_per_token,
        mock_cpu_fraction=steady.mock_cpu_fraction,
        achieved_tokens_per_s=steady.achieved_tokens_per_s,
        offered_tokens_per_s=offered * spec.output_tokens,
        run_dir=str(run_dir),
        worker_cpu_us_per_token=steady.worker_cpu_us_per_token,
        loop_lag_p99_ms=loop_lag_p99_s * 1e3 if loop_lag_p99_s is not None else None,
        cost=request_cost(times, deliveries, sampler),
        client_limited_by=tuple(client.limited_by) if client is not None else (),
    )


def _ms(seconds: list[float], percentile: float | None = None) -> float | None:
    """The mean of ``seconds`` (or that percentile of them) in ms; None without any."""
    if not seconds:
        return None
    a = np.asarray(seconds)
    return float((np.mean(a) if percentile is None else np.percentile(a, percentile)) * 1e3)


def _worker_cpu(run_dir: Path, records: list[RequestRecord]) -> _WorkerCpu:
    """Each worker's client samples (its CPU) and chunk arrival times, keyed by worker."""
    client = cast(list[_ClientSample], SamplesFile(run_dir / SAMPLES).events("client"))  # samples.jsonl's JSON
    return {
        w: ([s for s in client if s["worker"] == w], [t for r in records if r.worker == w for t in r.chunk_times()])
        for w in {int(s["worker"]) for s in client}
    }


def _workers_steady(workers: _WorkerCpu, t0: float, t1: float) -> tuple[float, list[float]]:
    """The workers' CPU seconds over [t0, t1] (each at its mean rate over the samples centred in
    it) and each worker's CPU µs per token it received there."""
    total, per_token = 0.0, list[float]()
    for samples, chunks in workers.values():
        inside = [s for s in samples if t0 <= (s["start_s"] + s["t_s"]) / 2 < t1]
        seconds = sum(s["t_s"] - s["start_s"] for s in inside)
        tokens = sum(1 for t in chunks if t0 <= t < t1)
        if seconds > 0 and tokens:
            cpu = sum(s["cpu_s"] for s in inside) / seconds * (t1 - t0)
            total += cpu
            per_token.append(cpu / tokens * 1e6)
    return total, per_token


@dataclass(frozen=True)
class _Steady:
    cpu_us_per_token: float | None = None
    mock_cpu_fraction: float | None = None
    achieved_tokens_per_s: float | None = None
    worker_cpu_us_per_token: float | None = None


def _steady(
    all_chunks: list[float],
    sampler: CpuSampler,
    origin: float,
    workers: _WorkerCpu | None = None,
) -> _Steady:
    """CPU and throughput in the steady window: between 10% and 90% of all chunk arrivals
    (excludes start-up and tail). With ``workers`` (their samples and chunks, _worker_cpu), the client's
    CPU is this process's (the driver's) plus theirs over the window."""
    all_chunks.sort()
    if len(all_chunks) <= 10:
        return _Steady()
    t0, t1 = all_chunks[len(all_chunks) // 10], all_chunks[len(all_chunks) * 9 // 10]
    n = len(all_chunks) * 8 // 10
    if not t1 > t0:
        return _Steady()
    own = sampler.cpu_between(t0 + origin, t1 + origin)
    theirs, per_worker = _workers_steady(workers or {}, t0, t1)
    return _Steady(
        cpu_us_per_token=(own + theirs) / n * 1e6,
        worker_cpu_us_per_token=float(np.mean(per_worker)) if per_worker else None,
        mock_cpu_fraction=sampler.cpu_between(t0 + origin, t1 + origin, column=2) / (t1 - t0),
        achieved_tokens_per_s=n / (t1 - t0),
    )


@dataclass(frozen=True)
class RequestCeiling:
    """The request rate one client process sustains at a calibration's reply length:
    ``CPU_LIMIT`` of a core (past it a point is client-limited: telemetry.client_health) over its
    CPU per request, and the processes (``--workers``, one core each) a target rate needs."""

    cpu_us_per_request: float
    requests_per_s: float
    measured_requests_per_s: float | None  # what the calibration's own run sent
    target_per_s: float | None = None
    workers: int | None = None


def request_ceiling(cost: RequestCost, target_per_s: float | None = None) -> RequestCeiling | None:
    """The ceiling from a run's cost per request (None without one). Its CPU per request at the
    measured load stands for the cost at the ceiling: a busier loop costs less per request (more
    work per wake-up), so the estimate errs low."""
    if not cost.cpu_us_per_request:
        return None
    per_s = CPU_LIMIT / (cost.cpu_us_per_request / 1e6)
    workers = math.ceil(target_per_s / per_s) if target_per_s is not None else None
    return RequestCeiling(cost.cpu_us_per_request, per_s, cost.requests_per_s, target_per_s, workers)


def client_build() -> str:
    """Which client measures (the compiled one costs ~10% less CPU a short request)."""
    from tokenbench.clients import COMPILED

    if COMPILED == "compiled":
        return "the client compiled with mypyc"
    return "the client from its sources: `make compiled` builds the faster one"


def ceiling_text(spec: CalibrationSpec, ceiling: RequestCeiling) -> str:
    reply = f"{spec.output_tokens}-token streamed replies" if spec.streaming else "whole embeddings answers"
    text = (
        f"one client process sustains about {ceiling.requests_per_s:,.0f} requests/s of {reply} "
        f"({ceiling.cpu_us_per_request:.0f} µs of CPU per request at {spec.users} streams; "
        f"{CPU_LIMIT:.0%} of a core is where a point becomes client-limited; {client_build()})"
    )
    if ceiling.target_per_s is not None and ceiling.workers is not None:
        text += (
            f"; {ceiling.target_per_s:,.0f} requests/s needs --workers {ceiling.workers} "
            f"(a core each, beside the server's)"
        )
    return text


def calibration_table(results: list[CalibrationResult]) -> Table:
    table = Table(title="client overhead against the mock (error = client-measured - mock-delivered)")
    for col in (
        "streams",
        "requests",
        "ok",
        "TTFT err mean ms",
        "TTFT err p99 ms",
        "ITL err mean ms",
        "ITL err p99 ms",
        "send delay mean/p99 ms",
        "chunk delay mean/p99 ms",
        "CPU µs/token",
        "CPU µs/req",
        "req/s",
        "mock CPU",
        "achieved tok/s",
        "offered tok/s",
    ):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(
            str(r.spec.users),
            str(r.spec.requests),
            f"{r.ok}/{r.total}",
            _fmt(r.ttft_error_ms_mean),
            _fmt(r.ttft_error_ms_p99),
            _fmt(r.itl_error_ms_mean),
            _fmt(r.itl_error_ms_p99),
            f"{_fmt(r.send_delay_ms_mean)}/{_fmt(r.send_delay_ms_p99)}",
            f"{_fmt(r.chunk_delay_ms_mean)}/{_fmt(r.chunk_delay_ms_p99)}",
            _fmt(r.cpu_us_per_token, ".1f"),
            _fmt(r.cost.cpu_us_per_request if r.cost else None, ".0f"),
            _fmt(r.cost.requests_per_s if r.cost else None, ".0f"),
            _fmt(r.mock_cpu_fraction, ".0%"),
            _fmt(r.achieved_tokens_per_s, ".0f"),
            _fmt(r.offered_tokens_per_s, ".0f"),
        )
    return table


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)
