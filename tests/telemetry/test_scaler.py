"""telemetry/scaler.py: the readers on recorded answers (Ray Serve's, captured live; Kubernetes',
built from the API reference: tests/fixtures/scaler/provenance.json), and the sampler's poll of a
scaler (the mock's scripted one) as samples.jsonl lines on the run's clock."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from tokenbench.results.scaling import ReplicaPoll
from tokenbench.telemetry.sampler import Sampler
from tokenbench.telemetry.scaler import (
    ScalerAnswerError,
    ScalerTarget,
    kubernetes_replicas,
    pod_condition_times,
    poll_line,
    ray_serve_replicas,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "scaler"


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_ray_serve_details_give_each_replica_its_state_and_the_target():
    starting = ray_serve_replicas(_fixture("ray_serve_starting.json"))
    assert [(r.id, r.state) for r in starting.replicas] == [("4s5pt71v", "RUNNING"), ("66ti6i82", "STARTING")]
    assert starting.desired == 2
    stopping = ray_serve_replicas(_fixture("ray_serve_stopping.json"))
    assert [(r.id, r.state) for r in stopping.replicas] == [("66ti6i82", "STOPPING"), ("4s5pt71v", "RUNNING")]
    assert stopping.desired == 1
    assert ray_serve_replicas(_fixture("ray_serve_starting.json"), deployment="Other").replicas == []


def test_ray_serve_states_outside_ours_and_bad_answers():
    details = {"applications": {"a": {"deployments": {"d": {"replicas": [{"replica_id": "x", "state": "STOPPED"}]}}}}}
    assert ray_serve_replicas(details).replicas == []  # stopped: gone
    details["applications"]["a"]["deployments"]["d"]["replicas"][0]["state"] = "PENDING_MIGRATION"
    assert [r.state for r in ray_serve_replicas(details).replicas] == ["RUNNING"]
    details["applications"]["a"]["deployments"]["d"]["replicas"][0]["state"] = "HAPPY"
    with pytest.raises(ScalerAnswerError, match="HAPPY"):
        ray_serve_replicas(details)
    with pytest.raises(ScalerAnswerError, match="applications"):
        ray_serve_replicas({"status": "ok"})


def test_kubernetes_pods_map_onto_replica_states_and_the_hpa_says_the_desired_count():
    pods, deployment, hpa = (_fixture(f"kubernetes_{n}.json") for n in ("pods", "deployment", "hpa"))
    view = kubernetes_replicas(pods, deployment, hpa)
    assert [(r.id, r.state) for r in view.replicas] == [
        ("vllm-7d9f8c6b5-abcde", "RUNNING"),  # Ready True
        ("vllm-7d9f8c6b5-fghij", "STARTING"),  # scheduled, containers loading (Ready False)
        ("vllm-7d9f8c6b5-klmno", "STARTING"),  # Pending: not scheduled yet
        ("vllm-7d9f8c6b5-pqrst", "STOPPING"),  # deletionTimestamp set, phase still Running
    ]  # the Succeeded pod is gone
    assert view.desired == 3  # the HPA's desiredReplicas
    assert kubernetes_replicas(pods, deployment).desired == 3  # the Deployment's spec.replicas
    assert kubernetes_replicas(pods).desired is None
    assert kubernetes_replicas({**pods, "kind": "PodList"}).replicas == view.replicas  # the API's own kind
    assert pod_condition_times(pods["items"][1]) == {
        "PodReadyToStartContainers": "2026-12-02T15:04:09Z",
        "Initialized": "2026-12-02T15:04:09Z",
        "PodScheduled": "2026-12-02T15:04:08Z",
    }
    with pytest.raises(ScalerAnswerError, match="PodList"):
        kubernetes_replicas(deployment)


def test_a_poll_of_the_mock_is_a_replicas_line_and_a_dead_scaler_a_failed_one(mock_server):
    url = mock_server(max_streams=1, replicas_script="0:2")
    origin = time.perf_counter()
    line = ReplicaPoll.model_validate(poll_line(url + "/mock/replicas", "ray-serve", origin, 2.0))
    assert line.ok and [(r.id, r.state) for r in line.replicas or []] == [
        ("replica-1", "RUNNING"),
        ("replica-2", "RUNNING"),
    ]
    assert line.desired == 2 and line.source == f"ray-serve {url}/mock/replicas" and 0 <= line.t_s < 1
    dead = ReplicaPoll.model_validate(poll_line("http://127.0.0.1:9/", "ray-serve", origin, 0.5))
    assert not dead.ok and dead.replicas is None and "URLError" in (dead.error or "")


async def test_the_sampler_polls_the_scaler_after_each_scrape(tmp_path, mock_server):
    url = mock_server(max_streams=1, replicas_script="0:1")
    out = tmp_path / "samples.jsonl"
    scaler = ScalerTarget(url + "/mock/replicas", "ray-serve")
    with Sampler(out, time.perf_counter(), None, None, 0.2, scaler=scaler) as s:
        deadline = time.perf_counter() + 20  # the child's start is slow on a loaded machine
        while len(s.file.replica_polls()) < 3 and time.perf_counter() < deadline:
            await asyncio.sleep(0.1)
    polls = s.file.replica_polls()
    assert len(polls) >= 3 and all(p.ok for p in polls)
    assert [t.t_s for t in polls] == sorted(t.t_s for t in polls)
    assert s.file.header()["scaler"] == {"kind": "ray-serve", "url": url + "/mock/replicas"}
