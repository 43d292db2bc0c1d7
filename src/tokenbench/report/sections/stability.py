"""Degradation over time: how each point's output rate held up over its steady state (after ramp
and warm-up, before the load ended), per run and summarized over trials. Pure functions over the
time series of ``data.RunSeries``; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenbench.report.read.data import LoadKey, PointRow, PointSpan, RunSeries, load_key
from tokenbench.results import TimeWindow, TrialStat, mean_ci95

# Steady-state output rate falling by more than this share from start to end is flagged.
DEGRADATION_THRESHOLD = 0.05
# Runs with at least this much steady state compare first and last minute; shorter ones thirds.
MINUTE_BASIS_MIN_STEADY_S = 180.0

_EPS_S = 1e-6


@dataclass(frozen=True)
class Stability:
    """How one point's output rate held up over its steady state (after ramp and warm-up)."""

    title: str  # the run's title (config, trial)
    config: str
    trial: int | None
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


def steady_windows(span: PointSpan) -> list[TimeWindow]:
    """Windows wholly inside the measurement window: after ramp + warm-up, before the load ends.
    A window straddling either edge mixes the ramp or the drain into the rate, so it is left out."""
    return [
        w
        for w in span.windows
        if not w.ramp and w.start_s >= span.measure_start_s - _EPS_S and w.end_s <= span.load_end_s + _EPS_S
    ]


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def stability(span: PointSpan, title: str = "", config: str = "", trial: int | None = None) -> Stability | None:
    """Degradation flag and CV for one point's steady state.

    Head and tail: with at least 3 minutes of steady state, the windows in the first and the last
    60 s; otherwise the first and last third of the windows (by count). The rate of each is the
    mean of its windows' output tokens/s. ``degraded`` is true when the tail rate is more than 5%
    below the head rate. CV = population std / mean of all steady windows' output tokens/s.
    Returns None with fewer than 3 steady windows that have a rate (too short to tell).
    """
    windows = [w for w in steady_windows(span) if w.output_tokens_per_s is not None]
    if len(windows) < 3:
        return None
    start, end = windows[0].start_s, windows[-1].end_s
    steady_s = end - start
    if steady_s >= MINUTE_BASIS_MIN_STEADY_S:
        basis = "first vs last minute"
        head = [w for w in windows if w.end_s <= start + 60.0 + _EPS_S]
        tail = [w for w in windows if w.start_s >= end - 60.0 - _EPS_S]
    else:
        basis = "first vs last third"
        k = max(1, len(windows) // 3)
        head, tail = windows[:k], windows[-k:]
    rates = [float(w.output_tokens_per_s) for w in windows]
    head_rate = _mean([float(w.output_tokens_per_s) for w in head])
    tail_rate = _mean([float(w.output_tokens_per_s) for w in tail])
    change = None if not head_rate or tail_rate is None else (tail_rate - head_rate) / head_rate
    head_ttft = _mean([w.ttft_s_mean for w in head if w.ttft_s_mean is not None])
    tail_ttft = _mean([w.ttft_s_mean for w in tail if w.ttft_s_mean is not None])
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


@dataclass(frozen=True)
class StabilitySummary:
    """One configuration at one load: stability over its trials."""

    config: str
    label: str
    load_key: LoadKey
    cv: TrialStat
    change: TrialStat
    degraded_runs: int
    runs: int
    head_tokens_per_s: TrialStat
    tail_tokens_per_s: TrialStat
    head_ttft_s: TrialStat
    tail_ttft_s: TrialStat
    basis: str


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
