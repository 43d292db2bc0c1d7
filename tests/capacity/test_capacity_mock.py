"""The capacity search against the scripted mock with a known capacity (``--max-streams N``: N
generate at once, the rest wait FIFO): capacity = N / service time, service time = TTFT + (n - 1)
x ITL for n one-token chunks. Short probes: a few seconds each."""

from __future__ import annotations

import json

import pytest
from run_helpers import config, mock_process, quiet

from tokenbench.capacity import CapacitySettings, parse_objectives, search
from tokenbench.config import RateLoad, StopConfig, UsersLoad
from tokenbench.config.cost import CostConfig
from tokenbench.results import RunResults
from tokenbench.results.capacity import CapacityResult

# Serial (run alone, never beside other tests): a users capacity of exactly 2 under a 100 ms TTFT
# objective (a busy neighbour made it 1).
pytestmark = pytest.mark.serial

TTFT_MS, ITL_MS, TOKENS, STREAMS = 50.0, 10.0, 10, 2
SERVICE_S = (TTFT_MS + (TOKENS - 1) * ITL_MS) / 1000  # 0.14 s
TRUE_RATE = STREAMS / SERVICE_S  # 14.3 req/s
STOP = StopConfig(duration_s=3.0, drain_timeout_s=20.0)


@pytest.fixture(scope="module")
def capped():
    """The mock in a child process (its timing is not the test's GIL's), for the whole module."""
    with mock_process(ttft_ms=TTFT_MS, itl_ms=ITL_MS, max_streams=STREAMS) as url:
        yield url


def _search(url, tmp_path, load, slo, cost=None, **settings):
    run_config = config(url, tmp_path, [load], STOP, output_tokens=TOKENS).model_copy(update={"cost": cost})
    return search(run_config, parse_objectives(slo), CapacitySettings(saturate_users=8, **settings), console=quiet())


def test_rate_capacity_within_10_percent_of_the_truth_in_a_bounded_number_of_probes(capped, tmp_path):
    # Below the capacity constant arrivals never wait (TTFT 50 ms); above it by e, the wait grows
    # by about e x t: over a 3 s window the p90 TTFT passes 120 ms once e > 3%.
    result = _search(capped, tmp_path, RateLoad(rate_per_s=1, arrival="constant"), "ttft:p90<=120ms")
    run_dir = tmp_path / "run"
    assert result.max_rate_per_s is not None
    assert abs(result.max_rate_per_s - TRUE_RATE) / TRUE_RATE <= 0.10, result.answer
    assert result.ceiling is not None and abs(result.ceiling.requests_per_s - TRUE_RATE) / TRUE_RATE <= 0.10
    assert result.stopped_by == "tolerance" and len(result.decisions) <= 8
    assert result.min_failing is not None
    assert (result.min_failing - result.max_rate_per_s) / result.max_rate_per_s <= 0.05
    # one run directory: the saturating probe and every probe are its points, capacity.json beside
    on_disk = CapacityResult.model_validate(json.loads((run_dir / "capacity.json").read_text()))
    assert on_disk == result
    points = RunResults.from_json(json.loads((run_dir / "results.json").read_text())).points
    assert len(points) == 1 + len(result.probes)
    assert [p.load.rate_per_s for p in points[1:]] == [p.value for p in result.probes]
    assert points[0].load.kind == "users" and points[0].load.users == 8
    assert result.answer.startswith(f"max {result.max_rate_per_s:g} req/s under ttft p90 ≤ 120 ms (next ")


def test_the_probe_budget_stops_the_search(capped, tmp_path):
    run_dir = tmp_path / "run"
    result = _search(
        capped, tmp_path, RateLoad(rate_per_s=1, arrival="constant"), "ttft:p90<=120ms", max_probes=2, tolerance=0.001
    )
    assert result.stopped_by == "budget" and len(result.decisions) == 2 and len(result.probes) == 2
    assert len(json.loads((run_dir / "results.json").read_text())["points"]) == 3
    assert result.at_answer is not None and result.at_answer.usd_per_million_output_tokens is None  # unpriced


def test_a_priced_search_states_the_price_per_million_output_tokens_at_the_answer(capped, tmp_path):
    cost = CostConfig(usd_per_gpu_hour=2.5, gpus=4)  # $10/h
    result = _search(capped, tmp_path, RateLoad(rate_per_s=1, arrival="constant"), "errors<=1%", cost, max_probes=1)
    answer = result.at_answer
    assert answer is not None and answer.output_tokens_per_s.mean
    assert answer.usd_per_million_output_tokens == pytest.approx(10 / 3600 / answer.output_tokens_per_s.mean * 1e6)


def test_users_capacity_is_the_number_of_streams(capped, tmp_path):
    # N users never wait; N + 1 make one in three requests wait a whole service time (0.14 s)
    result = _search(capped, tmp_path, UsersLoad(users=1), "ttft:p90<=100ms", variable="users")
    assert result.max_users == STREAMS and result.min_failing == STREAMS + 1, result.answer
    assert result.stopped_by == "tolerance"


def test_a_server_the_caller_holds_serves_the_search(capped, tmp_path):
    """As experiments will call it: the server held by the caller, the run directory its out_dir."""
    from tokenbench.backends.server import server_under_test

    run_config = config(capped, tmp_path, [RateLoad(rate_per_s=1, arrival="constant")], STOP, output_tokens=TOKENS)
    settings = CapacitySettings(saturate_users=4, max_probes=1)
    with server_under_test(None, capped, tmp_path / "server.log") as held:
        result = search(
            run_config.model_copy(update={"target": run_config.target.model_copy(update={"url": None})}),
            parse_objectives("errors<=1%"),
            settings,
            server=held,
            console=quiet(),
        )
    assert result.stopped_by == "budget" and result.max_passing is not None and len(result.probes) == 1
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["target"]["url"] == capped and len(results["points"]) == 2
