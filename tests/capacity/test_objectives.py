"""--slo's objectives for a capacity search: the syntax, its errors, and their checks on a point."""

from __future__ import annotations

import pytest
from report_synthetic import point

from tokenbench.capacity.objectives import ObjectiveError, check, check_mean, goodput_slo, measure, parse_objectives
from tokenbench.config.slo import SLOConfig
from tokenbench.results import PointResult
from tokenbench.results.capacity import Objective


def test_the_issue_example_parses_in_seconds_and_fractions():
    assert parse_objectives("ttft:p90<=500ms, tpot:p90<=50ms,errors<=1%") == [
        Objective(name="ttft", stat="p90", limit=0.5),
        Objective(name="tpot", stat="p90", limit=0.05),
        Objective(name="errors", stat="fraction", limit=0.01),
    ]
    assert parse_objectives("E2E:mean<=2s,queue:p99<=0.1,itl:p95<=30ms,errors<=0.02") == [
        Objective(name="e2e", stat="mean", limit=2.0),
        Objective(name="queue", stat="p99", limit=0.1),
        Objective(name="itl", stat="p95", limit=0.03),
        Objective(name="errors", stat="fraction", limit=0.02),
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("ttft<=500ms", "'ttft<=500ms': no statistic"),
        ("ttft:p80<=1s", "unknown statistic 'p80'"),
        ("speed:p90<=1s", "unknown metric 'speed'"),
        ("ttft:p90>=1s", "only <= is supported"),
        ("ttft:p90<=fast", "cannot read the limit 'fast'"),
        ("ttft:p90 500ms", "'ttft:p90 500ms': write METRIC:STAT<=LIMIT"),
        ("errors<=150%", "above 100%"),
        ("errors:p90<=1%", "errors takes no statistic"),
        ("ttft:p90<=1s,ttft:p90<=2s", "names ttft p90 twice"),
        (" , ", "--slo is empty"),
    ],
)
def test_a_malformed_objective_is_named_with_the_syntax(text, says):
    with pytest.raises(ObjectiveError, match="--slo") as info:
        parse_objectives(text)
    assert says in str(info.value)


def _point(**kw) -> PointResult:
    return PointResult.model_validate(point(0, "rate", 2.0, **kw))


def test_measured_on_the_points_own_distributions_and_error_rate():
    p = _point(ttft_s=0.1, outcomes={"ok": 18, "http_error": 2, "cancelled": 5})
    assert measure(p, Objective(name="ttft", stat="p90", limit=1)) == pytest.approx(0.16)  # p99 0.2 x 0.8
    assert measure(p, Objective(name="ttft", stat="mean", limit=1)) == pytest.approx(0.1)
    assert measure(p, Objective(name="e2e", stat="p50", limit=1)) == pytest.approx(2.1)
    # cancelled requests are censored (METRICS.md): 2 failures over 20 finished
    assert measure(p, Objective(name="errors", stat="fraction", limit=1)) == pytest.approx(0.1)


def test_nothing_measured_fails_the_objective():
    p = _point(ttft_s=None, outcomes={"http_error": 3})
    ttft = Objective(name="ttft", stat="p90", limit=1)
    assert measure(p, ttft) is None
    assert not check(ttft, None).passed and check(ttft, None).margin is None
    assert measure(p, Objective(name="errors", stat="fraction", limit=0.5)) == 1.0


def test_margin_is_limit_minus_measured_and_the_limit_itself_passes():
    o = Objective(name="ttft", stat="p90", limit=0.5)
    assert check(o, 0.4).margin == pytest.approx(0.1) and check(o, 0.4).passed
    assert check(o, 0.5).passed
    assert check(o, 0.6).margin == pytest.approx(-0.1) and not check(o, 0.6).passed


def test_trials_are_judged_on_their_mean():
    o = Objective(name="ttft", stat="p90", limit=0.5)
    assert check_mean(o, [0.4, 0.58]).passed  # mean 0.49, though one trial alone fails
    assert check_mean(o, [0.4, 0.58]).measured == pytest.approx(0.49)
    assert not check_mean(o, [0.4, None]).passed  # a trial with nothing measured fails it


def test_goodput_counts_the_tightest_per_request_limits():
    objectives = parse_objectives("ttft:p90<=500ms,ttft:p99<=1s,tpot:p50<=40ms,queue:p90<=1s,errors<=1%")
    assert goodput_slo(objectives) == SLOConfig(ttft_s=0.5, tpot_s=0.04)
