"""Console output: the per-point summary table and the live view during a run (Rich)."""

from __future__ import annotations

import time

import numpy as np
from rich.console import Console
from rich.live import Live
from rich.table import Table

from ..loadgen import LiveStats


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.1f}"


def _num(value: float | None, fmt: str = ".1f") -> str:
    return "-" if value is None else format(value, fmt)


def summary_table(points: list[dict]) -> Table:
    """One column per load point, one row per metric: fits a terminal for a few points."""
    table = Table(title="tokenbench: latencies in ms over successful requests in the window")
    table.add_column("metric")
    for p in points:
        table.add_column(p["label"], justify="right")

    def row(name: str, fn) -> None:
        table.add_row(name, *(fn(p) for p in points))

    row("requests ok/total", lambda p: f"{p['requests']['ok']}/{p['requests']['total']}")
    row("failures", lambda p: ", ".join(f"{k} {v}" for k, v in p["requests"]["by_outcome"].items() if k != "ok") or "0")
    row("window s", lambda p: _num(p["window_s"]))
    row("output tok/s", lambda p: _num(p["output_tokens_per_s"]))
    row("total tok/s", lambda p: _num(p["total_tokens_per_s"]))
    row("requests/s", lambda p: _num(p["requests_per_s"], ".2f"))
    if any(p["goodput_per_s"] is not None for p in points):
        row("goodput/s (good %)", lambda p: f"{_num(p['goodput_per_s'], '.2f')} ({_num((p['good_fraction'] or 0) * 100, '.0f')}%)")
    for key, name in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL"), ("e2e_s", "E2E"), ("queue_s", "queue")):
        row(f"{name} mean / p50 / p99", lambda p, k=key: f"{_ms(p[k]['mean'])} / {_ms(p[k]['p50'])} / {_ms(p[k]['p99'])}")
    row("in flight mean / peak", lambda p: f"{_num(p['concurrency']['mean'])} / {p['concurrency']['peak']}")
    return table


class LiveView:
    """A Rich live panel fed from LiveStats. Refreshes twice a second from its own timer so the
    load generator never waits on rendering."""

    def __init__(self, stats: LiveStats, now, console: Console, enabled: bool) -> None:
        self._stats = stats
        self._now = now
        self._console = console
        self._enabled = enabled and console.is_terminal
        self._live: Live | None = None
        self._last = (time.perf_counter(), 0)

    def __enter__(self) -> LiveView:
        if self._enabled:
            self._live = Live(get_renderable=self._render, console=self._console,
                              refresh_per_second=2, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def _render(self) -> Table:
        s = self._stats
        elapsed = self._now() - s.started_s
        t, chunks = time.perf_counter(), s.output_chunks
        t0, c0 = self._last
        rate = (chunks - c0) / (t - t0) if t > t0 else 0.0
        if t - t0 > 2:
            self._last = (t, chunks)
        ttft = np.median(s.last_ttfts_s[-100:]) if s.last_ttfts_s else None
        remaining = f"{max(0.0, s.planned_s - elapsed):.0f}s" if s.planned_s else "-"
        table = Table.grid(padding=(0, 2))
        table.add_row(
            f"[bold]{s.label}[/]", f"elapsed {elapsed:.0f}s", f"remaining {remaining}",
            f"users {s.active_users}", f"in flight {s.in_flight}", f"done {s.done}",
            f"errors {s.errors}", f"~{rate:.0f} chunks/s", f"TTFT p50 {_ms(ttft)} ms",
        )
        return table
