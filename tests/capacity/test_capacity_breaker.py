"""A capacity search against a server that fails every request: the circuit breaker stops each
point it probes (bounded requests), and the search still ends with an answer and a reason, never
"nothing probed" (the breaker's stop is the run's plan's to read: a fixed plan ends, a search goes on)."""

from __future__ import annotations

import json

from report_synthetic import point, results
from run_helpers import config, quiet

from tokenbench.capacity import CapacitySettings, parse_objectives, search
from tokenbench.config import RateLoad, StopConfig, UsersLoad
from tokenbench.results import PointResult, RunResults
from tokenbench.run import fixed_plan


def test_a_search_against_a_server_failing_everything_ends_with_a_reason(mock_server, tmp_path):
    url = mock_server(ttft_ms=5, itl_ms=1, fault="http_500")
    run_config = config(url, tmp_path, [RateLoad(rate_per_s=2, arrival="constant")], StopConfig(duration_s=3.0))
    slo = parse_objectives("ttft:p90<=500ms,errors<=1%")
    result = search(run_config, slo, CapacitySettings(saturate_users=4, max_probes=3), console=quiet())
    assert result.stopped_by == "no_ceiling", result.answer  # the saturating probe served nothing
    assert result.max_passing is None and "nothing probed" not in result.answer
    points = RunResults.from_json(json.loads((tmp_path / "run" / "results.json").read_text())).points
    assert len(points) == 1 and points[0].stopped_early is not None
    assert points[0].requests.total <= 20 + 4 - 1  # the breaker's bound: 20 failures in a row + users - 1


def _stopped(index: int, users: int, stopped: bool) -> PointResult:
    data = point(index, "users", users, outcomes={"http_error": 20} if stopped else {"ok": 20})
    if stopped:
        data["stopped_early"] = {"by": "circuit_breaker", "reason": "20 requests in a row failed", "at_s": 1.0}
    return PointResult.model_validate(data)


def test_a_fixed_plan_ends_after_a_point_the_breaker_stopped():
    loads = [UsersLoad(users=u) for u in (1, 2, 4)]
    plan = fixed_plan(loads)
    run = RunResults.from_json(results([]))
    assert plan(run) == loads[0]
    run = run.with_point(_stopped(0, 1, stopped=False))
    assert plan(run) == loads[1]
    run = run.with_point(_stopped(1, 2, stopped=True))
    assert plan(run) is None  # the server failed everything: 4 users would only flood it
