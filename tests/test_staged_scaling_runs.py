"""A staged point (1 user, then 6, then 1) against the mock's scripted scaler: the second replica
appears 2.5 s after the first request, inside the high stage that began at 2 s, so its scale-up is
timed from that stage's start (not the point's), its lags are the script's, and each stage's SLO
attainment sits beside the timeline."""

from __future__ import annotations

import json
import urllib.request

import pytest
from run_helpers import config, mock_process, quiet

from tokenbench.config import BackendConfig, StagedLoad, StopConfig
from tokenbench.config.slo import SLOConfig
from tokenbench.config.stages import Stage
from tokenbench.run import run

# Serial (run alone): the scaler's times are compared with the mock's to within a poll interval.
pytestmark = pytest.mark.serial

INTERVAL_S, STARTUP_S = 0.2, 0.5
STAGES = (Stage(duration_s=2.0, users=1), Stage(duration_s=3.0, users=6), Stage(duration_s=2.0, users=1))


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    knobs = dict(ttft_ms=100, itl_ms=10, max_streams=2, replicas_script="0:1,2.5:2")
    with mock_process(**knobs, replica_startup_s=STARTUP_S) as url:
        cfg = config(
            url,
            tmp_path_factory.mktemp("staged-scaling"),
            [StagedLoad(stages=STAGES, start_level=1)],
            StopConfig(duration_s=7.0, drain_timeout_s=5),  # the stages' total
            output_tokens=5,
            backend=BackendConfig(metrics_interval_s=INTERVAL_S, scaler_url=url + "/mock/replicas"),
            slo=SLOConfig(ttft_s=0.3),
        )
        result = run(cfg, quiet())
        with urllib.request.urlopen(url + "/mock/replica-log") as resp:
            log = json.loads(resp.read())
    return result, log


def test_the_scale_up_is_timed_from_the_stage_that_rose(staged):
    result, log = staged
    (point,) = result.results["points"]
    (up,) = point["scaling"]["scale_ups"]
    high_start = point["span"]["start_s"] + 2.0  # the second stage's start on the run's clock
    assert up["step_s"] == pytest.approx(high_start)
    origin = result.results["clock"]["origin_monotonic_s"]
    times = {(t["replica"], t["state"]): t["at_s"] - origin for t in log["transitions"]}
    starting, running = times[("replica-2", "STARTING")], times[("replica-2", "RUNNING")]
    gap = point["scaling"]["max_poll_gap_s"]
    assert 0 <= up["seen_s"] - starting <= gap and 0 <= up["running_s"] - running <= gap
    assert up["lag_seen_s"] == pytest.approx(starting - high_start, abs=gap)
    assert up["lag_running_s"] == pytest.approx(running - high_start, abs=gap)
    # its first reply's first chunk: a TTFT (100 ms) after it really ran (the poll may see it later)
    assert up["first_request_s"] >= running + 0.1 - 0.005
    assert up["lag_first_request_s"] == pytest.approx(up["first_request_s"] - high_start)


def test_each_stage_has_its_slo_attainment_beside_the_timeline(staged):
    result, _ = staged
    (point,) = result.results["points"]
    stages = point["stages"]
    assert [s["target_users"] for s in stages] == [1, 6, 1]
    attained = [s["good_fraction"] for s in stages]
    assert attained[0] == 1.0  # one user on two slots: 100 ms TTFT, under the 300 ms objective
    assert attained[1] < 1.0  # six users on two slots until the second replica runs: some queue past it
    assert point["scaling"]["max_running_replicas"] == 2
