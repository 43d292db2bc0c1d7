"""The search as a plan of points, fed synthetic points with known numbers: the saturating probe,
the ceiling, trials judged on their mean, the evidence and the console's answer line."""

from __future__ import annotations

import pytest
from report_synthetic import point, results

from tokenbench.capacity import CapacityPlan, CapacitySettings, parse_objectives
from tokenbench.config import RateLoad, UsersLoad
from tokenbench.results import PointResult, RunResults


def _empty() -> RunResults:
    return RunResults.from_json(results([]))


def _feed(plan: CapacityPlan, points: list[dict]) -> list:
    """Each point finished in turn; the loads the plan asked for (the first before any point)."""
    run = _empty()
    asked = [plan(run)]
    for p in points:
        run = run.with_point(PointResult.model_validate(p))
        asked.append(plan(run))
    return asked


def _probe(index: int, rate: float, ttft_s: float, rps: float | None = None, goodput: float | None = None) -> dict:
    return point(index, "rate", rate, ttft_s=ttft_s, rps=rps or rate, goodput_per_s=goodput, tokens_per_s=rate * 10)


def test_a_rate_search_from_the_saturating_probe_to_the_answer():
    # ttft p90 = 0.8 x p99 = 1.6 x ttft (report_synthetic.dist): 0.25 -> 0.4 s passes 0.5 s; 0.5 -> 0.8 s fails
    slo = parse_objectives("ttft:p90<=500ms")
    changes = []
    plan = CapacityPlan(RateLoad(rate_per_s=1, arrival="constant"), slo, CapacitySettings(), changes.append)
    saturate = point(0, "users", 32, rps=10.0, ttft_s=2.0)
    probes = [_probe(1, 10.0, 0.25, goodput=9.5), _probe(2, 12.5, 0.5), _probe(3, 11.2, 0.5), _probe(4, 10.6, 0.5)]
    probes.append(_probe(5, 10.3, 0.25))
    asked = _feed(plan, [saturate, *probes])
    assert asked[0] == UsersLoad(users=32)
    assert [a.rate_per_s for a in asked[1:-1]] == [10.0, 12.5, 11.2, 10.6, 10.3]
    assert all(a.arrival == "constant" for a in asked[1:-1]) and asked[-1] is None
    result = plan.result()
    assert result.ceiling is not None and result.ceiling.estimate == 10.0 and result.ceiling.point_index == 0
    assert (result.max_passing, result.max_rate_per_s, result.min_failing) == (10.3, 10.3, 10.6)
    assert result.stopped_by == "tolerance" and len(changes) == 6
    assert [(p.value, p.point_index, p.passed) for p in result.probes] == [
        (10.0, 1, True),
        (12.5, 2, False),
        (11.2, 3, False),
        (10.6, 4, False),
        (10.3, 5, True),
    ]
    assert all(p.requests == 20 for p in result.probes)  # report_synthetic's 20 ok requests
    check = result.probes[1].objectives[0]
    assert (check.measured, check.passed) == (0.8, False) and check.margin == pytest.approx(-0.3)
    assert result.answer == "max 10.3 req/s under ttft p90 ≤ 500 ms (next 10.6 failed: ttft p90 0.8 s)"
    assert result.at_answer is not None and result.at_answer.requests_per_s.mean == 10.3


def test_trials_repeat_each_value_and_the_verdict_is_on_their_mean():
    slo = parse_objectives("ttft:p90<=500ms")
    settings = CapacitySettings(trials=2, max_probes=1)
    plan = CapacityPlan(RateLoad(rate_per_s=1), slo, settings)
    # trial ttft p90: 0.4 s and 0.56 s: mean 0.48 s passes though the second trial alone fails
    points = [point(0, "users", 32, rps=4.0), _probe(1, 4.0, 0.25, goodput=3.0), _probe(2, 4.0, 0.35, goodput=4.0)]
    asked = _feed(plan, points)
    assert [getattr(a, "rate_per_s", None) for a in asked] == [None, 4.0, 4.0, None]
    result = plan.result()
    assert [(p.trial, p.passed) for p in result.probes] == [(0, True), (1, False)]
    assert len(result.decisions) == 1 and result.decisions[0].passed
    assert result.decisions[0].point_indices == [1, 2]
    assert result.stopped_by == "budget" and result.max_passing == 4.0 and result.min_failing is None
    assert result.at_answer is not None
    goodput = result.at_answer.goodput_per_s
    assert (goodput.mean, goodput.n) == (3.5, 2) and goodput.ci95 is not None and goodput.ci95 > 0
    assert result.answer == "max 4 req/s under ttft p90 ≤ 500 ms (no probe above it failed)"


def test_every_probe_failing_is_an_answer_with_its_evidence():
    slo = parse_objectives("ttft:p90<=10ms,errors<=1%")
    plan = CapacityPlan(RateLoad(rate_per_s=1), slo, CapacitySettings(max_probes=2))
    asked = _feed(plan, [point(0, "users", 32, rps=8.0), _probe(1, 8.0, 0.1), _probe(2, 4.0, 0.1)])
    assert [getattr(a, "rate_per_s", None) for a in asked] == [None, 8.0, 4.0, None]
    result = plan.result()
    assert result.max_passing is None and result.min_failing == 4.0 and result.at_answer is None
    assert result.stopped_by == "budget"
    assert result.answer == (
        "no load meets the SLO (ttft p90 ≤ 10 ms, errors ≤ 1%): the lowest probe, 4 req/s, failed: ttft p90 0.16 s"
    )


def test_a_saturating_probe_that_completed_nothing_stops_the_search():
    plan = CapacityPlan(RateLoad(rate_per_s=1), parse_objectives("ttft:p90<=1s"), CapacitySettings())
    asked = _feed(plan, [point(0, "users", 32, rps=None, ttft_s=None, outcomes={"http_error": 5})])
    assert asked[1] is None
    result = plan.result()
    assert result.stopped_by == "no_ceiling" and result.probes == []
    assert result.answer == "no load meets the SLO: the saturating probe (32 users) completed no request"


def test_a_users_search_starts_from_littles_law_at_the_unqueued_service_time():
    # 4 req/s through 32 users, shortest E2E (ttft 0.25 + 2 s) / 2 = 1.125 s: ceil(4 x 1.125) = 5 users
    plan = CapacityPlan(
        UsersLoad(users=1, ramp_up_s=2.0), parse_objectives("e2e:p90<=3s"), CapacitySettings(variable="users")
    )
    asked = _feed(plan, [point(0, "users", 32, rps=4.0, ttft_s=0.25)])
    assert asked[0] == UsersLoad(users=32, ramp_up_s=2.0)
    assert asked[1] == UsersLoad(users=5, ramp_up_s=2.0)
    result = plan.result()
    assert result.ceiling is not None and result.ceiling.estimate == 5 and result.max_users is None


def test_an_over_saturated_probe_fails_and_the_answer_says_why():
    """autostop: a probe stopped over-saturated fails even where its few seconds met every objective;
    its decision says so, and the answer line names it instead of an empty reason."""
    slo = parse_objectives("ttft:p90<=500ms")
    plan = CapacityPlan(RateLoad(rate_per_s=1), slo, CapacitySettings(max_probes=2))
    backlog = {"slope_per_s": 2.0, "ci95_low": 1.5, "ci95_high": 2.5, "span_s": 5.0, "mean_backlog": 8.0}
    over = {**_probe(2, 12.5, 0.25), "over_saturated": {"at_s": 7.5, "backlog": backlog}}
    _feed(plan, [point(0, "users", 32, rps=10.0), _probe(1, 10.0, 0.25), over])
    result = plan.result()
    passing, saturated = result.decisions
    assert passing.passed and not passing.over_saturated
    assert saturated.over_saturated and not saturated.passed and saturated.objectives[0].passed
    assert result.answer == (
        "max 10 req/s under ttft p90 ≤ 500 ms (next 12.5 failed: over-saturated (its backlog grew without bound))"
    )
