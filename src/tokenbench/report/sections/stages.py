"""The report's "Stages" section: a staged point (--stages, --load-shape) stage by stage, one row
a stage with its target, what its requests met and its backlog, as results.json's ``stages`` has
them (metrics/stages.py says how each is counted). Only for a run with a staged point."""

from __future__ import annotations

from tokenbench.console import fmt
from tokenbench.console.fmt import NULL_TEXT
from tokenbench.report.read.data import ReportData
from tokenbench.report.sections.tables import Table
from tokenbench.results import Distribution, StageResult

STAGES_CAPTION = (
    "A staged point (--stages, --load-shape) stage by stage, on the point's clock. Requests, failed, SLO met "
    "and the latencies count the requests scheduled in the stage, a request the overload delayed where it was "
    "due (SLO met: of those that ended, the share within --slo from the scheduled time; latencies over the ok "
    "ones); req/s and tok/s are what arrived within the stage's window. Backlog: requests scheduled and not yet "
    "ended (in flight, or waiting for a --max-concurrency slot) at the stage's start and end, its peak, and its "
    "growth per second; drained: for a stage after one whose backlog grew, seconds until the backlog was back "
    "where it was when that stage began (never: not by the point's end)."
)
HEADERS = [
    "configuration",
    "load",
    "stage",
    "window (s)",
    "target",
    "requests",
    "failed",
    "req/s",
    "output tok/s",
    "SLO met (%)",
    "TTFT p50 (ms)",
    "TTFT p99 (ms)",
    "ITL p50 (ms)",
    "E2E p90 (ms)",
    "backlog start → end",
    "peak",
    "growth (/s)",
    "drained (s)",
]


def _ms(d: Distribution, stat: str) -> str:
    value = getattr(d, stat)
    return fmt.num(None if value is None else float(value), 0, 1e3)


def _target(s: StageResult) -> str:
    level = f"{s.target_rate_per_s:g} req/s" if s.target_rate_per_s is not None else f"{s.target_users} users"
    return level + (f" (ramp {s.ramp_s:g}s)" if s.ramp_s else "")


def _drained(s: StageResult, after_growth: bool) -> str:
    if s.backlog.drain_s is not None:
        return fmt.num(float(s.backlog.drain_s), 2)
    return "never" if after_growth else NULL_TEXT


def stages_table(data: ReportData) -> Table | None:
    """One row per stage of every staged point; None without one."""
    if not data.stages:
        return None
    rows = []
    for point in data.stages:
        grew = False
        for s in point.stages:
            b = s.backlog
            rows.append(
                [
                    point.config,
                    point.label,
                    str(s.index + 1),
                    f"{s.start_s:g}–{s.end_s:g}",
                    _target(s),
                    str(s.requests),
                    str(s.failed),
                    fmt.num(float(s.requests_per_s), 2),
                    fmt.num(float(s.output_tokens_per_s), 1),
                    fmt.num(None if s.good_fraction is None else float(s.good_fraction), 0, 100),
                    _ms(s.ttft_s, "p50"),
                    _ms(s.ttft_s, "p99"),
                    _ms(s.itl_s, "p50"),
                    _ms(s.e2e_s, "p90"),
                    f"{b.at_start} → {b.at_end}",
                    str(b.peak),
                    fmt.num(float(b.growth_per_s), 2),
                    _drained(s, grew),
                ]
            )
            grew = b.at_end > b.at_start
    return Table(list(HEADERS), rows, numeric=tuple(range(5, len(HEADERS))))
