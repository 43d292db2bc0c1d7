"""One run's timeline as a Chart: every point's windows (output rate, TTFT, requests, the
server's gauges, errors, GPU), ramps and drains shaded, each point's start marked with its
steady-state change (stability.py)."""

from __future__ import annotations

from tokenbench.console.fmt import scaled
from tokenbench.report.chart_spec import PALETTE, Chart, Mark, Panel, Series, Span
from tokenbench.report.read.data import RunSeries
from tokenbench.report.sections.stability import Stability, run_stabilities

# The time series' panels: (panel title, ((field of a results.json time-series window, series
# name, stored unit -> shown unit), ...)). The report draws one panel per entry, one line per field.
WINDOW_PANELS: tuple[tuple[str, tuple[tuple[str, str, float], ...]], ...] = (
    ("output tokens/s", (("output_tokens_per_s", "output tok/s", 1.0),)),
    ("TTFT (ms)", (("ttft_s_mean", "TTFT mean", 1e3), ("ttft_s_p90", "TTFT p90", 1e3))),
    (
        "requests",
        (
            ("active_users", "active users", 1.0),
            ("in_flight", "in flight", 1.0),
            ("server_running", "server running", 1.0),
            ("server_waiting", "server waiting", 1.0),
        ),
    ),
    ("KV cache usage (%)", (("server_kv_usage", "KV usage", 100.0),)),
    ("per window", (("server_preemptions", "preemptions", 1.0), ("errors", "errors", 1.0))),
    ("GPU utilization (%)", (("gpu_util_pct", "GPU util", 1.0),)),
    # the client's own health (results' client): a busy client shows here, not in the server's figures
    ("client CPU (% of a core)", (("client_cpu_util", "client CPU", 100.0),)),
    ("client loop lag max (ms)", (("client_loop_lag_max_s", "client loop lag max", 1e3),)),
)

# One color per series across runs, in the order of WINDOW_PANELS' fields.
_COLORS = (*(PALETTE[i] for i in (0, 1, 4, 7, 2, 9, 8, 5, 6, 3)), "#2f4f4f", "#556b2f", "#8b008b")
_FIELDS = tuple(field for _, fields in WINDOW_PANELS for field, _, _ in fields)


def timeseries_chart(series: RunSeries, index: int) -> Chart | None:
    """One run's whole timeline: every point's windows, ramps shaded, point starts marked."""
    if not any(p.windows for p in series.points):
        return None
    flags = {s.label: s for s in run_stabilities(series)}
    spans, marks = _spans_and_marks(series, flags)
    return Chart(
        f"timeseries-{index + 1}",
        f"Over time: {series.title}",
        "run time (s)",
        _panels(series),
        caption=_caption([s for s in flags.values() if s.degraded]),
        spans=spans,
        marks=marks,
        section="timeseries",
    )


def _panels(series: RunSeries) -> list[Panel]:
    """One panel per group of window fields; a series the engine does not expose (all null) is
    left out, and a panel with none."""
    panels = []
    for panel_label, fields in WINDOW_PANELS:
        panel_series = []
        for key, name, scale in fields:
            x: list[float] = []
            y: list[float | None] = []
            for p in series.points:
                if x:  # a gap between points so no line joins two loads
                    x.append(p.start_s)
                    y.append(None)
                for w in p.windows:
                    x.append((w.start_s + w.end_s) / 2)
                    y.append(scaled(getattr(w, key), scale))
            if any(v is not None for v in y):
                panel_series.append(Series(name, x, y, color=_COLORS[_FIELDS.index(key)]))
        if panel_series:
            panels.append(Panel(panel_label, panel_series))
    return panels


def _spans_and_marks(series: RunSeries, flags: dict[str, Stability]) -> tuple[list[Span], list[Mark]]:
    """Each point's ramp and drain shaded; its start marked with its label (and its change)."""
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
    return spans, marks


def _caption(degraded: list[Stability]) -> str:
    caption = (
        "Windows of the run's clock. Grey: ramp-up and warm-up (excluded from metrics); light: "
        "drain after the load stopped. Series the engine does not expose are left out."
    )
    if degraded:
        caption += (
            " Degraded: "
            + "; ".join(
                f"{s.label} steady-state output rate fell {-(s.change or 0.0) * 100:.1f}% ({s.basis})" for s in degraded
            )
            + "."
        )
    return caption
