"""Console tables (Rich): a run's per-point summary, an experiment's cells, the backend profiles."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from rich.table import Table

from tokenbench.console.fmt import NULL_TEXT, num, scaled
from tokenbench.metrics.catalogue import (
    ACCURACY,
    METRICS,
    OUTPUT_TOKENS_PER_S,
    SERVER_PREEMPTIONS,
    SERVER_TTFT_MEAN,
    STREAMED,
    Distribution,
    Metric,
    metric_of,
    shown_in,
)
from tokenbench.records import UNFINISHED, Outcome
from tokenbench.results import Distribution as Stats
from tokenbench.results import Experiment, Gauge, PointResult, RunResults, TrialStat
from tokenbench.results.imported import NO_REQUESTS
from tokenbench.results.manifest import ATTACHED
from tokenbench.telemetry.client_health import CPU_LIMIT, LAG_MARGIN, LOOP_LAG_LIMIT_S, MIN_SLOW_TICKS, advice
from tokenbench.telemetry.prom import ROUTED_PREFIX

if TYPE_CHECKING:  # only the backends commands print these tables; the report never imports backends
    from tokenbench.backends.base import LaunchSpec, Profile


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.1f}"


def _num(value: float | None, fmt: str = ".1f") -> str:
    return "-" if value is None else format(value, fmt)


def _dist(point: PointResult, d: Distribution) -> str:
    """'mean / p50 / p99 (n)' in the distribution's shown unit, one decimal."""
    mean, p50, p99 = (_num(scaled(d.read(point, s), d.scale)) for s in ("mean", "p50", "p99"))
    count = d.read(point, "count")
    return f"{mean} / {p50} / {p99} ({'-' if count is None else int(count)})"


def _gauge(g: Gauge | None, scale: float = 1.0) -> str:
    return "-" if not g else f"{g.mean * scale:.1f} / {g.max * scale:.1f}"


_Row = Callable[[str, Callable[[PointResult], str]], None]


def summary_table(results: RunResults | Sequence[PointResult], workload: str | None = None) -> Table:
    """One column per load point, one row per metric of the catalogue's console view (a row none
    of the points has is left out; a distribution's statistics share one row), then the point's
    concurrency and the server's own figures: fits a terminal for a few points. The title names
    what was measured (``summary_title``: model, URL, ``workload``'s lengths); the caption says
    how to read the figures together (``cancelled_caption``, ``limited_caption``)."""
    points = list(results.points if isinstance(results, RunResults) else results)
    title = summary_title(results, workload) if isinstance(results, RunResults) else None
    table = Table(title=title or "tokenbench: latencies over successful requests in the window")
    table.add_column("metric")
    for p in points:
        table.add_column(p.label, justify="right")

    def row(name: str, fn: Callable[[PointResult], str]) -> None:
        table.add_row(name, *(fn(p) for p in points))

    row("requests ok/total", lambda p: f"{p.requests.ok}/{p.requests.total}")
    row("failures", failures_text)
    _unfinished_rows(row, points)
    row("window s", lambda p: _num(p.window_s))
    _metric_rows(row, points)
    row("in flight mean / peak", lambda p: f"{_num(p.concurrency.mean)} / {p.concurrency.peak}")
    if any(p.programs for p in points):
        _program_rows(row, points)
    captions = [cancelled_caption(points)]
    if any(p.client for p in points):
        _client_rows(row, points)
        captions.append(limited_caption(points))
    if any(p.server for p in points):
        _server_rows(row, points)
    table.caption = "\n".join(c for c in captions if c) or None
    return table


def summary_title(results: RunResults, workload: str | None = None) -> str:
    """What was measured, in one line: the model, where it was served, the workload (``workload``:
    the lengths the run asked for; else the dataset's name), then how to read the latencies."""
    target = results.target
    served = f"{target.model or 'model ?'} at {target.url or '?'}"
    if target.backend and target.backend != ATTACHED:
        served += f" ({target.backend})"
    if workload is None and results.dataset is not None:
        workload = results.dataset.name
    head = f"tokenbench: {served}" + (f", {workload}" if workload else "")
    return head + "\nlatencies over successful requests in the window"


def workload_text(dataset: str, input_tokens: int | None, output_tokens: int | None) -> str:
    """'synthetic: input 512 / output 128 tokens' (None: the dataset's own lengths)."""
    inp = "the dataset's" if input_tokens is None else str(input_tokens)
    out = "the dataset's" if output_tokens is None else str(output_tokens)
    return f"{dataset}: input {inp} / output {out} tokens"


def failures_text(p: PointResult) -> str:
    """The failed requests by outcome; the requests the run stopped (cancelled, never sent, their
    worker lost) are not failures (METRICS.md "Outcomes"): ``_unfinished_rows`` lists them."""
    stopped = {o.value for o in UNFINISHED}
    failed = {k: v for k, v in p.requests.by_outcome.items() if k != Outcome.OK.value and k not in stopped}
    return ", ".join(f"{k} {v}" for k, v in failed.items()) or "0"


# The requests the run, not the server, ended: a row each where some point has them.
_UNFINISHED_ROWS = (
    (Outcome.CANCELLED, "cancelled at the point's end (not failures)"),
    (Outcome.NOT_SENT, "never sent (not failures)"),
    (Outcome.WORKER_LOST, "worker lost (not failures)"),
)


def _unfinished_rows(row: _Row, points: list[PointResult]) -> None:
    for outcome, name in _UNFINISHED_ROWS:
        if any(p.requests.by_outcome.get(outcome.value) for p in points):
            row(name, _outcome_count(outcome))


def _outcome_count(outcome: Outcome) -> Callable[[PointResult], str]:
    return lambda p: str(p.requests.by_outcome.get(outcome.value, 0))


def cancelled_tokens_text(p: PointResult) -> str:
    """'496 of 4 streams' ('0' when no cancelled stream gave output tokens)."""
    if not p.cancelled_streams:
        return "0"
    return f"{p.cancelled_output_tokens or 0:.0f} of {p.cancelled_streams} streams"


def cancelled_caption(points: Sequence[PointResult]) -> str | None:
    """The rule that makes tok/s and req/s read together, on a run where it matters: output
    throughput counts the tokens of streams cancelled mid-reply, request rate counts completed
    requests only. One line per such point: 'output tok/s 386.0 at 4 users includes 4 cancelled
    streams' 496 tokens (...)'."""
    lines = [
        f"output tok/s {_num(OUTPUT_TOKENS_PER_S.get(p))} at {p.label} includes {p.cancelled_streams} cancelled "
        f"streams' {p.cancelled_output_tokens or 0:.0f} tokens"
        for p in points
        if p.cancelled_streams
    ]
    if not lines:
        return None
    return "; ".join(lines) + (
        ": request rate counts completed requests only, so the two read apart on a short or interrupted point"
        " (cancelled requests are not failures)."
    )


def _client_rows(row: _Row, points: list[PointResult]) -> None:
    """The client's own health over the window (results' ``client``)."""
    row("client: CPU max % of a core", lambda p: _num(None if p.client is None else p.client.cpu_util_max * 100.0))
    row("client: loop lag p99 ms", lambda p: _ms(None if p.client is None else p.client.loop_lag_p99_s))
    row("client: limited", lambda p: "-" if p.client is None else "YES" if p.client.limited else "no")


def limited_caption(points: Sequence[PointResult]) -> str | None:
    """A plain sentence for the points the client limited (None: none was)."""
    limited = [(p.label, p.client) for p in points if p.client is not None and p.client.limited]
    if not limited:
        return None
    rule = (
        f"its loop lag p99 > {LOOP_LAG_LIMIT_S * LAG_MARGIN * 1e3:g} ms with {MIN_SLOW_TICKS}+ ticks over "
        f"{LOOP_LAG_LIMIT_S * 1e3:g} ms, or its CPU > {CPU_LIMIT:.0%} of a core"
    )
    by_advice: dict[str, list[str]] = {}
    for label, client in limited:
        by_advice.setdefault(advice(client), []).append(label)
    return (
        f"CLIENT-LIMITED: {', '.join(label for label, _ in limited)}: the client, not the server, set these "
        f"numbers ({rule}): " + "; ".join(f"{', '.join(labels)}: {text}" for text, labels in by_advice.items()) + "."
    )


def _metric_rows(row: _Row, points: list[PointResult]) -> None:
    """The catalogue's console view: one row per plain metric, one per distribution."""
    metrics = shown_in("console")
    for m in metrics:
        if m.distribution is None and any(m.get(p) is not None for p in points):
            row(m.label, _metric_cell(m))
            if m is OUTPUT_TOKENS_PER_S and any(p.cancelled_streams for p in points):
                row("  incl. tokens of cancelled streams", cancelled_tokens_text)
            if m is ACCURACY:
                row("  Wilson 95% interval (correct/graded, not graded)", _accuracy_detail)
    pooling = all(p.pooling is not None for p in points)  # pooling APIs: no streamed metrics
    for d in dict.fromkeys(m.distribution for m in metrics if m.distribution is not None):
        if pooling and d.key in STREAMED:
            continue
        # an optional one (TTFO, per-token ITL) only where some point measured it
        if any(d.read(p, "count") if d.optional else d.read(p, "count") is not None for p in points):
            row(f"{d.name} ({d.unit}) mean / p50 / p99 (n)", _dist_cell(d))


def _accuracy_detail(p: PointResult) -> str:
    """A graded point's interval and counts: "[61.2, 88.1] (16/20, 1)"."""
    a = p.accuracy
    if a is None:
        return "-"
    interval = "-" if a.ci_low is None or a.ci_high is None else f"[{a.ci_low * 100:.1f}, {a.ci_high * 100:.1f}]"
    return f"{interval} ({a.correct}/{a.graded}, {a.not_graded})"


def _program_rows(row: _Row, points: list[PointResult]) -> None:
    """Agent programs: the sessions, their latency, the schedule's lag and where the critical path went."""

    def sessions(p: PointResult) -> str:
        c = p.programs.sessions if p.programs else None
        return f"{c.completed}/{c.started}" if c is not None else "-"

    def parts(p: PointResult) -> str:
        share = p.programs.critical_path.share if p.programs else {}
        shown = [(k, v) for k, v in share.items() if v]
        return ", ".join(f"{k} {v * 100:.0f}%" for k, v in sorted(shown, key=lambda kv: -kv[1])[:4]) or "-"

    row("sessions completed/started", sessions)
    row("session latency (s) mean / p50 / p99 (n)", lambda p: _dist_s(p.programs.session_s) if p.programs else "-")
    row("schedule lag (ms) p50 / p99", lambda p: _lag(p.programs.schedule_lag_s) if p.programs else "-")
    row("critical path: where the time went", parts)


def _dist_s(d: Stats) -> str:
    return f"{_num(d.mean, '.2f')} / {_num(d.p50, '.2f')} / {_num(d.p99, '.2f')} ({d.count})"


def _lag(d: Stats) -> str:
    return f"{_ms(d.p50)} / {_ms(d.p99)}"


def _metric_cell(m: Metric) -> Callable[[PointResult], str]:
    return lambda p: _num(scaled(m.get(p), m.scale), f".{m.digits}f")


def _dist_cell(d: Distribution) -> Callable[[PointResult], str]:
    return lambda p: _dist(p, d)


def _server_rows(row: _Row, points: list[PointResult]) -> None:
    """The server's own figures over the window (its counters and gauges)."""
    if any(p.server is not None and p.server.bracketed is False for p in points):
        # no scrape at/before the window's start or at/after its end: counters cover less
        row(
            "server: window bracketed",
            lambda p: "-" if p.server is None else {True: "yes", False: "NO"}[p.server.bracketed],
        )
    row("server: preemptions", lambda p: _num(SERVER_PREEMPTIONS.get(p), ".0f"))
    row("server: generated tokens", lambda p: _num(p.server.generated_tokens if p.server else None, ".0f"))
    row("server: TTFT mean ms", lambda p: _ms(SERVER_TTFT_MEAN.get(p)))
    row(
        "  client, same requests",
        lambda p: _ms(p.server.client_ttft_s_matched.mean if p.server and p.server.client_ttft_s_matched else None),
    )
    row("server: running mean / max", lambda p: _gauge(p.server.running if p.server else None))
    row("server: waiting mean / max", lambda p: _gauge(p.server.waiting if p.server else None))
    row("server: KV usage % mean / max", lambda p: _gauge(p.server.kv_usage if p.server else None, 100.0))


def backends_table(profiles: Iterable[Profile]) -> Table:
    table = Table(title="tokenbench backends (tokenbench backends show NAME prints the launch command)")
    for col in ("name", "engine", "APIs", "metrics", "ignore_eos", "cold start includes"):
        table.add_column(col)
    for p in profiles:
        metrics = "-" if p.metrics is None else p.metrics.path
        table.add_row(
            p.name, p.title, ", ".join(p.apis), metrics, "yes" if p.ignore_eos else "no", p.cold_start_includes
        )
    return table


def profile_panel(profile: Profile, spec: LaunchSpec) -> Table:
    """What a profile knows, under its launch command."""
    table = Table.grid(padding=(0, 2))
    table.add_row("engine", profile.title)
    table.add_row("APIs", ", ".join(profile.apis) + f" (default {profile.default_api})")
    table.add_row("ready", f"GET http://{spec.host}:{spec.port}{profile.ready_url_path(spec)}")
    table.add_row("usage", profile.usage or "-")
    table.add_row("ignore_eos", "honoured" if profile.ignore_eos else "not supported")
    if profile.metrics is None:
        table.add_row("metrics", "no Prometheus endpoint")
    else:
        table.add_row("metrics", profile.metrics.path)
        for field, names in {**profile.metrics.fields(), **profile.metrics.histograms()}.items():
            table.add_row(f"  {field}", " | ".join(names) or "- (not exposed)")
        if profile.metrics.routed_requests_by_worker:  # a router: one field per replica
            table.add_row(f"  {ROUTED_PREFIX}HOST:PORT", " | ".join(profile.metrics.routed_requests_by_worker))
    for quirk in profile.quirks:
        table.add_row("quirk", quirk)
    table.add_row("cold start", profile.cold_start_includes)
    return table


def _ci(stat: TrialStat | None, m: Metric) -> str:
    if stat is None or stat.mean is None:
        return "-"
    text = format(stat.mean * m.scale, f".{m.digits}f")
    if stat.ci95 is not None:
        text += " ± " + format(stat.ci95 * m.scale, f".{m.digits}f")
    return text


def stages_table(results: RunResults) -> Table | None:
    """A run with a staged point: one row per stage, its target, what arrived within it and its
    backlog (results' ``stages``, as the report's Stages section shows them); None without one."""
    staged = [p for p in results.points if p.stages]
    if not staged:
        return None
    table = Table(title="tokenbench: stage by stage (requests scheduled in each; backlog: scheduled, not yet ended)")
    for name in ("load", "stage", "window (s)", "target", "requests", "req/s", "output tok/s", "SLO met %"):
        table.add_column(name, justify="left" if name in ("load", "target") else "right")
    for name in ("TTFT p50 (ms)", "TTFT p99 (ms)", "backlog start → end", "peak", "growth /s", "drained (s)"):
        table.add_column(name, justify="right")
    for p in staged:
        for s in p.stages or []:
            b = s.backlog
            level = f"{s.target_rate_per_s:g} req/s" if s.target_rate_per_s is not None else f"{s.target_users} users"
            good = None if s.good_fraction is None else float(s.good_fraction) * 100
            table.add_row(
                p.label,
                str(s.index + 1),
                f"{s.start_s:g}–{s.end_s:g}",
                level + (f", ramp {s.ramp_s:g}s" if s.ramp_s else ""),
                str(s.requests),
                _num(float(s.requests_per_s), ".2f"),
                _num(float(s.output_tokens_per_s)),
                _num(good, ".0f"),
                _ms(s.ttft_s.p50),
                _ms(s.ttft_s.p99),
                f"{b.at_start} → {b.at_end}",
                str(b.peak),
                _num(float(b.growth_per_s), ".2f"),
                _num(None if b.drain_s is None else float(b.drain_s), ".2f"),
            )
    return table


def trials_table(results: RunResults) -> Table | None:
    """A run whose loads ran more than once (--trials N): one row per load, the mean ± 95% CI over
    its trials of the experiment view's metrics, as an experiment's table; None when every load
    ran once."""
    from tokenbench.results import mean_ci95
    from tokenbench.results.trials import trial_groups

    groups = trial_groups(results.points)
    if all(len(g) == 1 for g in groups):
        return None
    stats = [{m.key: mean_ci95([m.get(p) for p in g]) for m in shown_in("experiment")} for g in groups]
    metrics = tuple(m for m in shown_in("experiment") if any(s[m.key].mean is not None for s in stats))
    table = Table(title="tokenbench: each load over its trials (mean ± 95% CI)")
    table.add_column("load")
    table.add_column("n", justify="right")
    for m in metrics:
        table.add_column(m.label, justify="right")
    for g, stat in zip(groups, stats):
        table.add_row(g[0].label, str(len(g)), *(_ci(stat[m.key], m) for m in metrics))
    return table


def experiment_columns(state: Experiment) -> tuple[Metric, ...]:
    """The catalogue's experiment view (TTFT mean, p50 and p99, good %, ...), less a column no
    aggregate row has (good % without an SLO, the server's figures of an attached server)."""
    metrics = shown_in("experiment")
    if not state.aggregates:
        return metrics
    has = {k for row in state.aggregates for k, stat in row.metrics.items() if stat.mean is not None}
    return tuple(m for m in metrics if m.key in has)


def experiment_table(state: Experiment) -> Table:
    """One row per (server configuration, variant, load point): trial means ± 95% CI of the
    catalogue's experiment view; n is the first one's number of trials."""
    cells = state.cells.values()
    done = sum(1 for c in cells if c.status == "ok")
    failed = [c for c in cells if c.status == "failed"]
    title = f"experiment {state.name}: {done}/{len(state.cells)} cells ok"
    if failed:
        title += f", {len(failed)} failed"
    table = Table(title=title + " (mean ± 95% CI over trials)")
    metrics = experiment_columns(state)
    for col in ("server", "variant", "load"):
        table.add_column(col, justify="left")
    for col in ["n"] + [m.label for m in metrics]:
        table.add_column(col, justify="right")
    for row in state.aggregates:
        first = row.metrics.get(metrics[0].key) if metrics else None
        table.add_row(
            row.server,
            row.variant,
            row.label,
            str(0 if first is None else first.n),
            *(_ci(row.metrics.get(m.key), m) for m in metrics),
        )
    for server in state.servers:
        if server.status == "failed":
            table.add_row(server.label, "-", "server failed", "0", *("-" for _ in metrics))
    return table


def imported_table(results: RunResults) -> Table:
    """An imported run's figures as its tool gave them beside tokenbench's over the same requests,
    point by point: the difference, and the definition that explains it (results.json
    ``imported``)."""
    imported = results.imported
    assert imported is not None  # only for a run tokenbench import wrote
    over = "no requests to compute tokenbench's over" if imported.aggregate_only else "over the same requests"
    table = Table(title=f"{imported.tool}'s figures vs tokenbench's, {over}", title_justify="left")
    for header in ("point", "metric", imported.tool, "tokenbench", "difference", "why"):
        table.add_column(header, justify="right" if header in (imported.tool, "tokenbench", "difference") else "left")
    for point in imported.points:
        for f in point.figures:
            metric = metric_of(f.metric) or METRICS[f.metric]
            diff = NULL_TEXT if f.difference is None else f"{f.difference * 100:+.2f}%"
            diff = NO_REQUESTS if imported.aggregate_only else diff
            why = "same definition" if f.same_definition else f.definition
            theirs, ours = (num(v, metric.digits, metric.scale) for v in (f.tool_value, f.tokenbench_value))
            title = f"{metric.title} ({metric.unit})" if metric.unit else metric.title
            table.add_row(str(point.index), title, theirs, ours, diff, why)
    return table
