"""Memory over a long run: 256 streams against the mock, the run's RSS sampled every 10 s.

    .venv/bin/python benchmarks/soak.py            # short: 2 minutes (development)
    .venv/bin/python benchmarks/soak.py --full     # 30 minutes
    .venv/bin/python benchmarks/soak.py --minutes 5 --users 128

Prints a table of the load generator's resident memory against the chunks streamed so far (read
from records.jsonl as it grows), the bytes per chunk since the first sample, then the peak
(the run's rusage), which includes summarizing the point at its end (every record read back from disk).
Targets (memory budget): <= 16 bytes of resident memory per streamed chunk, RSS flat during the load.
Run it alone: two measurements on two cores disturb each other.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tokenbench.common.procs import child_preexec, free_port, stop, wait_http  # noqa: E402
from tokenbench.telemetry.sampler import JsonlTail  # noqa: E402


class ChunkCounter:
    """Chunks in records.jsonl so far, reading only what was appended since the last call."""

    def __init__(self, path: Path) -> None:
        self._tail = JsonlTail(path)
        self.chunks = 0
        self.requests = 0

    def update(self) -> int:
        for line in self._tail.new_lines():
            self.chunks += len(json.loads(line)["chunk_times_s"])
            self.requests += 1
        return self.chunks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="30 minutes")
    ap.add_argument("--minutes", type=float, default=None, help="load duration (default 2, --full 30)")
    ap.add_argument("--users", type=int, default=256)
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between RSS samples")
    ap.add_argument("--output-tokens", type=int, default=256)
    ap.add_argument("--itl-ms", type=float, default=10.0)
    args = ap.parse_args()
    minutes = args.minutes if args.minutes is not None else (30.0 if args.full else 2.0)

    port = free_port()
    mock = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tokenbench",
            "mock",
            "--port",
            str(port),
            "--ttft-ms",
            "20",
            "--itl-ms",
            str(args.itl_ms),
            "--output-tokens",
            str(args.output_tokens),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=child_preexec(),
    )
    out = Path(tempfile.mkdtemp(prefix="tokenbench-soak-")) / "run"
    rows = []
    peak_kb = 0
    try:
        wait_http(f"http://127.0.0.1:{port}/health", 30, mock)
        run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tokenbench",
                "run",
                "--url",
                f"http://127.0.0.1:{port}",
                "--users",
                str(args.users),
                "--duration",
                str(minutes * 60),
                "--output-tokens",
                str(args.output_tokens),
                "--input-tokens",
                "16",
                "--no-live",
                "--out",
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=child_preexec(),
        )
        counter = ChunkCounter(out / "records.jsonl")
        proc = psutil.Process(run.pid)
        t0 = time.perf_counter()
        while run.poll() is None:
            time.sleep(args.interval - (time.perf_counter() - t0) % args.interval)
            try:
                rss = proc.memory_info().rss
            except psutil.Error:
                break
            if run.poll() is not None or rss == 0:  # exited (a zombie has no memory)
                break
            rows.append((time.perf_counter() - t0, counter.update(), rss))
        _, stderr = run.communicate()
        # the run's peak RSS, its end-of-point summary included (the largest waited-for child)
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if run.returncode != 0:
            raise SystemExit(f"the run failed ({run.returncode}):\n{stderr.decode()[-2000:]}")
        counter.update()
    finally:
        stop(mock, grace_s=5)

    table = Table(
        title=f"soak: {args.users} streams x {minutes:g} min against the mock "
        f"({args.output_tokens} tokens per reply, ITL {args.itl_ms:g} ms)"
    )
    for name in ("t (s)", "chunks", "RSS MB", "MB since first", "B/chunk since first"):
        table.add_column(name, justify="right")
    load_rows = [r for r in rows if r[0] <= minutes * 60]
    first = next((r for r in load_rows if r[1] > 0), None)
    for t, chunks, rss in rows:
        grown = (rss - first[2]) / 2**20 if first else 0.0
        per = (rss - first[2]) / (chunks - first[1]) if first and chunks > first[1] else None
        table.add_row(
            f"{t:.0f}", f"{chunks:,}", f"{rss / 2**20:.1f}", f"{grown:+.1f}", f"{per:.2f}" if per is not None else "-"
        )
    console = Console()
    console.print(table)
    if first and load_rows:
        last = load_rows[-1]
        slope = (last[2] - first[2]) / max(1, last[1] - first[1])
        peak = peak_kb / 1024
        verdict = "meets" if slope <= 16 else "MISSES"
        console.print(
            f"during the load: {slope:.2f} B/chunk over {last[1] - first[1]:,} chunks ({verdict} <= 16); "
            f"peak RSS (includes the end-of-point summary of {counter.chunks:,} chunks in "
            f"{counter.requests:,} requests): {peak:.0f} MB"
        )
    print(f"run directory: {out}")


if __name__ == "__main__":
    main()
