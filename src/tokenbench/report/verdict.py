"""What the report concludes: saturation points, degradation over time, the Pareto front, and the
verdict (best TTFT / throughput per load, most stable, who met the SLOs). Pure functions over the
rows and time series from ``load.py``; no I/O, no printing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..catalogue import (
    GOOD_FRACTION,
    GOODPUT_PER_S,
    OFFERED_PER_S,
    OUTPUT_TOKENS_PER_S,
    REQUESTS_PER_S,
    TTFT_MEAN,
    TTFT_P50,
    Metric,
)
from .load import PointRow, PointSpan, ReportData, RunSeries, Stat, mean_ci95

# A point is saturated once its median TTFT has grown past this multiple of the lowest rate's...
SATURATION_TTFT_FACTOR = 2.0
# ...or the server completes fewer than this share of the requests offered to it.
SATURATION_ACHIEVED_FRACTION = 0.90
# Steady-state output rate falling by more than this share from start to end is flagged.
DEGRADATION_THRESHOLD = 0.05
# Runs with at least this much steady state compare first and last minute; shorter ones thirds.
MINUTE_BASIS_MIN_STEADY_S = 180.0
# A configuration "meets the SLO" at a load when at least this share of requests met every objective.
SLO_ATTAINMENT = 0.90

_EPS_S = 1e-6


# ---------------------------------------------------------------------------------------------
# saturation


@dataclass(frozen=True)
class Saturation:
    config: str
    rate_per_s: float
    label: str
    reason: str
    ttft_ratio: float | None  # TTFT p50 at this rate / at the lowest rate
    achieved_fraction: float | None  # achieved requests/s / arrivals scheduled in the window per s


def saturation_point(rows: list[PointRow]) -> Saturation | None:
    """The saturation point of one configuration's open-loop (rate) points.

    Points are taken in increasing offered rate. The saturation point is the first rate r where
    either
      (a) median TTFT (``ttft_s_p50``, mean over trials) > 2 x the median TTFT at the lowest
          offered rate — queueing inside the server has started to dominate the first token; or
      (b) achieved request throughput (``requests_per_s``) < 90% of the arrivals actually
          scheduled in the window (``offered_per_s``; the nominal r for results without it) —
          the server no longer keeps up and the backlog grows. Poisson arrivals at 0.25/s over
          20 s vary by +-45% on their own, so the nominal rate would call a lucky point saturated.
    A point with no successful request (TTFT null) counts as saturated. Returns None when no
    point qualifies (including when there are no rate points).
    """
    points = sorted((r for r in rows if r.load_kind == "rate" and r.load_value is not None), key=lambda r: r.load_value)
    if not points:
        return None
    base_ttft = points[0].mean(TTFT_P50.key)
    for r in points:
        rate = float(r.load_value)
        ttft = r.mean(TTFT_P50.key)
        achieved = r.mean(REQUESTS_PER_S.key)
        offered = r.mean(OFFERED_PER_S.key) or rate
        ratio = None if ttft is None or not base_ttft else ttft / base_ttft
        fraction = None if achieved is None or offered <= 0 else achieved / offered
        reasons = []
        if ttft is None:
            reasons.append("no request succeeded")
        elif ratio is not None and ratio > SATURATION_TTFT_FACTOR:
            reasons.append(f"TTFT p50 {ratio:.1f}x the lowest rate's")
        if fraction is not None and fraction < SATURATION_ACHIEVED_FRACTION:
            reasons.append(f"achieved {fraction:.0%} of the arrivals scheduled in the window")
        if reasons:
            return Saturation(r.config, rate, r.label, "; ".join(reasons), ratio, fraction)
    return None


# ---------------------------------------------------------------------------------------------
# degradation over time


@dataclass(frozen=True)
class Stability:
    """How one point's output rate held up over its steady state (after ramp and warm-up)."""

    title: str  # the run's title (config, trial)
    config: str
    trial: Any
    label: str
    load_kind: str
    steady_s: float
    basis: str  # "first vs last minute" | "first vs last third"
    head_tokens_per_s: float | None
    tail_tokens_per_s: float | None
    change: float | None  # (tail - head) / head
    cv: float | None  # coefficient of variation of the windowed output tokens/s
    degraded: bool
    # Mean TTFT of the same head and tail windows: shown beside the flag (a queue that builds up
    # over the run shows here first), not part of it.
    head_ttft_s: float | None = None
    tail_ttft_s: float | None = None


def steady_windows(span: PointSpan) -> list[dict[str, Any]]:
    """Windows wholly inside the measurement window: after ramp + warm-up, before the load ends.
    A window straddling either edge mixes the ramp or the drain into the rate, so it is left out."""
    return [
        w
        for w in span.windows
        if not w.get("ramp")
        and w.get("start_s") is not None
        and w.get("end_s") is not None
        and w["start_s"] >= span.measure_start_s - _EPS_S
        and w["end_s"] <= span.load_end_s + _EPS_S
    ]


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def stability(span: PointSpan, title: str = "", config: str = "", trial: Any = None) -> Stability | None:
    """Degradation flag and CV for one point's steady state.

    Head and tail: with at least 3 minutes of steady state, the windows in the first and the last
    60 s; otherwise the first and last third of the windows (by count). The rate of each is the
    mean of its windows' output tokens/s. ``degraded`` is true when the tail rate is more than 5%
    below the head rate. CV = population std / mean of all steady windows' output tokens/s.
    Returns None with fewer than 3 steady windows that have a rate (too short to tell).
    """
    windows = [w for w in steady_windows(span) if w.get("output_tokens_per_s") is not None]
    if len(windows) < 3:
        return None
    start, end = windows[0]["start_s"], windows[-1]["end_s"]
    steady_s = end - start
    if steady_s >= MINUTE_BASIS_MIN_STEADY_S:
        basis = "first vs last minute"
        head = [w for w in windows if w["end_s"] <= start + 60.0 + _EPS_S]
        tail = [w for w in windows if w["start_s"] >= end - 60.0 - _EPS_S]
    else:
        basis = "first vs last third"
        k = max(1, len(windows) // 3)
        head, tail = windows[:k], windows[-k:]
    rates = [float(w["output_tokens_per_s"]) for w in windows]
    head_rate = _mean([float(w["output_tokens_per_s"]) for w in head])
    tail_rate = _mean([float(w["output_tokens_per_s"]) for w in tail])
    change = None if not head_rate or tail_rate is None else (tail_rate - head_rate) / head_rate
    head_ttft = _mean([float(w["ttft_s_mean"]) for w in head if w.get("ttft_s_mean") is not None])
    tail_ttft = _mean([float(w["ttft_s_mean"]) for w in tail if w.get("ttft_s_mean") is not None])
    mean = _mean(rates)
    cv = None
    if mean:
        cv = math.sqrt(sum((x - mean) ** 2 for x in rates) / len(rates)) / mean
    return Stability(
        title=title,
        config=config,
        trial=trial,
        label=span.label,
        load_kind=span.load_kind,
        steady_s=steady_s,
        basis=basis,
        head_tokens_per_s=head_rate,
        tail_tokens_per_s=tail_rate,
        change=change,
        cv=cv,
        degraded=change is not None and change < -DEGRADATION_THRESHOLD,
        head_ttft_s=head_ttft,
        tail_ttft_s=tail_ttft,
    )


def run_stabilities(series: RunSeries) -> list[Stability]:
    out = []
    for span in series.points:
        s = stability(span, series.title, series.config, series.trial)
        if s is not None:
            out.append(s)
    return out


# ---------------------------------------------------------------------------------------------
# Pareto front


def pareto_front(throughputs: list[float | None], latencies: list[float | None]) -> list[bool]:
    """Which points are on the latency–throughput Pareto front: no other point has at least as
    much throughput and at most as much latency, with one of the two strictly better. Points with
    a null coordinate are never on the front."""
    pts = list(zip(throughputs, latencies))
    out = []
    for i, (x, y) in enumerate(pts):
        if x is None or y is None:
            out.append(False)
            continue
        dominated = any(
            j != i and xo is not None and yo is not None and xo >= x and yo <= y and (xo > x or yo < y)
            for j, (xo, yo) in enumerate(pts)
        )
        out.append(not dominated)
    return out


# ---------------------------------------------------------------------------------------------
# verdict


@dataclass(frozen=True)
class Pick:
    """The best configuration at one load on one metric, and how clear its lead is."""

    metric: Metric
    config: str
    stat: Stat
    runner_up: str | None
    runner_up_stat: Stat | None
    clear: bool | None  # 95% CIs do not overlap; None when either CI is unknown (one trial)


@dataclass(frozen=True)
class StabilitySummary:
    """One configuration at one load: stability over its trials."""

    config: str
    label: str
    load_key: tuple
    cv: Stat
    change: Stat
    degraded_runs: int
    runs: int
    head_tokens_per_s: Stat
    tail_tokens_per_s: Stat
    head_ttft_s: Stat
    tail_ttft_s: Stat
    basis: str


@dataclass(frozen=True)
class LoadVerdict:
    load_key: tuple
    label: str
    configs: int
    best_ttft: Pick | None  # lowest mean TTFT
    best_throughput: Pick | None  # highest output tokens/s
    most_stable: StabilitySummary | None  # lowest CV of windowed output tokens/s


@dataclass(frozen=True)
class SloResult:
    config: str
    label: str
    load_key: tuple
    good_fraction: Stat
    goodput_per_s: Stat
    met: bool | None  # None when nothing was measured


@dataclass(frozen=True)
class Verdict:
    loads: tuple[LoadVerdict, ...]
    slo: tuple[SloResult, ...]
    highest_load_meeting_slo: dict[str, str | None]  # config -> point label
    saturation: tuple[Saturation, ...]
    stability: tuple[Stability, ...]
    stability_summary: tuple[StabilitySummary, ...]
    pareto: tuple[bool, ...]  # aligned with ReportData.rows (throughput vs TTFT mean)


def load_key(row: PointRow) -> tuple:
    """Rows at the same load across configurations share this key."""
    return (row.load_kind, row.load_value if row.load_value is not None else row.label)


def _load_order(key: tuple) -> tuple:
    kind, value = key
    return (kind != "users", value if isinstance(value, (int, float)) else math.inf, str(value))


def _overlap(a: Stat, b: Stat) -> bool | None:
    if a.mean is None or b.mean is None or a.ci95 is None or b.ci95 is None:
        return None
    return abs(a.mean - b.mean) <= a.ci95 + b.ci95


def best(rows: list[PointRow], metric: Metric) -> Pick | None:
    """The row with the best mean of ``metric`` in its direction (rows with a null mean are skipped)."""
    key = metric.key
    scored = [r for r in rows if r.mean(key) is not None]
    if not scored:
        return None
    scored.sort(key=lambda r: r.mean(key), reverse=metric.higher_is_better)
    top = scored[0]
    if len(scored) == 1:
        return Pick(metric, top.config, top.metrics[key], None, None, None)
    second = scored[1]
    overlap = _overlap(top.metrics[key], second.metrics[key])
    return Pick(
        metric,
        top.config,
        top.metrics[key],
        second.config,
        second.metrics[key],
        None if overlap is None else not overlap,
    )


def summarize_stability(stabilities: list[Stability], rows: list[PointRow]) -> list[StabilitySummary]:
    keys = {(r.config, r.label): load_key(r) for r in rows}
    groups: dict[tuple[str, str], list[Stability]] = {}
    for s in stabilities:
        groups.setdefault((s.config, s.label), []).append(s)
    out = []
    for (config, label), group in groups.items():
        out.append(
            StabilitySummary(
                config=config,
                label=label,
                load_key=keys.get((config, label), ("?", label)),
                cv=mean_ci95([s.cv for s in group]),
                change=mean_ci95([s.change for s in group]),
                degraded_runs=sum(s.degraded for s in group),
                runs=len(group),
                head_tokens_per_s=mean_ci95([s.head_tokens_per_s for s in group]),
                tail_tokens_per_s=mean_ci95([s.tail_tokens_per_s for s in group]),
                head_ttft_s=mean_ci95([s.head_ttft_s for s in group]),
                tail_ttft_s=mean_ci95([s.tail_ttft_s for s in group]),
                basis=", ".join(dict.fromkeys(s.basis for s in group)),
            )
        )
    return out


def slo_results(rows: list[PointRow]) -> list[SloResult]:
    out = []
    for r in rows:
        gf = r.metrics.get(GOOD_FRACTION.key) or Stat(None, None, 0)
        gp = r.metrics.get(GOODPUT_PER_S.key) or Stat(None, None, 0)
        if gf.mean is None and gp.mean is None:
            continue
        met = None if gf.mean is None else gf.mean >= SLO_ATTAINMENT
        out.append(SloResult(r.config, r.label, load_key(r), gf, gp, met))
    return out


def decide(data: ReportData) -> Verdict:
    """Every conclusion the report states, from the rows and the time series."""
    rows = list(data.rows)
    by_load: dict[tuple, list[PointRow]] = {}
    for r in rows:
        by_load.setdefault(load_key(r), []).append(r)

    stabilities = [s for series in data.series for s in run_stabilities(series)]
    summaries = summarize_stability(stabilities, rows)

    loads = []
    for key in sorted(by_load, key=_load_order):
        group = by_load[key]
        candidates = [s for s in summaries if s.load_key == key and s.cv.mean is not None]
        candidates.sort(key=lambda s: (s.cv.mean, -(s.change.mean or 0.0)))
        loads.append(
            LoadVerdict(
                load_key=key,
                label=group[0].label,
                configs=len({r.config for r in group}),
                best_ttft=best(group, TTFT_MEAN),
                best_throughput=best(group, OUTPUT_TOKENS_PER_S),
                most_stable=candidates[0] if candidates else None,
            )
        )

    slo = slo_results(rows)
    highest: dict[str, str | None] = {}
    for res in sorted(slo, key=lambda s: _load_order(s.load_key)):
        highest.setdefault(res.config, None)
        if res.met:
            highest[res.config] = res.label

    configs = []
    for r in rows:
        if r.config not in configs:
            configs.append(r.config)
    saturation = [s for c in configs if (s := saturation_point([r for r in rows if r.config == c])) is not None]

    pareto = pareto_front([r.mean(OUTPUT_TOKENS_PER_S.key) for r in rows], [r.mean(TTFT_MEAN.key) for r in rows])
    return Verdict(
        tuple(loads), tuple(slo), highest, tuple(saturation), tuple(stabilities), tuple(summaries), tuple(pareto)
    )


def slo_text(slo: dict[str, float | None]) -> str | None:
    """'TTFT ≤ 500 ms, TPOT ≤ 50 ms', or None when no objective is set."""
    names = {"ttft_s": "TTFT", "tpot_s": "TPOT", "e2e_s": "E2E"}
    parts = [f"{names[k]} ≤ {v * 1e3:g} ms" for k, v in slo.items() if v is not None and k in names]
    return ", ".join(parts) or None
