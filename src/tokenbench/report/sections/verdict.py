"""What the report concludes: saturation points, the Pareto front, and the verdict (best TTFT /
throughput per load, most stable, who met the SLOs), with degradation over time from
``stability.py``. Pure functions over the rows and time series of ``data.ReportData``; no I/O, no
printing. The thresholds are named here (and in stability.py) so the captions quote them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tokenbench.metrics.accuracy import two_proportion_p
from tokenbench.metrics.catalogue import (
    ACCURACY,
    CLIENT_LIMITED,
    GOOD_FRACTION,
    GOODPUT_PER_S,
    OFFERED_PER_S,
    OUTPUT_TOKENS_PER_S,
    PREFIX_CACHE_EXPECTED_REUSE,
    PREFIX_CACHE_HIT_RATE,
    REQUESTS_PER_S,
    SLO_DISTRIBUTIONS,
    TTFT_MEAN,
    TTFT_P50,
    USD_PER_MILLION_OUTPUT_TOKENS,
    Metric,
)
from tokenbench.report.read.data import LoadKey, PointRow, ReportData, load_key
from tokenbench.report.sections.failures import FailedPoint
from tokenbench.report.sections.stability import Stability, StabilitySummary, run_stabilities, summarize_stability
from tokenbench.results import NO_TRIALS, TrialStat

# A point is saturated once its median TTFT has grown past this multiple of the lowest rate's...
SATURATION_TTFT_FACTOR = 2.0
# ...or the server completes fewer than this share of the requests offered to it.
SATURATION_ACHIEVED_FRACTION = 0.90
# A configuration "meets the SLO" at a load when at least this share of requests met every objective.
SLO_ATTAINMENT = 0.90
# A point's measured prefix-cache hit rate further than this (a fraction: 0.10 = 10 points) from
# the reuse its workload promises is flagged: a cache warm from an earlier point or run (above),
# or one that evicted, or prompts that did not share blocks as the workload says (below).
CACHE_REUSE_TOLERANCE = 0.10
# A configuration picked for speed answers worse than another at its load when the two accuracies
# differ at this significance (a pooled two-proportion z-test on correct/graded, trials summed).
QUALITY_SIGNIFICANCE = 0.05


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
    rated = [(r.load_value, r) for r in rows if r.load_kind == "rate" and r.load_value is not None]
    rated.sort(key=lambda value_row: value_row[0])
    if not rated:
        return None
    base_ttft = rated[0][1].mean(TTFT_P50.key)
    for value, r in rated:
        rate = float(value)
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
    stat: TrialStat
    runner_up: str | None
    runner_up_stat: TrialStat | None
    clear: bool | None  # 95% CIs do not overlap; None when either CI is unknown (one trial)


@dataclass(frozen=True)
class LoadVerdict:
    load_key: LoadKey
    label: str
    configs: int
    best_ttft: Pick | None  # lowest mean TTFT
    best_throughput: Pick | None  # highest output tokens/s
    most_stable: StabilitySummary | None  # lowest CV of windowed output tokens/s
    cheapest: Pick | None = None  # lowest USD per million output tokens (priced runs only)


@dataclass(frozen=True)
class SloResult:
    config: str
    label: str
    load_key: LoadKey
    good_fraction: TrialStat
    goodput_per_s: TrialStat
    met: bool | None  # None when nothing was measured


@dataclass(frozen=True)
class CacheFlag:
    """A point whose measured hit rate is far from its workload's expected reuse."""

    config: str
    label: str
    hit_rate: float
    expected_reuse: float

    @property
    def above(self) -> bool:
        return self.hit_rate > self.expected_reuse


def cache_flags(rows: list[PointRow]) -> list[CacheFlag]:
    """Points whose mean hit rate differs from the expected reuse by more than the tolerance
    (points without either number are not judged)."""
    out = []
    for r in rows:
        hit, expected = r.mean(PREFIX_CACHE_HIT_RATE.key), r.mean(PREFIX_CACHE_EXPECTED_REUSE.key)
        if hit is not None and expected is not None and abs(hit - expected) > CACHE_REUSE_TOLERANCE:
            out.append(CacheFlag(r.config, r.label, hit, expected))
    return out


@dataclass(frozen=True)
class ClientFlag:
    """A point the client, not the server, limited (its loop lag or CPU over the rule's limit) in
    ``share`` of its trials: its numbers measure the load generator."""

    config: str
    label: str
    share: float  # of the point's trials
    cpu_util_max: float | None  # mean over trials
    loop_lag_p99_s: float | None


def client_flags(rows: list[PointRow]) -> list[ClientFlag]:
    """Points some trial of which the client limited (points from runs before it was sampled are
    not judged)."""
    return [
        ClientFlag(r.config, r.label, share, r.mean("client_cpu_util_max"), r.mean("client_loop_lag_p99_s"))
        for r in rows
        if (share := r.mean(CLIENT_LIMITED.key)) is not None and share > 0
    ]


@dataclass(frozen=True)
class Graded:
    """A configuration's graded replies at one load: its trials' counts summed."""

    config: str
    correct: int
    graded: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.graded


@dataclass(frozen=True)
class QualityFlag:
    """At one load, the configuration picked for speed (``picked_for``: its best TTFT or
    throughput) answers the graded dataset significantly worse than the most accurate one."""

    label: str
    picked_for: str
    fast: Graded
    accurate: Graded
    p: float


@dataclass(frozen=True)
class Verdict:
    loads: tuple[LoadVerdict, ...]
    slo: tuple[SloResult, ...]
    highest_load_meeting_slo: dict[str, str | None]  # config -> point label
    saturation: tuple[Saturation, ...]
    stability: tuple[Stability, ...]
    stability_summary: tuple[StabilitySummary, ...]
    pareto: tuple[bool, ...]  # aligned with ReportData.rows (throughput vs TTFT mean)
    cache: tuple[CacheFlag, ...] = ()  # hit rate far from the expected reuse
    client: tuple[ClientFlag, ...] = ()  # points the client limited
    failed: tuple[FailedPoint, ...] = ()  # points the server failed (results.failures' rule)
    quality: tuple[QualityFlag, ...] = ()  # a pick for speed that answers a graded dataset worse


def _load_order(key: LoadKey) -> tuple[bool, float, str]:
    kind, value = key
    return (kind != "users", value if isinstance(value, (int, float)) else math.inf, str(value))


def _overlap(a: TrialStat, b: TrialStat) -> bool | None:
    if a.mean is None or b.mean is None or a.ci95 is None or b.ci95 is None:
        return None
    return abs(a.mean - b.mean) <= a.ci95 + b.ci95


def best(rows: list[PointRow], metric: Metric) -> Pick | None:
    """The row with the best mean of ``metric`` in its direction (rows with a null mean are skipped)."""
    key = metric.key
    scored = [(mean, r) for r in rows if (mean := r.mean(key)) is not None]
    if not scored:
        return None
    scored.sort(key=lambda mean_row: mean_row[0], reverse=metric.higher_is_better)
    top = scored[0][1]
    if len(scored) == 1:
        return Pick(metric, top.config, top.metrics[key], None, None, None)
    second = scored[1][1]
    overlap = _overlap(top.metrics[key], second.metrics[key])
    return Pick(
        metric,
        top.config,
        top.metrics[key],
        second.config,
        second.metrics[key],
        None if overlap is None else not overlap,
    )


def slo_results(rows: list[PointRow]) -> list[SloResult]:
    out = []
    for r in rows:
        gf = r.metrics.get(GOOD_FRACTION.key, NO_TRIALS)
        gp = r.metrics.get(GOODPUT_PER_S.key, NO_TRIALS)
        if gf.mean is None and gp.mean is None:
            continue
        met = None if gf.mean is None else gf.mean >= SLO_ATTAINMENT
        out.append(SloResult(r.config, r.label, load_key(r), gf, gp, met))
    return out


def decide(data: ReportData) -> Verdict:
    """Every conclusion the report states, from the rows and the time series."""
    rows = list(data.rows)
    by_load: dict[LoadKey, list[PointRow]] = {}
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
                cheapest=best(group, USD_PER_MILLION_OUTPUT_TOKENS),
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
    verdict = Verdict(
        tuple(loads), tuple(slo), highest, tuple(saturation), tuple(stabilities), tuple(summaries), tuple(pareto)
    )
    named = len(configs) > 1
    failed = tuple(f for r in rows if (f := FailedPoint.of_row(r, named)) is not None)
    quality = tuple(f for lv in loads for f in quality_flags(lv, by_load[lv.load_key]))
    return replace(
        verdict, cache=tuple(cache_flags(rows)), client=tuple(client_flags(rows)), failed=failed, quality=quality
    )


def _graded(rows: list[PointRow]) -> Graded | None:
    """A configuration's graded counts at a load (its trials summed), None when nothing was graded."""
    assert ACCURACY.counts is not None
    counted = [c for r in rows if (c := r.proportion(ACCURACY.counts)) is not None]
    graded = sum(n for _, n in counted)
    return Graded(rows[0].config, sum(h for h, _ in counted), graded) if graded else None


def quality_flags(lv: LoadVerdict, group: list[PointRow]) -> list[QualityFlag]:
    """The load's speed picks that answer worse: a faster configuration that changes the answers
    is not simply better. Each pick against the most accurate configuration at the load, flagged
    when the difference is significant (``QUALITY_SIGNIFICANCE``)."""
    configs: dict[str, list[PointRow]] = {}
    for r in group:
        configs.setdefault(r.config, []).append(r)
    graded = {c: g for c, rows in configs.items() if (g := _graded(rows)) is not None}
    if len(graded) < 2:
        return []
    accurate = max(graded.values(), key=lambda g: g.accuracy)
    out = []
    for why, pick in (("best throughput", lv.best_throughput), ("best TTFT", lv.best_ttft)):
        fast = graded.get(pick.config) if pick is not None else None
        if fast is None or fast.config == accurate.config or fast.accuracy >= accurate.accuracy:
            continue
        p = two_proportion_p(fast.correct, fast.graded, accurate.correct, accurate.graded)
        if p is not None and p < QUALITY_SIGNIFICANCE:
            out.append(QualityFlag(lv.label, why, fast, accurate, p))
    return out


def slo_text(slo: dict[str, float | None]) -> str | None:
    """'TTFT ≤ 500 ms, TPOT ≤ 50 ms', or None when no objective is set."""
    names = {d.key: d.name for d in SLO_DISTRIBUTIONS}
    parts = [f"{names[k]} ≤ {v * 1e3:g} ms" for k, v in slo.items() if v is not None and k in names]
    return ", ".join(parts) or None
