"""The report's figures as plain data (Chart -> Panel -> Series), built from the rows, the time
series and the verdict. Two renderers draw the same specs: plotly for report.html (html.py) and
matplotlib for charts/*.png (png.py), so the PNGs and the page never disagree.

Text here is raw (unescaped); each renderer escapes for its medium. Numbers are in shown units
(ms, %, tok/s) — conversion from stored seconds and fractions happens here, once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..catalogue import OUTPUT_TOKENS_PER_S, REQUESTS_PER_S, SERVER_PREEMPTIONS, TTFT_MEAN, TTFT_P50, Metric
from .data import PointRow, ReportData, RunSeries
from .stability import run_stabilities
from .verdict import Verdict

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
OUTCOME_COLORS = {
    "http_error": "#d62728",
    "connect_error": "#9467bd",
    "timeout": "#ff7f0e",
    "stream_error": "#8c564b",
    "no_output": "#e377c2",
    "cancelled": "#7f7f7f",
}
# Time-series figures beyond this many runs are left out of the page (the stability table still
# lists every run): a 10-trial sweep would otherwise draw hundreds of near-identical panels.
MAX_TIMESERIES_CHARTS = 24


@dataclass(frozen=True)
class Series:
    name: str
    x: list[Any]
    y: list[float | None]
    error: list[float | None] | None = None  # ± half-width (ci95) per point
    kind: str = "line"  # "line" | "markers" | "bar" | "dash"
    color: str | None = None
    symbol: str = "circle"  # "circle" | "x" | "star"
    hover: list[str] | None = None  # one text per point (raw, escaped by the renderer)
    show_legend: bool = True


@dataclass(frozen=True)
class Panel:
    y_label: str
    series: list[Series]
    stacked: bool = False  # bars stacked
    log_y: bool = False  # for values spanning decades (TTFT across loads and engines)


@dataclass(frozen=True)
class Span:
    """A shaded stretch of the x axis (the ramp-up of a point, its drain)."""

    x0: float
    x1: float
    kind: str  # "ramp" | "drain"


@dataclass(frozen=True)
class Mark:
    """A labelled vertical line (where a point starts, a saturation rate)."""

    x: float
    label: str


@dataclass(frozen=True)
class Chart:
    chart_id: str  # a slug made here (file name of the PNG, id of the div); never file content
    title: str
    x_label: str
    panels: list[Panel]
    caption: str = ""
    spans: list[Span] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    x_categorical: bool = False
    section: str = ""  # which report section it belongs to


def config_colors(data: ReportData) -> dict[str, str]:
    colors: dict[str, str] = {}
    for r in data.rows:
        colors.setdefault(r.config, PALETTE[len(colors) % len(PALETTE)])
    for s in data.series:
        colors.setdefault(s.config, PALETTE[len(colors) % len(PALETTE)])
    return colors


def _scaled(v: float | None, scale: float) -> float | None:
    return None if v is None else v * scale


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
    errors = [_scaled(r.metrics[key].ci95, scale) if key in r.metrics else None for r in rows]
    return Series(
        name=name,
        x=[r.load_value for r in rows],
        y=[_scaled(r.mean(key), scale) for r in rows],
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
                        [_scaled(row.mean(metric.key), metric.scale)],
                        kind="markers",
                        color=color,
                        symbol="x",
                        hover=text,
                        show_legend=panel is tput,
                    )
                )
    rates = sorted({r.load_value for r in rows if r.load_value is not None})
    achieved.append(Series("offered (ideal)", rates, rates, kind="dash", color="#999999"))
    saturation_text = "; ".join(f"{s.config} at {s.label}" for s in verdict.saturation) or "no configuration saturated"
    return [
        Chart(
            "throughput-vs-rate",
            "Throughput vs offered request rate",
            "offered requests/s",
            [Panel("output tokens/s", tput), Panel("TTFT p50 (ms)", ttft), Panel("achieved requests/s", achieved)],
            caption="Open-loop load. ✕ marks the saturation point: the first rate whose median TTFT exceeds "
            "2x the lowest rate's, or whose achieved request rate is below 90% of the arrivals scheduled in its window. "
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


def knob_charts(data: ReportData) -> list[Chart]:
    """Throughput (and preemptions) vs each numerically swept engine knob (max_num_seqs,
    kv_memory, ...): one line per backend, other swept values, variant and load."""
    knobs: dict[str, set] = {}
    for r in data.rows:
        for k, v in r.swept.items():
            if _numeric(v):
                knobs.setdefault(k, set()).add(v)
    charts = []
    for knob, values in knobs.items():
        if len(values) < 2:
            continue
        groups: dict[tuple, list[PointRow]] = {}
        for r in data.rows:
            if _numeric(r.swept.get(knob)):
                others = tuple(sorted((k, str(v)) for k, v in r.swept.items() if k != knob))
                groups.setdefault((r.backend, others, r.variant, r.load_kind, r.load_value, r.label), []).append(r)
        tput, preempt = [], []
        for i, (key, group) in enumerate(groups.items()):
            backend, others, variant, _, _, label = key
            group.sort(key=lambda r: r.swept[knob])
            name = " ".join(
                [str(backend or "?")]
                + [f"{k}={v}" for k, v in others]
                + ([variant] if variant and variant != "default" else [])
                + [f"· {label}"]
            )
            color = PALETTE[i % len(PALETTE)]
            x = [r.swept[knob] for r in group]
            hover = [f"{r.config} · {r.label} · n={r.num_trials}" for r in group]

            def make(metric: Metric, legend: bool) -> Series:
                errs = [
                    _scaled(r.metrics[metric.key].ci95, metric.scale) if metric.key in r.metrics else None
                    for r in group
                ]
                return Series(
                    name,
                    x,
                    [_scaled(r.mean(metric.key), metric.scale) for r in group],
                    error=errs if any(e is not None for e in errs) else None,
                    color=color,
                    hover=hover,
                    show_legend=legend,
                )

            tput.append(make(OUTPUT_TOKENS_PER_S, True))
            preempt.append(make(SERVER_PREEMPTIONS, False))
        panels = [Panel("output tokens/s", tput)]
        if any(v is not None for s in preempt for v in s.y):
            panels.append(Panel("server preemptions per point", preempt))
        charts.append(
            Chart(
                f"knob-{_slug(knob)}",
                f"Throughput vs {knob}",
                knob,
                panels,
                caption=f"Each line holds everything but {knob} fixed. Preemptions are the server's own "
                "counter delta over the point (null when the engine does not expose it).",
                section="knobs",
            )
        )
    return charts


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-") or "x"


# ---------------------------------------------------------------------------------------------
# Pareto front and errors


def pareto_chart(data: ReportData, verdict: Verdict) -> list[Chart]:
    rows = list(data.rows)
    points = [
        (r, on)
        for r, on in zip(rows, verdict.pareto)
        if r.mean(OUTPUT_TOKENS_PER_S.key) is not None and r.mean(TTFT_MEAN.key) is not None
    ]
    if len(points) < 2:
        return []
    colors = config_colors(data)
    series = []
    for config in dict.fromkeys(r.config for r, _ in points):
        mine = [r for r, _ in points if r.config == config]
        series.append(
            Series(
                config,
                [r.mean(OUTPUT_TOKENS_PER_S.key) for r in mine],
                [r.mean(TTFT_MEAN.key) * TTFT_MEAN.scale for r in mine],
                kind="markers",
                color=colors[config],
                hover=[f"{r.config} · {r.label}" for r in mine],
            )
        )
    front = sorted((r for r, on in points if on), key=lambda r: r.mean(OUTPUT_TOKENS_PER_S.key))
    series.append(
        Series(
            "Pareto front",
            [r.mean(OUTPUT_TOKENS_PER_S.key) for r in front],
            [r.mean(TTFT_MEAN.key) * TTFT_MEAN.scale for r in front],
            kind="line",
            color="#000000",
            symbol="star",
            hover=[f"Pareto: {r.config} · {r.label}" for r in front],
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


def error_chart(data: ReportData) -> list[Chart]:
    rows = [r for r in data.rows if sum(r.outcomes.values()) > 0]
    outcomes = sorted({o for r in rows for o, n in r.outcomes.items() if o != "ok" and n > 0})
    if not outcomes:
        return []
    categories = [f"{r.config} · {r.label}" for r in rows]
    series = []
    for outcome in outcomes:
        y = [100.0 * r.outcomes.get(outcome, 0) / sum(r.outcomes.values()) for r in rows]
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
# time series


# (panel label, [(window key, series name, scale)])
# (panel label, [(window key, series name, scale, color)]); one color per series across runs.
_TIMESERIES_PANELS: tuple[tuple[str, tuple[tuple[str, str, float, str], ...]], ...] = (
    ("output tokens/s", (("output_tokens_per_s", "output tok/s", 1.0, PALETTE[0]),)),
    ("TTFT (ms)", (("ttft_s_mean", "TTFT mean", 1e3, PALETTE[1]), ("ttft_s_p90", "TTFT p90", 1e3, PALETTE[4]))),
    (
        "requests",
        (
            ("active_users", "active users", 1.0, PALETTE[7]),
            ("in_flight", "in flight", 1.0, PALETTE[2]),
            ("server_running", "server running", 1.0, PALETTE[9]),
            ("server_waiting", "server waiting", 1.0, PALETTE[8]),
        ),
    ),
    ("KV cache usage (%)", (("server_kv_usage", "KV usage", 100.0, PALETTE[5]),)),
    ("per window", (("server_preemptions", "preemptions", 1.0, PALETTE[6]), ("errors", "errors", 1.0, PALETTE[3]))),
    ("GPU utilization (%)", (("gpu_util_pct", "GPU util", 1.0, "#2f4f4f"),)),
)


def timeseries_chart(series: RunSeries, index: int) -> Chart | None:
    """One run's whole timeline: every point's windows, ramps shaded, point starts marked."""
    if not any(p.windows for p in series.points):
        return None
    flags = {s.label: s for s in run_stabilities(series)}
    panels = []
    for panel_label, fields in _TIMESERIES_PANELS:
        panel_series = []
        for key, name, scale, color in fields:
            x: list[Any] = []
            y: list[float | None] = []
            for p in series.points:
                if x:  # a gap between points so no line joins two loads
                    x.append(p.start_s)
                    y.append(None)
                for w in p.windows:
                    x.append((w.start_s + w.end_s) / 2)
                    y.append(_scaled(getattr(w, key), scale))
            if all(v is None for v in y):
                continue  # the engine does not expose it: no empty line
            panel_series.append(Series(name, x, y, color=color))
        if panel_series:
            panels.append(Panel(panel_label, panel_series))
    spans, marks = [], []
    for p in series.points:
        if p.measure_start_s > p.start_s:
            spans.append(Span(p.start_s, p.measure_start_s, "ramp"))
        if p.end_s > p.load_end_s:
            spans.append(Span(p.load_end_s, p.end_s, "drain"))
        flag = flags.get(p.label)
        note = ""
        if flag is not None and flag.change is not None:
            note = f" ({'DEGRADED ' if flag.degraded else ''}{flag.change * 100:+.1f}%)"
        marks.append(Mark(p.start_s, p.label + note))
    degraded = [s for s in flags.values() if s.degraded]
    caption = (
        "Windows of the run's clock. Grey: ramp-up and warm-up (excluded from metrics); light: "
        "drain after the load stopped. Series the engine does not expose are left out."
    )
    if degraded:
        caption += (
            " Degraded: "
            + "; ".join(f"{s.label} steady-state output rate fell {-s.change * 100:.1f}% ({s.basis})" for s in degraded)
            + "."
        )
    return Chart(
        f"timeseries-{index + 1}",
        f"Over time: {series.title}",
        "run time (s)",
        panels,
        caption=caption,
        spans=spans,
        marks=marks,
        section="timeseries",
    )


def build_charts(data: ReportData, verdict: Verdict) -> list[Chart]:
    charts = users_charts(data) + rate_chart(data, verdict) + knob_charts(data)
    charts += pareto_chart(data, verdict) + error_chart(data)
    for i, s in enumerate(data.series[:MAX_TIMESERIES_CHARTS]):
        chart = timeseries_chart(s, i)
        if chart is not None:
            charts.append(chart)
    return charts
