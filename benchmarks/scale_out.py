"""Scale-out of the client against `tokenbench mock` (a program, not a test).

1, 2 and 4 local worker processes (and 2 Ray actors on a local Ray) at 256 and 1,024 streams:
chat API, mock TTFT 50 ms, ITL 10 ms, 128 one-word chunks; the mock pinned to one core, the client
(driver and workers) to the other. Prints achieved vs offered tokens/s, TTFT error against what the
mock logged it delivered, the client's CPU µs per token (driver + workers; and each worker's own),
the workers' loop lag p99, and the issue's targets at 256 streams: multi-worker TTFT error within
the noise of one worker's, CPU per token at most 1.2x one worker's.

    python benchmarks/scale_out.py            # everything (~6 min)
    python benchmarks/scale_out.py --quick    # 256 streams, 1 and 2 workers
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from tokenbench.run.calibrate import CalibrationResult, CalibrationSpec, calibrate

# (workers, ray) configurations; streams and requests per stream count
SETUPS = [(1, False), (2, False), (4, False), (2, True)]
LOADS = [(256, 2048), (1024, 4096)]
NOISE_MS = 2.0  # TTFT error means within this of one worker's are "within the noise" (run-to-run spread)
CPU_RATIO = 1.2


def _table(rows: list[tuple[int, bool, CalibrationResult]]) -> Table:
    table = Table(title="scale-out against the mock (error = client-measured - mock-delivered)")
    cols = ("streams", "workers", "ok", "achieved/offered tok/s", "TTFT err mean/p99 ms", "CPU µs/token")
    for col in (*cols, "per worker µs/token", "loop lag p99 ms", "mock CPU"):
        table.add_column(col, justify="right")
    f = lambda v, p=".2f": "-" if v is None else format(v, p)  # noqa: E731
    for workers, ray, r in rows:
        table.add_row(
            str(r.spec.users),
            f"{workers} {'Ray actors' if ray else 'processes' if workers > 1 else 'process'}",
            f"{r.ok}/{r.total}",
            f"{f(r.achieved_tokens_per_s, '.0f')} / {r.offered_tokens_per_s:.0f}",
            f"{f(r.ttft_error_ms_mean)} / {f(r.ttft_error_ms_p99)}",
            f(r.cpu_us_per_token, ".1f"),
            f(r.worker_cpu_us_per_token, ".1f"),
            f(r.loop_lag_p99_ms),
            f(r.mock_cpu_fraction, ".0%"),
        )
    return table


def _verdict(rows: list[tuple[int, bool, CalibrationResult]]) -> Table:
    base = next(r for w, ray, r in rows if w == 1 and r.spec.users == 256)
    table = Table(title="targets at 256 streams (against 1 process)")
    for col in ("workers", "TTFT err mean within noise", "CPU/token ≤ 1.2x"):
        table.add_column(col, justify="right")
    mark = lambda ok: "[green]ok[/]" if ok else "[red]MISSED[/]"  # noqa: E731
    for workers, ray, r in rows:
        if r.spec.users != 256 or (workers == 1 and not ray):
            continue
        d = (r.ttft_error_ms_mean or 0) - (base.ttft_error_ms_mean or 0)
        ratio = (r.cpu_us_per_token or 0) / (base.cpu_us_per_token or 1)
        table.add_row(
            f"{workers}{' Ray' if ray else ''}",
            f"{d:+.2f} ms {mark(abs(d) <= NOISE_MS)}",
            f"{ratio:.2f}x {mark(ratio <= CPU_RATIO)}",
        )
    return table


def main() -> None:
    quick = "--quick" in sys.argv
    setups = SETUPS[:2] if quick else SETUPS
    loads = LOADS[:1] if quick else LOADS
    rows = []
    for users, requests in loads:
        for workers, ray in setups:
            spec = CalibrationSpec(users=users, requests=requests, workers=workers, ray=ray)
            rows.append((workers, ray, calibrate(spec)))
    console = Console(width=220)
    console.print(_table(rows))
    console.print(_verdict(rows))


if __name__ == "__main__":
    main()
