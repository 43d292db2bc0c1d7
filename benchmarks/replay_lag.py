"""Trace replay's send-time lag against `tokenbench mock` (a program, not a test).

Writes a Mooncake-format trace of evenly spaced rows at 50 req/s (never downloaded), starts the
mock on 127.0.0.1 (TTFT 50 ms, ITL 10 ms), replays the trace at speed 1 and prints, over every
request: the client's send lag (sent_s - scheduled_s, the replay's queue delay) and the mock's
receive lag (when the mock logged the request - scheduled_s, on the same monotonic clock) as
p50 / p99 / max in ms, against the issue's target (send-time lag p99 <= 5 ms at 50 req/s).

    python benchmarks/replay_lag.py              # 20 s of trace (1000 rows)
    python benchmarks/replay_lag.py --seconds 5  # a quick look
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from tokenbench.common.procs import free_port, stop, wait_http
from tokenbench.config import DatasetConfig, ReplayLoad, RunConfig, StopConfig, TargetConfig
from tokenbench.run import run

RATE_PER_S = 50.0
TARGET_P99_MS = 5.0
OUTPUT_TOKENS = 16  # 50 ms + 15 x 10 ms = 0.2 s a reply: ~10 in flight at 50 req/s


def write_trace(path: Path, seconds: float) -> int:
    """Rows every 20 ms, 64-token prompts in 16-token blocks (a shared first block)."""
    n = int(seconds * RATE_PER_S)
    with path.open("w") as f:
        for i in range(n):
            row = {"timestamp": i * 1000 / RATE_PER_S, "input_length": 64, "output_length": OUTPUT_TOKENS}
            f.write(json.dumps({**row, "hash_ids": [0, 3 * i + 1, 3 * i + 2, 3 * i + 3]}) + "\n")
    return n


def replay(url: str, trace: Path, out: Path) -> dict:
    cfg = RunConfig(
        target=TargetConfig(url=url, api="completions", ignore_eos=True),
        loads=[ReplayLoad(speed=1.0)],
        stop=StopConfig(schedule_ends=True, drain_timeout_s=30),
        dataset=DatasetConfig(name="trace", path=trace, block_size=16),
        live=False,
        out_dir=out,
    )
    return run(cfg, Console(file=io.StringIO())).results


def lags_ms(run_dir: Path, url: str, origin_s: float) -> tuple[np.ndarray, np.ndarray]:
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        log = json.loads(resp.read())
    sent = np.array([r["sent_s"] - r["scheduled_s"] for r in records if r["sent_s"] is not None])
    received = np.array(
        [log[r["response_id"]]["received_s"] - origin_s - r["scheduled_s"] for r in records if r["response_id"] in log]
    )
    return sent * 1e3, received * 1e3


def table(rows: list[tuple[str, np.ndarray]], offered: int) -> Table:
    t = Table(title=f"trace replay at {RATE_PER_S:g} req/s: lag behind the trace's schedule (ms)")
    for col in ("lag", "n", "p50", "p99", "max", f"p99 <= {TARGET_P99_MS:g} ms"):
        t.add_column(col, justify="right")
    for name, x in rows:
        p50, p99, mx = np.percentile(x, 50), np.percentile(x, 99), x.max()
        verdict = "[green]ok[/]" if p99 <= TARGET_P99_MS else "[red]MISSED[/]"
        t.add_row(name, f"{len(x)}/{offered}", f"{p50:.2f}", f"{p99:.2f}", f"{mx:.2f}", verdict)
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of trace to replay")
    args = parser.parse_args()
    port = free_port()
    cmd = [sys.executable, "-m", "tokenbench", "mock", "--port", str(port), "--ttft-ms", "50", "--itl-ms", "10"]
    mock = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/health", 20.0, mock)
        with tempfile.TemporaryDirectory() as tmp:
            trace = Path(tmp) / "trace.jsonl"
            n = write_trace(trace, args.seconds)
            results = replay(url, trace, Path(tmp) / "run")
            sent, received = lags_ms(Path(tmp) / "run", url, results["clock"]["origin_monotonic_s"])
        point = results["points"][0]
        console = Console(width=120)
        console.print(table([("client send (sent - scheduled)", sent), ("mock receive", received)], n))
        console.print(
            f"requests ok {point['requests']['ok']}/{point['requests']['total']}, "
            f"offered {point['offered_per_s']:.2f} req/s, in flight mean {point['concurrency']['mean']:.1f}"
        )
    finally:
        stop(mock, grace_s=10)


if __name__ == "__main__":
    main()
