"""Agent programs replayed against `tokenbench mock`: how close to its schedule a graph of calls is sent (a program, not a test).

For each case (a recorded session file and a load), runs `python -m tokenbench run --dataset programs`
in a process of its own against one mock started here on 127.0.0.1 (--ttft-ms 20 --itl-ms 2, every
call --output-tokens 4, recorded waits x --program-time-scale), and prints from the run's records
and results: the sessions and calls sent, the schedule's lag (each call's sent_s minus when its
parents allowed it: p50 / p99 / max ms), the sessions' latency (p50, max) beside the script's (the
same graph at the mock's scripted call times: 20 ms to the first token, 26 ms to the last), and the
run's wall time. The real Weka kv-cache-tester sessions are tests/fixtures/programs/weka/.

Run it alone: two measurements on two cores disturb each other.

    python benchmarks/program_replay.py
    python benchmarks/program_replay.py --json benchmarks/results/program_replay.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from tokenbench.common.procs import child_preexec, free_port, stop, wait_http
from tokenbench.datasets.programs import read_programs
from tokenbench.datasets.programs.model import critical_path_s

ROOT = Path(__file__).resolve().parents[1]
WEKA = ROOT / "tests" / "fixtures" / "programs" / "weka"
TTFT_MS, ITL_MS, TOKENS = 20.0, 2.0, 4


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    load: list[str]
    scale: float
    max_requests: int | None = None
    duration_s: float | None = None


CASES = [
    Case("weka-0291 (32 calls, 2 sub-agents) x1", WEKA / "trace_0291.json", ["--users", "1"], 0.001, max_requests=32),
    Case("weka-0277 (53 calls, 4 sub-agents) x1", WEKA / "trace_0277.json", ["--users", "1"], 0.001, max_requests=53),
    Case("weka-0291 x4 at once", WEKA / "trace_0291.json", ["--users", "4"], 0.001, max_requests=128),
    Case("aiperf-subagent at 20 sessions/s", WEKA / "aiperf_subagent.json", ["--rate", "20"], 0.01, duration_s=5),
]


@dataclass
class Row:
    case: str
    sessions: int
    calls: int
    lag_p50_ms: float
    lag_p99_ms: float
    lag_max_ms: float
    session_p50_s: float | None
    session_max_s: float | None
    script_s: float
    wall_s: float


def run_case(case: Case, url: str, out: Path) -> Row:
    cmd = [
        sys.executable, "-m", "tokenbench", "run", "--url", url, "--api", "chat", "--dataset", "programs",
        "--dataset-path", str(case.path), "--program-time-scale", str(case.scale), "--output-tokens", str(TOKENS),
        "--out", str(out), "--no-live", *case.load,
    ]  # fmt: skip
    if case.max_requests is not None:
        cmd += ["--max-requests", str(case.max_requests)]
    if case.duration_s is not None:
        cmd += ["--duration", str(case.duration_s), "--arrival", "constant"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    lags = np.array([r["sent_s"] - r["program_ready_s"] for r in records if r["sent_s"] is not None]) * 1000
    programs = json.loads((out / "results.json").read_text())["points"][0]["programs"]
    [program] = read_programs(case.path)
    scripted = {c.id: (0.0, TTFT_MS / 1000, (TTFT_MS + (TOKENS - 1) * ITL_MS) / 1000) for c in program.calls}
    return Row(
        case=case.name,
        sessions=programs["sessions"]["started"],
        calls=len(records),
        lag_p50_ms=float(np.percentile(lags, 50)),
        lag_p99_ms=float(np.percentile(lags, 99)),
        lag_max_ms=float(lags.max()),
        session_p50_s=programs["session_s"]["p50"],
        session_max_s=programs["session_s"]["max"],
        script_s=critical_path_s(program, scripted, case.scale),
        wall_s=wall,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    port = free_port()
    mock = subprocess.Popen(
        [sys.executable, "-m", "tokenbench", "mock", "--port", str(port), "--ttft-ms", str(TTFT_MS),
         "--itl-ms", str(ITL_MS)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=child_preexec, env=os.environ.copy(),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    rows = []
    try:
        wait_http(url + "/v1/models", 30)
        with tempfile.TemporaryDirectory() as tmp:
            for i, case in enumerate(CASES):
                rows.append(run_case(case, url, Path(tmp) / f"run-{i}"))
    finally:
        stop(mock)
    table = Table(title=f"agent programs against the mock (TTFT {TTFT_MS:g} ms, ITL {ITL_MS:g} ms, {TOKENS} tokens)")
    for col in ("case", "sessions", "calls", "lag p50 / p99 / max ms", "session p50 / max s", "script s", "wall s"):
        table.add_column(col, justify="left" if col == "case" else "right")
    for r in rows:
        table.add_row(
            r.case,
            str(r.sessions),
            str(r.calls),
            f"{r.lag_p50_ms:.2f} / {r.lag_p99_ms:.2f} / {r.lag_max_ms:.2f}",
            f"{r.session_p50_s or 0:.3f} / {r.session_max_s or 0:.3f}",
            f"{r.script_s:.3f}",
            f"{r.wall_s:.1f}",
        )
    Console(width=160).print(table)
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")


if __name__ == "__main__":
    main()
