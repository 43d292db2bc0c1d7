"""The live view while a run goes on (Rich): fed from the load's LiveStats, drawn from
its own timer so the load never waits on rendering."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from rich.console import Console
from rich.live import Live
from rich.table import Table

from tokenbench.loadgen.stats import LiveStats


def _ms(value: float | None) -> str:
    return f"{value * 1000:.1f}" if value is not None else "-"


class LiveView:
    """A Rich live panel fed from LiveStats. Refreshes twice a second from its own timer so the
    load generator never waits on rendering."""

    def __init__(self, stats: LiveStats, now: Callable[[], float], console: Console, enabled: bool) -> None:
        self._stats = stats
        self._now = now
        self._console = console
        self._enabled = enabled and console.is_terminal
        self._live: Live | None = None
        self._last = (time.perf_counter(), 0)

    def __enter__(self) -> LiveView:
        if self._enabled:
            self._live = Live(get_renderable=self._render, console=self._console, refresh_per_second=2, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
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
            f"[bold]{s.label}[/]",
            f"elapsed {elapsed:.0f}s",
            f"remaining {remaining}",
            f"users {s.active_users}",
            f"in flight {s.in_flight}",
            f"done {s.done}",
            f"errors {s.errors}",
            f"~{rate:.0f} chunks/s",
            f"TTFT p50 {_ms(ttft)} ms",
        )
        return table
