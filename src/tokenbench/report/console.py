"""Console tables (Rich): a run's per-point summary, an experiment's cells, the backend profiles."""

from __future__ import annotations

from rich.table import Table

from ..catalogue import SERVER_PREEMPTIONS, SERVER_TTFT_MEAN, Distribution, Metric, shown_in


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.1f}"


def _num(value: float | None, fmt: str = ".1f") -> str:
    return "-" if value is None else format(value, fmt)


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


def _dist(point: dict, d: Distribution) -> str:
    """'mean / p50 / p99 (n)' in the distribution's shown unit, one decimal."""
    mean, p50, p99 = (_num(_scaled(d.read(point, s), d.scale)) for s in ("mean", "p50", "p99"))
    count = d.read(point, "count")
    return f"{mean} / {p50} / {p99} ({'-' if count is None else int(count)})"


def summary_table(points: list[dict]) -> Table:
    """One column per load point, one row per metric of the catalogue's console view (a row none
    of the points has is left out; a distribution's statistics share one row), then the point's
    concurrency and the server's own figures: fits a terminal for a few points."""
    table = Table(title="tokenbench: latencies over successful requests in the window")
    table.add_column("metric")
    for p in points:
        table.add_column(p["label"], justify="right")

    def row(name: str, fn) -> None:
        table.add_row(name, *(fn(p) for p in points))

    row("requests ok/total", lambda p: f"{p['requests']['ok']}/{p['requests']['total']}")
    row("failures", lambda p: ", ".join(f"{k} {v}" for k, v in p["requests"]["by_outcome"].items() if k != "ok") or "0")
    row("window s", lambda p: _num(p["window_s"]))
    metrics = shown_in("console")
    for m in metrics:
        if m.distribution is None and any(m.get(p) is not None for p in points):
            row(m.label, lambda p, m=m: _num(_scaled(m.get(p), m.scale), f".{m.digits}f"))
    for d in dict.fromkeys(m.distribution for m in metrics if m.distribution is not None):
        if any(d.read(p, "count") is not None for p in points):
            row(f"{d.name} ({d.unit}) mean / p50 / p99 (n)", lambda p, d=d: _dist(p, d))
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
        row("server: preemptions", lambda p: _num(SERVER_PREEMPTIONS.get(p), ".0f"))
        row("server: generated tokens", srv("generated_tokens", lambda v: _num(v, ".0f")))
        row("server: TTFT mean ms", lambda p: _ms(SERVER_TTFT_MEAN.get(p)))
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


def _ci(stat: dict | None, m: Metric) -> str:
    if not stat or stat.get("mean") is None:
        return "-"
    text = format(stat["mean"] * m.scale, f".{m.digits}f")
    if stat.get("ci95") is not None:
        text += " ± " + format(stat["ci95"] * m.scale, f".{m.digits}f")
    return text


def experiment_table(state: dict) -> Table:
    """One row per (server configuration, variant, load point): trial means ± 95% CI of the
    catalogue's experiment view; n is the first one's number of trials."""
    cells = state.get("cells", {}).values()
    done = sum(1 for c in cells if c.get("status") == "ok")
    failed = [c for c in cells if c.get("status") == "failed"]
    title = f"experiment {state.get('name')}: {done}/{len(state.get('cells', {}))} cells ok"
    if failed:
        title += f", {len(failed)} failed"
    table = Table(title=title + " (mean ± 95% CI over trials)")
    metrics = shown_in("experiment")
    for col in ("server", "variant", "load"):
        table.add_column(col, justify="left")
    for col in ["n"] + [m.label for m in metrics]:
        table.add_column(col, justify="right")
    for row in state.get("aggregates", []):
        stats = row["metrics"]
        table.add_row(
            row["server"],
            row["variant"],
            row["label"],
            str((stats.get(metrics[0].key) or {}).get("n", 0)),
            *(_ci(stats.get(m.key), m) for m in metrics),
        )
    for row in state.get("servers", []):
        if row.get("status") == "failed":
            table.add_row(row["label"], "-", "server failed", "0", *("-" for _ in metrics))
    return table
