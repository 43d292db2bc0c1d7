"""config.json and the point events as types (manifest.py): one to_json/from_json pair that gives a
0.2.1 run's files back key for key, "attached" for a server tokenbench knows nothing of, the
defaults of older layouts declared once, and clear errors for what is not a run's config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_helpers import SETTINGS_ADDED_SINCE_FIXTURES, settings_added, without_settings_added

from tokenbench.config import BackendConfig, DeadlinesConfig, RunConfig, StopConfig, UsersLoad
from tokenbench.results.manifest import (
    ManifestError,
    PointEnd,
    PointStart,
    RunManifest,
    ServerFacts,
    earlier_spans,
    load_manifest,
)
from tokenbench.telemetry.sampler import SamplesFile

FIXTURE_RUNS = Path(__file__).parents[1] / "fixtures" / "rundirs"
RUNS = ["0.2.1-sessions", "0.2.1-workers"]


@pytest.mark.parametrize("name", RUNS)
def test_a_0_2_config_json_reads_and_writes_back_key_for_key(name):
    written = json.loads((FIXTURE_RUNS / name / "config.json").read_text())
    manifest = load_manifest(FIXTURE_RUNS / name / "config.json")
    data = manifest.to_json()
    assert settings_added(data) == SETTINGS_ADDED_SINCE_FIXTURES  # their defaults
    data = without_settings_added(data)
    assert data == written
    assert list(data) == list(written)  # the same order of keys too
    assert RunManifest.from_json(manifest.to_json()) == manifest


def test_the_manifests_parts_are_typed():
    sessions = load_manifest(FIXTURE_RUNS / "0.2.1-sessions" / "config.json")
    assert sessions.config.sessions is not None and sessions.config.sessions.turns == 3
    assert sessions.backend == ServerFacts(backend="vllm", engine="vLLM")
    assert sessions.resolved_target.api == "completions" and sessions.resolved_target.continuous_usage is True
    assert sessions.config.cost is not None and sessions.config.cost.usd_per_gpu_hour == 2.0
    assert sessions.dataset_info is not None and sessions.dataset_info.sessions is not None
    assert sessions.workers_facts is None and sessions.tool.version == "0.2.1"
    workers = load_manifest(FIXTURE_RUNS / "0.2.1-workers" / "config.json")
    assert workers.backend is not None and workers.backend.backend is None  # "attached" in the file
    assert workers.workers_facts is not None and [c.worker for c in workers.workers_facts.clocks] == [0, 1]
    assert workers.config.deadlines == DeadlinesConfig(ttft_s=0.2, tbt_s=0.1) and workers.config.window_s == 1.0


def test_attached_is_the_jsons_word_for_a_server_tokenbench_knows_nothing_of():
    facts = ServerFacts.attached(None, None)
    assert facts.backend is None and facts.to_json() == {"backend": "attached", "engine": None}
    assert ServerFacts.from_json({"backend": "attached", "engine": None}) == facts
    assert ServerFacts.attached("vllm", "vLLM").to_json() == {"backend": "vllm", "engine": "vLLM"}
    layered = ServerFacts(backend="lay", knobs=None, upstream=ServerFacts(backend="eng", url="http://h:1"))
    assert layered.to_json() == {"backend": "lay", "knobs": None, "upstream": {"backend": "eng", "url": "http://h:1"}}


def test_the_settings_backend_is_kept_beside_the_servers_facts():
    """config.json's ``backend`` has always been the server's facts; the settings' own backend
    (what to launch, or the profile of an attached server) is added as ``backend_config``."""
    config = RunConfig(loads=[UsersLoad(users=1)], stop=StopConfig(duration_s=1), backend=BackendConfig(name="vllm"))
    manifest = RunManifest(config=config, backend=ServerFacts.attached("vllm", "vLLM"))
    data = manifest.to_json()
    assert data["backend"] == {"backend": "vllm", "engine": "vLLM"} and data["backend_config"]["name"] == "vllm"
    assert RunManifest.from_json(data) == manifest
    plain = RunManifest(config=config.model_copy(update={"backend": None})).to_json()
    assert "backend_config" not in plain and "backend" not in plain  # no server facts given: no key


def test_an_older_config_json_takes_the_defaults_declared_once(tmp_path):
    """A config.json of 0.1 (no tool, clock, telemetry, deadlines, window_s, dataset facts; an
    attached server as ``{"backend": "attached"}``; a target without continuous_usage)."""
    path = tmp_path / "config.json"
    old = {
        "target": {"url": "http://h:1", "model": None},
        "loads": [{"kind": "users", "users": 2, "ramp_up_s": 0.0, "think_time_s": 0.0}],
        "stop": {"duration_s": 5.0, "max_requests": None, "warmup_s": 0.0, "drain_timeout_s": 60.0},
        "slo": {"ttft_s": None, "tpot_s": None, "e2e_s": None},
        "resolved_target": {"url": "http://h:1", "model": "m", "api": "chat"},
        "backend": {"backend": "attached"},
    }
    path.write_text(json.dumps(old))
    manifest = load_manifest(path)
    assert manifest.config.window_s == 5.0 and manifest.config.deadlines == DeadlinesConfig()
    assert manifest.tool.version is None and manifest.clock is None and manifest.telemetry is None
    assert manifest.backend is not None and manifest.backend.to_json() == {"backend": "attached"}
    assert manifest.resolved_target.continuous_usage is None
    assert "continuous_usage" not in manifest.to_json()["resolved_target"]  # not written if not read


def test_what_is_not_a_runs_config_is_a_clear_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(ManifestError, match="not readable as JSON"):
        load_manifest(path)
    path.write_text(json.dumps({"name": "a model's config"}))
    with pytest.raises(ManifestError, match="is not a tokenbench run's config"):
        load_manifest(path)
    path.write_text(json.dumps({"loads": [{"kind": "users", "users": 1}], "stop": {"duration_s": 1}, "colour": 1}))
    with pytest.raises(ManifestError, match=r"before 0\.2.*colour"):
        load_manifest(path)
    path.write_text(
        json.dumps({"loads": [], "stop": {"duration_s": 1}, "tool": {"name": "tokenbench", "version": "9"}})
    )
    with pytest.raises(ManifestError, match="tokenbench 9.*loads"):
        load_manifest(path)


@pytest.mark.parametrize("name", RUNS)
def test_a_runs_point_events_read_and_write_back_as_written(name):
    samples = SamplesFile(FIXTURE_RUNS / name / "samples.jsonl")
    starts, ends = samples.point_starts(), samples.point_ends()
    assert [e.index for e in starts] == [e.index for e in ends] == [0, 1]
    assert [e.to_json() for e in starts] == samples.events("point_start")
    assert [e.to_json() for e in ends] == samples.events("point")
    assert all(e.num_records and e.prefix_cache_reset is not None for e in ends)
    assert (ends[0].sessions is not None) is (name == "0.2.1-sessions") and ends[0].workers_lost is None


def test_an_unfinished_point_keeps_what_its_start_said():
    start = PointStart.from_json(
        {
            "kind": "point_start",
            "index": 2,
            "load": {"kind": "rate", "rate_per_s": 4.0},
            "start_s": 1,
            "ramp_end_s": 1,
            "window_start_s": 1.5,
            "prefix_cache_reset": {"status": "failed", "detail": "HTTP 404"},
        }
    )
    end = PointEnd.unfinished(start, load_end_s=3, end_s=4.5)
    assert end.to_json() == {
        "kind": "point",
        "index": 2,
        "load": {"kind": "rate", "rate_per_s": 4.0, "arrival": "poisson", "burstiness": 1.0, "max_concurrency": None},
        "start_s": 1,  # an int stays an int
        "ramp_end_s": 1,
        "window_start_s": 1.5,
        "prefix_cache_reset": {"status": "failed", "detail": "HTTP 404"},
        "load_end_s": 3,
        "end_s": 4.5,
        "user_spans": [],
        "interrupted": True,
    }


def test_a_run_from_before_0_2_has_its_spans_in_its_old_results_json(tmp_path):
    old = {
        "clock": {"origin_monotonic_s": 1.0, "origin_unix_s": 2.0, "unit": "s"},
        "points": [
            {
                "index": 0,
                "label": "2 users",
                "load": {"kind": "users", "users": 2, "warmup_s": 1.0, "duration_s": 3.0, "max_requests": None},
                "span": {"start_s": 0.5, "ramp_end_s": 1.5, "load_end_s": 4.5, "end_s": 5.0},
                "interrupted": False,
                "ttft_s": {"count": 3},
            },
            {
                "index": 1,
                "load": {"kind": "users", "users": 4, "warmup_s": 1.0, "duration_s": 3.0, "max_requests": None},
                "span": {"start_s": 6, "ramp_end_s": 6, "load_end_s": 9, "end_s": 9.5},
                "window": {"start_s": 7.25, "end_s": 9},
            },
        ],
    }
    (tmp_path / "results.json").write_text(json.dumps(old))
    earlier = earlier_spans(tmp_path / "results.json", warmup_s=1.0)
    assert earlier.telemetry is None and earlier.clock is not None and earlier.clock.origin_unix_s == 2.0
    first, second = earlier.spans[0], earlier.spans[1]
    assert first.load == UsersLoad(users=2) and first.window_start_s == 2.5  # ramp end + warm-up
    assert (first.start_s, first.load_end_s, first.end_s, first.user_spans) == (0.5, 4.5, 5.0, [])
    assert second.window_start_s == 7.25 and second.interrupted is False
    (tmp_path / "results.json").write_text(json.dumps({"points": [{"index": 0}]}))
    with pytest.raises(ManifestError, match="no point spans"):
        earlier_spans(tmp_path / "results.json", warmup_s=0.0)
