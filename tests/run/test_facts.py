"""What a run writes of itself (run_facts.py): config.json from the run's live objects, and each
point's two events, with the keys a 0.2.1 run wrote (tests/fixtures/rundirs) and no more."""

from __future__ import annotations

import json
from pathlib import Path

from run_helpers import SETTINGS_ADDED_SINCE_FIXTURES, settings_added, without_settings_added

from tokenbench.backends.cache_control import NOT_REQUESTED, CacheReset
from tokenbench.config import DatasetConfig, RateLoad, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.datasets import build_requests
from tokenbench.loadgen import PointRun
from tokenbench.loadgen.sessions import SessionTally
from tokenbench.records import RunClock
from tokenbench.results.client import WorkerLoss
from tokenbench.results.manifest import RunManifest, ServerFacts
from tokenbench.run.facts import config_json, point_facts, start_facts
from tokenbench.telemetry.sampler import Sampler, SamplesFile

FIXTURE_RUNS = Path(__file__).parents[1] / "fixtures" / "rundirs"


def _run(**kw) -> PointRun:
    return PointRun(
        index=1,
        load=RateLoad(rate_per_s=4.0),
        start_s=2.0,
        ramp_end_s=2.0,
        window_start_s=2.5,
        load_end_s=6.0,
        end_s=6.25,
        user_spans=[(2.0, 6.0)],
        num_records=12,
        last_arrival_s=5.75,
        **kw,
    )


def test_config_json_is_the_settings_and_every_resolved_fact(tmp_path):
    config = RunConfig(
        target=TargetConfig(url="http://h:1", headers={"Authorization": "Bearer sk-plantedplanted"}),
        loads=[UsersLoad(users=2)],
        stop=StopConfig(duration_s=3),
        dataset=DatasetConfig(input_tokens=8, output_tokens=4, num_prompts=3),
    )
    target = config.target.model_copy(update={"model": "m", "api": "chat", "continuous_usage": False})
    _, info = build_requests(config.dataset, None, 0)
    sampler = Sampler(tmp_path / "samples.jsonl", 100.0, None, None, 0.5)  # not started: only its settings
    manifest = config_json(config, target, ServerFacts.attached(None, None), info, RunClock(100.0, 1e9), sampler)
    data = manifest.to_json()
    sessions_run = json.loads((FIXTURE_RUNS / "0.2.1-sessions" / "config.json").read_text())
    # the keys a 0.2.1 run wrote, in its order, and those added since
    assert list(without_settings_added(data)) == list(sessions_run)
    assert set(settings_added(data)) == set(SETTINGS_ADDED_SINCE_FIXTURES)
    assert data["target"]["headers"] == {"Authorization": "***"}  # the settings as redacted
    assert data["resolved_target"] == {"url": "http://h:1", "model": "m", "api": "chat", "continuous_usage": False}
    assert data["backend"] == {"backend": "attached", "engine": None}
    assert data["clock"] == {
        "origin_monotonic_s": 100.0,
        "origin_unix_s": 1e9,
        "unit": "seconds since origin, time.perf_counter()",
    }
    assert data["telemetry"] == {"samples": "samples.jsonl", "metrics_url": None, "interval_s": 0.5}
    assert data["tool"]["name"] == "tokenbench" and data["dataset_info"]["num_requests"] == 3
    assert RunManifest.from_json(data).dataset_info == info


def test_a_points_events_have_the_keys_a_0_2_run_wrote():
    written = SamplesFile(FIXTURE_RUNS / "0.2.1-workers" / "samples.jsonl")
    start = start_facts(_run(), NOT_REQUESTED).to_json()
    end = point_facts(_run(), NOT_REQUESTED).to_json()
    assert set(start) == set(written.events("point_start")[0])
    assert set(end) == set(written.events("point")[0])
    assert start["kind"] == "point_start" and end["kind"] == "point"
    assert end["load"] == RateLoad(rate_per_s=4.0).model_dump(mode="json")  # the load whole
    assert (end["user_spans"], end["num_records"], end["last_arrival_s"]) == ([[2.0, 6.0]], 12, 5.75)
    assert end["prefix_cache_reset"] == {"status": "not_requested", "detail": None}


def test_sessions_and_lost_workers_only_on_the_points_that_had_them():
    tally = SessionTally(started=3, completed=2, ended_by_stop=1)
    reset = CacheReset("failed", "HTTP 404")
    lost = WorkerLoss(worker=1, at_s=4.0, reason="exit 9", in_flight=2)
    end = point_facts(_run(sessions=tally), reset, [lost])
    assert end.sessions is not None and end.sessions.completed == 2 and end.workers_lost == [lost]
    data = end.to_json()
    assert data["sessions"]["ended_by_stop"] == 1 and data["workers_lost"][0]["reason"] == "exit 9"
    assert data["prefix_cache_reset"] == {"status": "failed", "detail": "HTTP 404"}
    plain = point_facts(_run(), reset).to_json()
    assert "sessions" not in plain and "workers_lost" not in plain
