"""A run against the mock's scripted scaler, checked against the script and the mock's own log:
one replica (2 slots), a load step from 1 user to 6 (two 2 s points), and a second replica STARTING
2.5 s after the first request (in the second point) and RUNNING 0.5 s later. Each point's ``scaling`` has the timeline (1 RUNNING, then
1 RUNNING + 1 STARTING, then 2 RUNNING), the scale-up timed from the step to within the poll
interval of the mock's log, the replica-seconds, and the replica time's cost; the report shows
the transitions and the lags."""

from __future__ import annotations

import json
import urllib.request

import jsonschema
import pytest
from run_helpers import config, mock_process, quiet

from tokenbench.config import BackendConfig, StopConfig, UsersLoad
from tokenbench.config.cost import CostConfig
from tokenbench.report.read.load import load_inputs
from tokenbench.report.render.markdown import render_markdown
from tokenbench.report.render.outline import build_outline
from tokenbench.report.sections.verdict import decide
from tokenbench.results import SCHEMA_PATH
from tokenbench.run import run
from tokenbench.rundir.derive import recompute_run

# Serial (run alone): the scaler's times are compared with the mock's to within a poll interval.
pytestmark = pytest.mark.serial

INTERVAL_S = 0.2
STARTUP_S = 0.5
TTFT_S = 0.1


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    knobs = dict(ttft_ms=TTFT_S * 1e3, itl_ms=10, max_streams=2, replicas_script="0:1,2.5:2")
    with mock_process(**knobs, replica_startup_s=STARTUP_S) as url:
        cfg = config(
            url,
            tmp_path_factory.mktemp("scaling"),
            [UsersLoad(users=1), UsersLoad(users=6)],
            StopConfig(duration_s=2.0, drain_timeout_s=5),
            output_tokens=5,
            backend=BackendConfig(metrics_interval_s=INTERVAL_S, scaler_url=url + "/mock/replicas"),
            cost=CostConfig(usd_per_gpu_hour=3.6),
        )
        result = run(cfg, quiet())
        with urllib.request.urlopen(url + "/mock/replica-log") as resp:
            log = json.loads(resp.read())
        with urllib.request.urlopen(url + "/mock/deliveries") as resp:
            deliveries = json.loads(resp.read())
    return result, log, deliveries


def _on_run_clock(result, at_s: float) -> float:
    return at_s - result.results["clock"]["origin_monotonic_s"]


def test_the_timeline_follows_the_script(scaled):
    result, log, _ = scaled
    low, high = result.results["points"]
    assert "scaling" in low and "scaling" in high
    assert low["scaling"]["scale_ups"] == [] and low["scaling"]["max_running_replicas"] == 1
    times = {(t["replica"], t["state"]): _on_run_clock(result, t["at_s"]) for t in log["transitions"]}
    starting, running = times[("replica-2", "STARTING")], times[("replica-2", "RUNNING")]
    for row in high["scaling"]["timeline"]:
        expected = (1, 0) if row["t_s"] < starting else (1, 1) if row["t_s"] < running else (2, 0)
        # a poll sent within its own duration of a transition may show either side
        if min(abs(row["t_s"] - starting), abs(row["t_s"] - running)) > 0.05:
            assert (row["running"], row["other"]) == expected, row
    assert [(t["replica"], t["from_state"], t["to_state"]) for t in high["scaling"]["transitions"]] == [
        ("replica-2", None, "STARTING"),
        ("replica-2", "STARTING", "RUNNING"),
    ]


def test_the_scale_up_is_timed_from_the_step_to_within_a_poll_interval(scaled):
    result, log, deliveries = scaled
    high = result.results["points"][1]
    (up,) = high["scaling"]["scale_ups"]
    assert up["replica"] == "replica-2"
    assert up["step_s"] == high["span"]["start_s"]  # the load rose from 1 user to 6
    times = {(t["replica"], t["state"]): _on_run_clock(result, t["at_s"]) for t in log["transitions"]}
    starting, running = times[("replica-2", "STARTING")], times[("replica-2", "RUNNING")]
    assert running - starting == pytest.approx(STARTUP_S, abs=0.03)  # the script's start-up delay
    # the first poll after each transition shows it: late by at most the gap between polls
    gap = high["scaling"]["max_poll_gap_s"]
    assert INTERVAL_S - 0.05 <= gap <= INTERVAL_S + 0.1
    assert 0 <= up["seen_s"] - starting <= gap
    assert 0 <= up["running_s"] - running <= gap
    assert up["lag_seen_s"] == pytest.approx(up["seen_s"] - up["step_s"])
    assert up["lag_running_s"] > up["lag_seen_s"] > 0
    # the new replica's first reply began when its first request was admitted, TTFT after RUNNING
    first_chunk = min(
        _on_run_clock(result, d["chunk_times_s"][0]) for d in deliveries.values() if d["replica"] == "replica-2"
    )
    assert first_chunk - running == pytest.approx(TTFT_S, abs=0.03)
    records = [json.loads(line) for line in (result.run_dir / "records.jsonl").read_text().splitlines()]
    assert any(r["replica"] == "replica-2" and r["replica_from"] == "header" for r in records)
    assert up["first_request_s"] == pytest.approx(first_chunk, abs=0.01)
    assert up["lag_first_request_s"] == pytest.approx(first_chunk - up["step_s"], abs=0.01)


def test_replica_seconds_and_their_cost_follow_the_script(scaled):
    result, log, _ = scaled
    high = result.results["points"][1]
    start, end = high["span"]["start_s"], high["span"]["end_s"]
    running = _on_run_clock(
        result, next(t["at_s"] for t in log["transitions"] if t["state"] == "RUNNING" and t["replica"] == "replica-2")
    )
    truth = (running - start) * 1 + (end - running) * 2
    scaling = high["scaling"]
    assert scaling["replica_seconds"] == pytest.approx(
        truth, abs=INTERVAL_S + 0.05
    )  # RUNNING seen up to an interval late
    assert scaling["mean_running_replicas"] == pytest.approx(scaling["replica_seconds"] / (end - start))
    assert high["cost"]["replica_seconds"] == scaling["replica_seconds"]
    assert high["cost"]["usd_for_replica_seconds"] == pytest.approx(scaling["replica_seconds"] / 3600 * 3.6)
    up = scaling["scale_ups"][0]
    # SLO windows: before (step -> seen), during (seen -> RUNNING), after (RUNNING -> the point's end)
    assert up["slo_before"]["period_s"] == [up["step_s"], up["seen_s"]]
    assert up["slo_during"]["period_s"] == [up["seen_s"], up["running_s"]]
    assert up["slo_after"]["period_s"] == [up["running_s"], end]
    assert up["slo_after"]["requests"] > 0
    assert up["slo_after"]["good"] is None and up["slo_after"]["attainment"] is None  # no SLO: never 0


def test_results_validate_and_recompute_the_same(scaled):
    result, _, _ = scaled
    jsonschema.validate(result.results, json.loads(SCHEMA_PATH.read_text()))
    again = recompute_run(result.run_dir).to_json()
    assert [p["scaling"] for p in again["points"]] == [p["scaling"] for p in result.results["points"]]


def test_the_report_shows_the_replica_timeline_and_the_lags(scaled):
    result, _, _ = scaled
    data = load_inputs([result.run_dir])
    outline = build_outline(data, decide(data), [])
    section = next(s for s in outline.sections if s.key == "scaling")
    timeline, lags = (b.table for b in section.blocks)
    assert timeline is not None and lags is not None
    changes = [(row[1], row[3], row[4]) for row in timeline.rows if row[2] != "whole point"]
    assert changes == [("6 users", "replica-2", "new → STARTING"), ("6 users", "replica-2", "STARTING → RUNNING")]
    up = result.results["points"][1]["scaling"]["scale_ups"][0]
    (row,) = lags.rows
    assert row[2:5] == ["replica-2", f"{up['lag_seen_s']:.2f}", f"{up['lag_running_s']:.2f}"]
    assert "Autoscaling: replicas over time" in render_markdown(outline, [])
