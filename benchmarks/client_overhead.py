"""Client overhead and accuracy against `tokenbench mock` (a program, not a test).

Two loads, chat API, mock TTFT 50 ms, ITL 10 ms, 128 one-word chunks; the mock pinned to one core
and the client to the other. Prints, per load: TTFT and ITL error against what the mock logged it
delivered (mean, p99), client CPU-µs per streamed token in the steady window, achieved vs offered
tokens/s, and whether the issue's targets are met.

    python benchmarks/client_overhead.py            # both loads
    python benchmarks/client_overhead.py --quick    # 32 streams only
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table

from tokenbench.run.calibrate import CalibrationSpec, calibrate, calibration_table

LOADS = [(32, 400), (256, 2048)]
# Targets on 2 cores (the client's timing budget): (TTFT err mean ms, TTFT err p99 ms, CPU µs/token or None, full rate)
TARGETS = {32: (1.0, 4.0, None, False), 256: (5.0, 30.0, 30.0, True)}


def main() -> None:
    loads = LOADS[:1] if "--quick" in sys.argv else LOADS
    results = [calibrate(CalibrationSpec(users=u, requests=n)) for u, n in loads]
    console = Console(width=200)
    console.print(calibration_table(results))
    verdict = Table(title="targets")
    for col in ("streams", "TTFT err mean", "TTFT err p99", "CPU µs/token", "achieved/offered"):
        verdict.add_column(col, justify="right")
    for r in results:
        mean_t, p99_t, cpu_t, full = TARGETS[r.spec.users]
        mark = lambda ok: "[green]ok[/]" if ok else "[red]MISSED[/]"  # noqa: E731
        ratio = (r.achieved_tokens_per_s or 0) / r.offered_tokens_per_s
        verdict.add_row(
            str(r.spec.users),
            f"{r.ttft_error_ms_mean:.2f} ≤ {mean_t} {mark(r.ttft_error_ms_mean <= mean_t)}",
            f"{r.ttft_error_ms_p99:.2f} ≤ {p99_t} {mark(r.ttft_error_ms_p99 <= p99_t)}",
            f"{r.cpu_us_per_token:.1f}" + (f" ≤ {cpu_t} {mark(r.cpu_us_per_token <= cpu_t)}" if cpu_t else ""),
            f"{ratio:.1%}" + (f" {mark(ratio >= 0.95)}" if full else ""),
        )
    console.print(verdict)


if __name__ == "__main__":
    main()
