"""Per-request client cost against `tokenbench mock`: tokenbench vs a bare-socket floor.

For each reply (1, 4 and 128 streamed tokens, and a whole embeddings answer): one mock (TTFT
50 ms, ITL 10 ms) pinned to one core, the client to the other; 128 closed-loop streams; the floor
(benchmarks/floor_client.py) and tokenbench run alternately in one process (floor, tokenbench,
floor, tokenbench), each run's CPU read over [first send, last end]. Prints per run: CPU µs per
request, achieved req/s, TTFT error (a whole answer: latency error) mean/p99 against what the mock
logged, the client's CPU (of one core), and tokenbench's cost over the floor's in the same round.

    python benchmarks/request_overhead.py               # all four replies, two rounds (~1.5 min)
    python benchmarks/request_overhead.py --quick       # 4 tokens, one round
    python benchmarks/request_overhead.py --rounds 5    # more rounds (with --quick: of 4 tokens)

On a machine others use, one round's ratio moves with their load (the floor's CPU per request
itself moved 106-171 µs between minutes here): the verdict reads the median of the rounds' ratios
(each round's floor and tokenbench back to back), and prints every round's.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import urllib.request
from collections.abc import Coroutine
from pathlib import Path
from statistics import median
from typing import Any

from floor_client import FloorRecord, run_floor
from rich.console import Console
from rich.table import Table

from tokenbench.run.calibrate import (
    CalibrationSpec,
    CpuSampler,
    RequestCost,
    RequestTimes,
    calibrate_against,
    client_build,
    mock_deliveries,
    pinned_mock,
    request_cost,
)

USERS = 128
# (label, api, output tokens, requests per run)
CASES = [
    ("1 token", "chat", 1, 4096),
    ("4 tokens", "chat", 4, 4096),
    ("128 tokens", "chat", 128, 384),
    ("embeddings (whole answer)", "embeddings", 1, 4096),
]
TARGET = 1.5  # tokenbench's CPU per request at most this many times the floor's at 4 tokens


def floor_run(spec: CalibrationSpec, url: str, pid: int) -> RequestCost:
    port = int(url.rsplit(":", 1)[1])
    with urllib.request.urlopen(url + "/v1/models", timeout=10) as resp:
        model = json.loads(resp.read())["data"][0]["id"]
    text = " ".join(f"w{i}" for i in range(16))
    if spec.api == "chat":
        path = "/v1/chat/completions"
        body: dict[str, object] = {
            "model": model,
            "messages": [{"role": "user", "content": text}],
            "max_tokens": spec.output_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    else:
        path, body = "/v1/embeddings", {"model": model, "input": [text]}
    sampler = CpuSampler(other_pid=pid)
    sampler.start()
    records = _run(run_floor("127.0.0.1", port, path, body, spec.users, spec.requests, spec.streaming))
    sampler.stop()
    times = [
        RequestTimes(r.sent_s, r.chunk_times_s[0] if r.chunk_times_s else None, r.end_s, r.response_id) for r in records
    ]
    return request_cost(times, mock_deliveries(url), sampler)


def _run(coro: Coroutine[Any, Any, list[FloorRecord]]) -> list[FloorRecord]:
    """On uvloop where tokenbench runs on it (runner.py), so both clients have the same loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def main() -> None:
    quick = "--quick" in sys.argv
    cases = [CASES[1]] if quick else CASES
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 1 if quick else 2
    table = Table(
        title=f"per-request client cost, {USERS} streams, mock TTFT 50 ms / ITL 10 ms (floor = bare socket; "
        f"tokenbench: {client_build()})"
    )
    for col in (
        "reply",
        "round",
        "client",
        "requests",
        "CPU µs/req",
        "× floor",
        "req/s",
        "err mean ms",
        "err p99 ms",
        "client CPU",
        "mock CPU",
        "tokenbench limited",
    ):
        table.add_column(col, justify="right")
    out_root = Path(tempfile.mkdtemp(prefix="request-overhead-"))
    ratios: dict[str, list[float]] = {}
    for label, api, tokens, requests in cases:
        spec = CalibrationSpec(users=USERS, requests=requests, output_tokens=tokens, api=api)  # type: ignore[arg-type]
        with pinned_mock(spec) as (url, mock):
            for rnd in range(1, rounds + 1):
                floor = floor_run(spec, url, mock.pid)
                tb = calibrate_against(spec, url, mock, out_root)
                assert tb.cost is not None
                ratio = _ratio(tb.cost, floor)
                if ratio is not None:
                    ratios.setdefault(label, []).append(ratio)
                for name, cost, limited in (
                    ("floor", floor, ""),
                    ("tokenbench", tb.cost, ",".join(tb.client_limited_by) or "no"),
                ):
                    table.add_row(
                        label,
                        str(rnd),
                        name,
                        str(cost.requests),
                        _f(cost.cpu_us_per_request, ".0f"),
                        _f(ratio, ".2f") if name == "tokenbench" else "",
                        _f(cost.requests_per_s, ".0f"),
                        _f(cost.error_ms_mean),
                        _f(cost.error_ms_p99),
                        _f(cost.cpu_util, ".0%"),
                        _f(cost.mock_cpu_util, ".0%"),
                        limited,
                    )
    console = Console(width=200)
    console.print(table)
    for label, each in ratios.items():
        console.print(
            f"{label}: tokenbench / floor CPU per request, median {median(each):.2f} (each round: {', '.join(f'{r:.2f}' for r in each)})"
        )
    four = ratios.get("4 tokens", [])
    if four:
        ok = median(four) <= TARGET
        verdict = "[green]ok[/]" if ok else "[red]MISSED[/]"
        console.print(f"4 tokens: median {median(four):.2f} (target ≤ {TARGET}) {verdict}")


def _ratio(tb: RequestCost, floor: RequestCost) -> float | None:
    if tb.cpu_us_per_request is None or not floor.cpu_us_per_request:
        return None
    return tb.cpu_us_per_request / floor.cpu_us_per_request


def _f(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


if __name__ == "__main__":
    main()
