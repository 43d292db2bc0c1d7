"""report/capacity.py on hand-made capacity results: the ranking's order and CI sentence, the
binding objective of a probed value, and where each configuration stopped passing."""

from __future__ import annotations

from tokenbench.report.read.data import CapacityEntry
from tokenbench.report.sections.capacity import (
    attainment_chart,
    attainment_table,
    binding,
    capacity_lines,
    capacity_table,
    ranked,
)
from tokenbench.results import mean_ci95
from tokenbench.results.capacity import AtAnswer, CapacityResult, Decision, Objective, ObjectiveCheck

TTFT = Objective(name="ttft", stat="p90", limit=0.5)
ERRORS = Objective(name="errors", stat="fraction", limit=0.01)


def _check(o: Objective, measured: float) -> ObjectiveCheck:
    margin = o.limit - measured
    return ObjectiveCheck(**o.model_dump(), measured=measured, margin=margin, passed=margin >= 0)


def _decision(value: float, ttft: float, errors: float = 0.0) -> Decision:
    checks = [_check(TTFT, ttft), _check(ERRORS, errors)]
    return Decision(value=value, passed=all(c.passed for c in checks), point_indices=[1, 2], objectives=checks)


def _entry(config: str, decisions: list[Decision], rps: list[float] | None) -> CapacityEntry:
    passing = [d.value for d in decisions if d.passed]
    lo = max(passing, default=None)
    hi = min((d.value for d in decisions if not d.passed and (lo is None or d.value > lo)), default=None)
    at = None
    if rps is not None and lo is not None:
        at = AtAnswer(
            value=lo,
            requests_per_s=mean_ci95(rps),
            goodput_per_s=mean_ci95(rps),
            output_tokens_per_s=mean_ci95([r * 10 for r in rps]),
        )
    result = CapacityResult(
        variable="rate",
        max_passing=lo,
        max_rate_per_s=lo,
        min_failing=hi,
        tolerance=0.05,
        trials=2,
        max_probes=8,
        slo=[TTFT, ERRORS],
        ceiling=None,
        probes=[],
        decisions=decisions,
        at_answer=at,
        stopped_by="tolerance",
        answer=f"max {lo} req/s" if lo is not None else "no load meets the SLO",
    )
    return CapacityEntry(config, result)


SMALL = _entry("small", [_decision(4, 0.3), _decision(6, 0.45), _decision(8, 0.9)], [5.9, 6.1])
BIG = _entry("big", [_decision(10, 0.2), _decision(12, 0.49), _decision(14, 0.3, errors=0.05)], [11.9, 12.1])
NONE = _entry("none", [_decision(2, 0.7)], None)


def test_the_ranking_puts_the_highest_max_passing_first_and_no_passing_load_last():
    assert [e.config for e in ranked((NONE, SMALL, BIG))] == ["big", "small", "none"]
    table = capacity_table((NONE, SMALL, BIG))
    assert [r[:3] for r in table.rows] == [["1", "big", "12 req/s"], ["2", "small", "6 req/s"], ["3", "none", "–"]]
    assert table.rows[0][3] == "12.00 ± 1.27"  # mean ± t(0.975, 1) x s / sqrt(2) = 12.706 x 0.1
    assert table.rows[0][4:6] == ["14 req/s", "errors 5%"]


def test_a_lead_is_clear_only_when_the_cis_do_not_overlap():
    assert capacity_lines((SMALL, BIG))[0].endswith(": a clear lead (the 95% CIs do not overlap).")
    close = _entry("close", [_decision(11, 0.3), _decision(13, 0.9)], [11.5, 12.5])
    assert capacity_lines((close, BIG))[0].endswith(": the 95% CIs overlap.")
    assert capacity_lines((NONE, SMALL))[0] == "Highest capacity: small (6 req/s); none met the SLO at no probed load."


def test_the_binding_objective_is_the_furthest_over_its_limit_or_the_closest_to_it():
    assert binding(_decision(8, 0.9)).name == "ttft"  # failed: ttft 80% over, errors 0
    assert binding(_decision(14, 0.6, errors=0.05)).name == "errors"  # errors 400% over beats ttft 20%
    assert binding(_decision(12, 0.49, errors=0.009)).name == "ttft"  # passed: 2% vs 10% of the limit left


def test_attainment_lists_every_probed_value_and_marks_where_each_stopped_passing():
    table = attainment_table((SMALL, NONE))
    assert [r[:4] + r[8:] for r in table.rows] == [
        ["small", "4 req/s", "2", "pass", ""],
        ["small", "6 req/s", "2", "pass", "◀ max passing"],
        ["small", "8 req/s", "2", "FAIL", "◀ stopped passing"],
        ["none", "2 req/s", "2", "FAIL", "◀ lowest probe failed"],
    ]
    assert table.rows[2][4:8] == ["ttft p90", "900 ms", "500 ms", "-400 ms"]


def test_the_attainment_chart_draws_the_binding_share_of_its_limit_per_configuration():
    (chart,) = attainment_chart((SMALL, BIG))
    big, small, limit = chart.panels[0].series
    assert (big.name, big.x, big.y) == ("big", [10.0, 12.0, 14.0], [40.0, 98.0, 500.0])
    assert (small.x, small.y) == ([4.0, 6.0, 8.0], [60.0, 90.0, 180.0])
    assert (limit.x, limit.y) == ([4.0, 14.0], [100.0, 100.0])
    assert [(m.x, m.label) for m in chart.marks] == [(12.0, "big max"), (6.0, "small max")]
    assert attainment_chart(()) == []
