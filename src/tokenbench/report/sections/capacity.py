"""Capacity searches in the report (a run directory with capacity.json, or a search experiment's
cells): the ranking of configurations by capacity, and SLO attainment vs load (every probed value
of every configuration, its binding objective, and where each stopped passing). Pure: entries in,
sentences and tables out.

Ranking: by ``max_passing`` (the highest probed value whose decision passed), highest first; a
configuration where no load met the SLO ranks last. The CI is on the requests/s measured at the
answer over its trials (the probed value itself is a setting, not a measurement); a lead is
*clear* when the two CIs do not overlap, and unknown with one trial.

Binding objective of a probed value: the failing objective furthest over its limit when the
value failed, else the objective closest to its limit, both relative to the limit
(``margin / limit``).
"""

from __future__ import annotations

from tokenbench.console import fmt
from tokenbench.console.fmt import NULL_TEXT
from tokenbench.report.chart_spec import PALETTE, Chart, Mark, Panel, Series
from tokenbench.report.read.data import CapacityEntry
from tokenbench.report.sections.tables import Table
from tokenbench.results import TrialStat
from tokenbench.results.capacity import CapacityResult, Decision, ObjectiveCheck

CAPACITY_CAPTION = (
    "Highest load whose point met every objective (max passing) and the lowest that failed; "
    "requests/s and output tokens/s measured at the answer, mean ± 95% CI over its trials (no CI with one)."
)
ATTAINMENT_CAPTION = (
    "Every probed value, lowest first: passed when every objective held (on the trial mean with trials). "
    "Binding: the objective furthest over its limit (failed) or closest to it (passed); margin = limit − measured."
)


def ranked(entries: tuple[CapacityEntry, ...]) -> list[CapacityEntry]:
    """Highest max_passing first; no passing load last (stable among equals)."""
    return sorted(entries, key=lambda e: -e.result.max_passing if e.result.max_passing is not None else float("inf"))


def _unit(result: CapacityResult) -> str:
    return "req/s" if result.variable == "rate" else "users"


def _value(value: float | None, result: CapacityResult) -> str:
    return NULL_TEXT if value is None else f"{value:g} {_unit(result)}"


def _stat(s: TrialStat | None, digits: int = 2) -> str:
    if s is None or s.mean is None:
        return NULL_TEXT
    ci = f" ± {fmt.num(s.ci95, digits)}" if s.ci95 is not None else ""
    return f"{fmt.num(s.mean, digits)}{ci}"


def _failed_on(result: CapacityResult) -> str:
    failed = next((d for d in result.decisions if d.value == result.min_failing), None)
    if failed is None:
        return NULL_TEXT
    return ", ".join(c.shown() for c in failed.objectives if not c.passed)


def capacity_table(entries: tuple[CapacityEntry, ...]) -> Table:
    rows = []
    for rank, e in enumerate(ranked(entries), start=1):
        r, at = e.result, e.result.at_answer
        rows.append(
            [
                str(rank),
                e.config,
                _value(r.max_passing, r),
                _stat(at.requests_per_s if at else None),
                _value(r.min_failing, r),
                _failed_on(r),
                _stat(at.output_tokens_per_s if at else None, 1),
                fmt.num(at.usd_per_million_output_tokens if at else None, 2),
                str(len(r.probes)),
                r.stopped_by or "running",
            ]
        )
    headers = [
        "#",
        "configuration",
        "max passing",
        "req/s at answer",
        "lowest failing",
        "failed on",
        "output tok/s at answer",
        "USD / M output tok",
        "probes",
        "stopped by",
    ]
    return Table(headers, rows, numeric=(0, 2, 3, 4, 6, 7, 8))


def binding(decision: Decision) -> ObjectiveCheck | None:
    """The objective that decided (see the module docstring); None when none was measured."""
    checks = decision.objectives
    failed = [c for c in checks if not c.passed]
    if failed:
        unmeasured = next((c for c in failed if c.margin is None), None)
        return unmeasured or min(failed, key=_relative_margin)
    measured = [c for c in checks if c.margin is not None]
    return min(measured, key=_relative_margin) if measured else None


def _relative_margin(c: ObjectiveCheck) -> float:
    return float(c.margin or 0.0) / float(c.limit) if c.limit else float(c.margin or 0.0)


def _amount(c: ObjectiveCheck, value: float | None) -> str:
    if value is None:
        return NULL_TEXT
    if c.name == "errors":
        return f"{value * 100:.3g}%"
    return f"{value * 1000:.4g} ms"


def attainment_table(entries: tuple[CapacityEntry, ...]) -> Table:
    """One row per (configuration, probed value), lowest value first, the stop marked."""
    rows = []
    for e in ranked(entries):
        r = e.result
        for d in sorted(r.decisions, key=lambda d: float(d.value)):
            c = binding(d)
            rows.append(
                [
                    e.config,
                    _value(d.value, r),
                    str(len(d.point_indices)),
                    "pass" if d.passed else "FAIL",
                    NULL_TEXT if c is None else f"{c.name} {c.stat}",
                    NULL_TEXT if c is None else _amount(c, c.measured),
                    NULL_TEXT if c is None else _amount(c, c.limit),
                    NULL_TEXT if c is None else _amount(c, c.margin),
                    _mark(d, r),
                ]
            )
    headers = ["configuration", "load", "trials", "SLO", "binding", "measured", "limit", "margin", "where it stopped"]
    return Table(headers, rows, numeric=(1, 2, 5, 6, 7))


def _mark(d: Decision, r: CapacityResult) -> str:
    if r.max_passing is not None and d.value == r.max_passing:
        return "◀ max passing"
    if r.min_failing is not None and d.value == r.min_failing:
        return "◀ stopped passing" if r.max_passing is not None else "◀ lowest probe failed"
    return ""


def capacity_lines(entries: tuple[CapacityEntry, ...]) -> list[str]:
    """The ranking in sentences: each configuration's answer, and whether the lead is clear."""
    order = ranked(entries)
    lines = [f"{e.config}: {e.result.answer}." for e in order]
    if len(order) >= 2 and order[0].result.max_passing is not None:
        lines.insert(0, _lead(order[0], order[1]))
    return lines


def _lead(first: CapacityEntry, second: CapacityEntry) -> str:
    a, b = first.result, second.result
    if b.max_passing is None:
        return f"Highest capacity: {first.config} ({_value(a.max_passing, a)}); {second.config} met the SLO at no probed load."
    head = f"Highest capacity: {first.config} ({_value(a.max_passing, a)}) ahead of {second.config} "
    head += f"({_value(b.max_passing, b)})"
    sa = a.at_answer.requests_per_s if a.at_answer else None
    sb = b.at_answer.requests_per_s if b.at_answer else None
    if sa is None or sb is None or sa.ci95 is None or sb.ci95 is None or sa.mean is None or sb.mean is None:
        return head + " (one trial each: no CI on the requests/s at the answer)."
    clear = sa.mean - sa.ci95 > sb.mean + sb.ci95
    return head + (": a clear lead (the 95% CIs do not overlap)." if clear else ": the 95% CIs overlap.")


def attainment_chart(entries: tuple[CapacityEntry, ...]) -> list[Chart]:
    """Each configuration's binding objective as a share of its limit vs the probed load (above
    100% fails), the limit as a dashed line and each configuration's max passing load marked."""
    if not entries or not any(e.result.decisions for e in entries):
        return []
    series, marks, xs = [], [], []
    for i, e in enumerate(ranked(entries)):
        r = e.result
        points = [(float(d.value), binding(d), d) for d in sorted(r.decisions, key=lambda d: float(d.value))]
        xs += [x for x, _, _ in points]
        series.append(
            Series(
                name=e.config,
                x=[x for x, _, _ in points],
                y=[_share(c) for _, c, _ in points],
                kind="line",
                color=PALETTE[i % len(PALETTE)],
                hover=[f"{'pass' if d.passed else 'FAIL'}: {c.shown() if c else 'not measured'}" for _, c, d in points],
            )
        )
        if r.max_passing is not None:
            marks.append(Mark(x=float(r.max_passing), label=f"{e.config} max"))
    unit = _unit(entries[0].result)
    series.append(Series(name="limit", x=[min(xs), max(xs)], y=[100.0, 100.0], kind="dash", color="#7f7f7f"))
    return [
        Chart(
            chart_id="capacity_attainment",
            title="SLO attainment vs load",
            x_label=f"load ({unit})",
            panels=[Panel(y_label="binding objective (% of its limit)", series=series)],
            caption="Above 100% the probe failed; the marks are each configuration's highest passing load.",
            marks=marks,
            section="capacity",
        )
    ]


def _share(c: ObjectiveCheck | None) -> float | None:
    if c is None or c.measured is None or not c.limit:
        return None
    return float(c.measured) / float(c.limit) * 100
