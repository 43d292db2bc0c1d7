"""The report's figures (chart_spec.Chart), built from the rows and the verdict: metrics vs load
(closed and open loop, saturation marked), vs each swept engine knob, the latency–throughput
Pareto front, failures by outcome, where the time went (server spans; agent programs' critical
paths and session timelines: programs.py); and each run's timeline (timeseries_chart.py).

Numbers are in shown units (ms, %, tok/s) — conversion from stored seconds and fractions happens
here, once. Captions quote the verdict's named thresholds.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tokenbench.common.slug import slug
from tokenbench.console.fmt import num, scaled
from tokenbench.metrics.catalogue import (
    OUTPUT_TOKENS_PER_S,
    REQUESTS_PER_S,
    SERVER_PREEMPTIONS,
    TTFT_MEAN,
    TTFT_P50,
    Metric,
)
from tokenbench.report.chart_spec import MAX_TIMESERIES_CHARTS, OUTCOME_COLORS, PALETTE, Chart, Panel, Series
from tokenbench.report.read.data import PhaseRow, PointRow, ReportData
from tokenbench.report.sections.capacity import attainment_chart
from tokenbench.report.sections.programs import program_charts
from tokenbench.report.sections.timeseries_chart import timeseries_chart
from tokenbench.report.sections.verdict import SATURATION_ACHIEVED_FRACTION, SATURATION_TTFT_FACTOR, Verdict


def config_colors(data: ReportData) -> dict[str, str]:
    colors: dict[str, str] = {}
    for r in data.rows:
        colors.setdefault(r.config, PALETTE[len(colors) % len(PALETTE)])
    for s in data.series:
        colors.setdefault(s.config, PALETTE[len(colors) % len(PALETTE)])
    return colors


def _by_config(rows: list[PointRow]) -> dict[str, list[PointRow]]:
    out: dict[str, list[PointRow]] = {}
    for r in rows:
        out.setdefault(r.config, []).append(r)
    for group in out.values():
        group.sort(key=lambda r: r.load_value if r.load_value is not None else float("inf"))
    return out


def _metric_series(rows: list[PointRow], metric: Metric, name: str, color: str | None) -> Series:
    """One configuration's metric vs load, in the metric's shown unit, with its CIs."""
    key, scale = metric.key, metric.scale
    rows = [r for r in rows if r.load_value is not None]
    errors = [scaled(r.metrics[key].ci95, scale) if key in r.metrics else None for r in rows]
    return Series(
        name=name,
        x=[r.load_value for r in rows],
        y=[scaled(r.mean(key), scale) for r in rows],
        error=errors if any(e is not None for e in errors) else None,
        color=color,
        hover=[f"{r.config} · {r.label} · n={r.num_trials}" for r in rows],
    )


# ---------------------------------------------------------------------------------------------
# load curves


def users_charts(data: ReportData) -> list[Chart]:
    """The closed-loop study's figures: TTFT and output token rate vs users."""
    rows = [r for r in data.rows if r.load_kind == "users"]
    if not rows:
        return []
    colors = config_colors(data)
    groups = _by_config(rows)
    trials = max(r.num_trials for r in rows)
    bars = " Error bars: 95% CI over trials." if trials > 1 else ""
    ttft = Chart(
        "ttft-vs-users",
        "TTFT vs concurrent users",
        "concurrent users",
        [Panel(TTFT_MEAN.label, [_metric_series(g, TTFT_MEAN, c, colors[c]) for c, g in groups.items()])],
        caption="Mean time to first token over successful requests in the measurement window, "
        "one line per configuration." + bars,
        section="load",
    )
    tput = Chart(
        "throughput-vs-users",
        "Output token rate vs concurrent users",
        "concurrent users",
        [
            Panel(
                "output tokens/s",
                [_metric_series(g, OUTPUT_TOKENS_PER_S, c, colors[c]) for c, g in groups.items()],
            )
        ],
        caption="Output tokens that arrived in the measurement window per second, all users together "
        "(ramp-up excluded)." + bars,
        section="load",
    )
    return [ttft, tput]


def rate_chart(data: ReportData, verdict: Verdict) -> list[Chart]:
    """Open loop: throughput, TTFT and achieved request rate vs offered rate; saturation marked."""
    rows = [r for r in data.rows if r.load_kind == "rate"]
    if not rows:
        return []
    colors = config_colors(data)
    groups = _by_config(rows)
    sat = {s.config: s for s in verdict.saturation}
    tput, ttft, achieved = [], [], []
    for config, group in groups.items():
        color = colors[config]
        tput.append(_metric_series(group, OUTPUT_TOKENS_PER_S, config, color))
        ttft.append(_replace_legend(_metric_series(group, TTFT_P50, config, color)))
        achieved.append(_replace_legend(_metric_series(group, REQUESTS_PER_S, config, color)))
        s = sat.get(config)
        if s is not None:
            row = next(r for r in group if r.load_value == s.rate_per_s)
            text = [f"{config}: saturated at {s.label} ({s.reason})"]
            for panel, metric in ((tput, OUTPUT_TOKENS_PER_S), (ttft, TTFT_P50), (achieved, REQUESTS_PER_S)):
                panel.append(
                    Series(
                        f"saturation: {config}",
                        [s.rate_per_s],
                        [scaled(row.mean(metric.key), metric.scale)],
                        kind="markers",
                        color=color,
                        symbol="x",
                        hover=text,
                        show_legend=panel is tput,
                    )
                )
    rates = sorted({r.load_value for r in rows if r.load_value is not None})
    ideal: list[float | None] = list(rates)
    achieved.append(Series("offered (ideal)", rates, ideal, kind="dash", color="#999999"))
    saturation_text = "; ".join(f"{s.config} at {s.label}" for s in verdict.saturation) or "no configuration saturated"
    return [
        Chart(
            "throughput-vs-rate",
            "Throughput vs offered request rate",
            "offered requests/s",
            [Panel("output tokens/s", tput), Panel("TTFT p50 (ms)", ttft), Panel("achieved requests/s", achieved)],
            caption="Open-loop load. ✕ marks the saturation point: the first rate whose median TTFT exceeds "
            f"{SATURATION_TTFT_FACTOR:g}x the lowest rate's, or whose achieved request rate is below "
            f"{SATURATION_ACHIEVED_FRACTION:.0%} of the arrivals scheduled in its window. "
            f"Saturation: {saturation_text}.",
            section="load",
        )
    ]


def _replace_legend(series: Series) -> Series:
    # Lower panels repeat the configurations of the first; one legend entry per configuration.
    return replace(series, show_legend=False)


# ---------------------------------------------------------------------------------------------
# engine knobs


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


KnobLine = tuple[Any, ...]  # (backend, other swept values, variant, load kind, load value, label)


def knob_charts(data: ReportData) -> list[Chart]:
    """Throughput (and preemptions) vs each numerically swept engine knob (max_num_seqs,
    kv_memory, ...): one line per backend, other swept values, variant and load."""
    knobs: dict[str, set[Any]] = {}
    for r in data.rows:
        for k, v in r.swept.items():
            if _numeric(v):
                knobs.setdefault(k, set()).add(v)
    return [_knob_chart(data, knob) for knob, values in knobs.items() if len(values) >= 2]


def _knob_lines(data: ReportData, knob: str) -> dict[KnobLine, list[PointRow]]:
    """The rows that swept ``knob``, by everything else they hold fixed, each in knob order."""
    groups: dict[KnobLine, list[PointRow]] = {}
    for r in data.rows:
        if _numeric(r.swept.get(knob)):
            others = tuple(sorted((k, str(v)) for k, v in r.swept.items() if k != knob))
            groups.setdefault((r.backend, others, r.variant, r.load_kind, r.load_value, r.label), []).append(r)
    for group in groups.values():
        group.sort(key=lambda r: r.swept[knob])
    return groups


def _knob_series(key: KnobLine, group: list[PointRow], knob: str, color: str, metric: Metric, legend: bool) -> Series:
    backend, others, variant, _, _, label = key
    name = " ".join(
        [str(backend or "?")]
        + [f"{k}={v}" for k, v in others]
        + ([variant] if variant and variant != "default" else [])
        + [f"· {label}"]
    )
    errs = [scaled(r.metrics[metric.key].ci95, metric.scale) if metric.key in r.metrics else None for r in group]
    return Series(
        name,
        [r.swept[knob] for r in group],
        [scaled(r.mean(metric.key), metric.scale) for r in group],
        error=errs if any(e is not None for e in errs) else None,
        color=color,
        hover=[f"{r.config} · {r.label} · n={r.num_trials}" for r in group],
        show_legend=legend,
    )


def _knob_chart(data: ReportData, knob: str) -> Chart:
    tput, preempt = [], []
    for i, (key, group) in enumerate(_knob_lines(data, knob).items()):
        color = PALETTE[i % len(PALETTE)]
        tput.append(_knob_series(key, group, knob, color, OUTPUT_TOKENS_PER_S, True))
        preempt.append(_knob_series(key, group, knob, color, SERVER_PREEMPTIONS, False))
    panels = [Panel("output tokens/s", tput)]
    if any(v is not None for s in preempt for v in s.y):
        panels.append(Panel("server preemptions per point", preempt))
    return Chart(
        f"knob-{slug(knob.lower(), keep='')}",
        f"Throughput vs {knob}",
        knob,
        panels,
        caption=f"Each line holds everything but {knob} fixed. Preemptions are the server's own "
        "counter delta over the point (null when the engine does not expose it).",
        section="knobs",
    )


# ---------------------------------------------------------------------------------------------
# Pareto front and errors


def pareto_chart(data: ReportData, verdict: Verdict) -> list[Chart]:
    rows = list(data.rows)
    points = [(r, on, xy) for r, on in zip(rows, verdict.pareto) if (xy := _tput_ttft(r)) is not None]
    if len(points) < 2:
        return []
    colors = config_colors(data)
    series = []
    for config in dict.fromkeys(r.config for r, _, _ in points):
        mine = [(r, xy) for r, _, xy in points if r.config == config]
        series.append(
            Series(
                config,
                [x for _, (x, _) in mine],
                [y for _, (_, y) in mine],
                kind="markers",
                color=colors[config],
                hover=[f"{r.config} · {r.label}" for r, _ in mine],
            )
        )
    front = sorted(((r, xy) for r, on, xy in points if on), key=lambda p: p[1][0])
    series.append(
        Series(
            "Pareto front",
            [x for _, (x, _) in front],
            [y for _, (_, y) in front],
            kind="line",
            color="#000000",
            symbol="star",
            hover=[f"Pareto: {r.config} · {r.label}" for r, _ in front],
        )
    )
    return [
        Chart(
            "pareto",
            "Latency–throughput trade-off",
            "output tokens/s",
            [Panel("TTFT mean (ms, log scale)", series, log_y=True)],
            caption="Every configuration at every load. ★ points are on the Pareto front: no other point has "
            "both more throughput and lower mean TTFT. The TTFT axis is logarithmic.",
            section="tradeoff",
        )
    ]


def _tput_ttft(row: PointRow) -> tuple[float, float] | None:
    """A row's place on the trade-off chart: (output tokens/s, TTFT mean in ms); None without both."""
    tput, ttft = row.mean(OUTPUT_TOKENS_PER_S.key), row.mean(TTFT_MEAN.key)
    if tput is None or ttft is None:
        return None
    return tput, ttft * TTFT_MEAN.scale


def error_chart(data: ReportData) -> list[Chart]:
    rows = [r for r in data.rows if sum(r.outcomes.values()) > 0]
    outcomes = sorted({o for r in rows for o, n in r.outcomes.items() if o != "ok" and n > 0})
    if not outcomes:
        return []
    categories = [f"{r.config} · {r.label}" for r in rows]
    series = []
    for outcome in outcomes:
        y: list[float | None] = [100.0 * r.outcomes.get(outcome, 0) / sum(r.outcomes.values()) for r in rows]
        hover = [f"{r.outcomes.get(outcome, 0)} of {sum(r.outcomes.values())} requests" for r in rows]
        series.append(Series(outcome, categories, y, kind="bar", color=OUTCOME_COLORS.get(outcome), hover=hover))
    return [
        Chart(
            "errors",
            "Failed requests by outcome",
            "configuration · load",
            [Panel("% of requests", series, stacked=True)],
            x_categorical=True,
            caption="Every request of each point (all trials), by outcome; ok is left out. `cancelled` "
            "requests were still in flight when the drain timeout ended the point.",
            section="errors",
        )
    ]


# ---------------------------------------------------------------------------------------------
# server spans

# The stacked breakdown's segments, in the order a request meets them: the client's own delay
# (scheduled -> sent), sent -> server arrival, the server's frontend, queue and prefill, its first
# token -> the client's first chunk, then the server's decode.
PHASE_SEGMENTS: tuple[tuple[str, str, str], ...] = (
    ("client", "client (scheduled→sent)", "#7f7f7f"),
    ("network", "sent→server", "#17becf"),
    ("frontend", "frontend", "#9467bd"),
    ("queue", "queue", "#d62728"),
    ("prefill", "prefill", "#ff7f0e"),
    ("delivery", "delivery", "#bcbd22"),
    ("decode", "decode", "#1f77b4"),
)
PHASES_CHART_CAPTION = (
    "One bar per load point with server spans (--server-traces): each segment is a phase's mean in ms over "
    "the point's requests joined to their span (the client's segment: its queue delay, scheduled→sent, over "
    "every successful request), in the order a request meets them. The lower panel gives each segment's share "
    "of its bar, so a queue that grows with the load is seen at a glance. Delivery overlaps the server's "
    "decode in time, so a bar's height is close to, not equal to, the mean E2E latency."
)


def phase_segment(row: PhaseRow, key: str) -> float | None:
    """A segment's mean in seconds: the client's queue delay, else the phase's mean."""
    return row.client_s if key == "client" else row.mean_s.get(key)


def phases_chart(data: ReportData) -> list[Chart]:
    """Where the time went, per load point: the server phases' means stacked (none without spans)."""
    rows = list(data.phases)
    if not rows:
        return []
    categories = [f"{r.config} · {r.label}" for r in rows]
    totals = [sum(abs(v) for key, _, _ in PHASE_SEGMENTS if (v := phase_segment(r, key)) is not None) for r in rows]
    ms, share = [], []
    for key, title, color in PHASE_SEGMENTS:
        values = [phase_segment(r, key) for r in rows]
        hover = [f"{c} · {title}: {num(v, scale=1e3)} ms" for c, v in zip(categories, values)]
        ms.append(Series(title, categories, [scaled(v, 1e3) for v in values], kind="bar", color=color, hover=hover))
        shares: list[float | None] = [
            100.0 * v / t if v is not None and t > 0 else None for v, t in zip(values, totals)
        ]
        share.append(Series(title, categories, shares, kind="bar", color=color, hover=hover, show_legend=False))
    return [
        Chart(
            "server-phases",
            "Where the time went, per load point (server spans)",
            "configuration · load",
            [Panel("mean per request (ms)", ms, stacked=True), Panel("% of the bar", share, stacked=True)],
            x_categorical=True,
            caption=PHASES_CHART_CAPTION,
            section="phases",
        )
    ]


def build_charts(data: ReportData, verdict: Verdict) -> list[Chart]:
    charts = attainment_chart(data.capacities) + users_charts(data) + rate_chart(data, verdict) + knob_charts(data)
    charts += pareto_chart(data, verdict) + error_chart(data) + phases_chart(data) + program_charts(data)
    for i, s in enumerate(data.series[:MAX_TIMESERIES_CHARTS]):
        chart = timeseries_chart(s, i)
        if chart is not None:
            charts.append(chart)
    return charts
