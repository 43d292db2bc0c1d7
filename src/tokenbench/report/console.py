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
    if any(p.get("offered_per_s") is not None for p in points):
        row("offered/s (scheduled in window)", lambda p: _num(p.get("offered_per_s"), ".2f"))
    if any(p["goodput_per_s"] is not None for p in points):
        row(
            "goodput/s (good %)",
            lambda p: f"{_num(p['goodput_per_s'], '.2f')} ({_num((p['good_fraction'] or 0) * 100, '.0f')}%)",
        )
    for key, name in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL"), ("e2e_s", "E2E"), ("queue_s", "queue")):
        row(
            f"{name} mean / p50 / p99 (n)",
            lambda p, k=key: f"{_ms(p[k]['mean'])} / {_ms(p[k]['p50'])} / {_ms(p[k]['p99'])} ({p[k]['count']})",
        )
    row("in flight mean / peak", lambda p: f"{_num(p['concurrency']['mean'])} / {p['concurrency']['peak']}")
    servers = [p.get("server") or {} for p in points]
    if any(servers):

        def srv(key: str, fmt=_num):
            return lambda p: fmt((p.get("server") or {}).get(key))

        def gauge(key: str, scale: float = 1.0):
            def fn(p):
                g = (p.get("server") or {}).get(key)
                return "-" if not g else f"{g['mean'] * scale:.1f} / {g['max'] * scale:.1f}"

            return fn

        if any(s.get("bracketed") is False for s in servers):
            # no scrape at/before the window's start or at/after its end: counters cover less
            row(
                "server: window bracketed",
                lambda p: {True: "yes", False: "NO", None: "-"}[(p.get("server") or {}).get("bracketed")],
            )
        row("server: preemptions", srv("preemptions", lambda v: _num(v, ".0f")))
        row("server: generated tokens", srv("generated_tokens", lambda v: _num(v, ".0f")))
        row("server: TTFT mean ms", srv("ttft_s_mean", _ms))
        row(
            "  client, same requests",
            lambda p: _ms(((p.get("server") or {}).get("client_ttft_s_matched") or {}).get("mean")),
        )
        row("server: running mean / max", gauge("running"))
        row("server: waiting mean / max", gauge("waiting"))
        row("server: KV usage % mean / max", gauge("kv_usage", 100.0))
    return table


def backends_table(profiles) -> Table:
    table = Table(title="tokenbench backends (tokenbench backends show NAME prints the launch command)")
    for col in ("name", "engine", "APIs", "metrics", "ignore_eos", "cold start includes"):
        table.add_column(col)
    for p in profiles:
        metrics = "-" if p.metrics is None else p.metrics.path
        table.add_row(
            p.name, p.title, ", ".join(p.apis), metrics, "yes" if p.ignore_eos else "no", p.cold_start_includes
        )
    return table


def profile_panel(profile, spec) -> Table:
    """What a profile knows, under its launch command."""
    table = Table.grid(padding=(0, 2))
    table.add_row("engine", profile.title)
    table.add_row("APIs", ", ".join(profile.apis) + f" (default {profile.default_api})")
    table.add_row("ready", f"GET http://{spec.host}:{spec.port}{profile.ready_path}")
    table.add_row("usage", profile.usage or "-")
    table.add_row("ignore_eos", "honoured" if profile.ignore_eos else "not supported")
    if profile.metrics is None:
        table.add_row("metrics", "no Prometheus endpoint")
    else:
        table.add_row("metrics", profile.metrics.path)
        for field, names in {**profile.metrics.fields(), **profile.metrics.histograms()}.items():
            table.add_row(f"  {field}", " | ".join(names) or "- (not exposed)")
    for quirk in profile.quirks:
        table.add_row("quirk", quirk)
    table.add_row("cold start", profile.cold_start_includes)
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
            self._live = Live(get_renderable=self._render, console=self._console, refresh_per_second=2, transient=True)
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


def _ci(metric: dict | None, scale: float = 1.0, fmt: str = ".1f") -> str:
    if not metric or metric.get("mean") is None:
        return "-"
    text = format(metric["mean"] * scale, fmt)
    if metric.get("ci95") is not None:
        text += " ± " + format(metric["ci95"] * scale, fmt)
    return text


def experiment_table(state: dict) -> Table:
    """One row per (server configuration, variant, load point): trial means ± 95% CI."""
    cells = state.get("cells", {}).values()
    done = sum(1 for c in cells if c.get("status") == "ok")
    failed = [c for c in cells if c.get("status") == "failed"]
    title = f"experiment {state.get('name')}: {done}/{len(state.get('cells', {}))} cells ok"
    if failed:
        title += f", {len(failed)} failed"
    table = Table(title=title + " (mean ± 95% CI over trials)")
    for col in (
        "server",
        "variant",
        "load",
        "n",
        "output tok/s",
        "TTFT p50 ms",
        "TPOT mean ms",
        "errors %",
        "preemptions",
    ):
        table.add_column(col, justify="left" if col in ("server", "variant", "load") else "right")
    for row in state.get("aggregates", []):
        m = row["metrics"]
        table.add_row(
            row["server"],
            row["variant"],
            row["label"],
            str(m["output_tokens_per_s"]["n"]),
            _ci(m["output_tokens_per_s"]),
            _ci(m["ttft_s_p50"], 1e3),
            _ci(m["tpot_s_mean"], 1e3),
            _ci(m["error_rate"], 100.0),
            _ci(m["server_preemptions"], fmt=".0f"),
        )
    for row in state.get("servers", []):
        if row.get("status") == "failed":
            table.add_row(row["label"], "-", "server failed", "0", "-", "-", "-", "-", "-")
    return table
