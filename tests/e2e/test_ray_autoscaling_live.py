"""End to end: Ray Serve autoscaling on CPU. `--backend ray --upstream llamacpp --layer-arg
autoscaling=min:1,max:2,...` launches the embedded llama.cpp server and the Serve relay in front
of it, autoscaled on its ongoing requests; one staged point of 1 user, then 8, then 1 (low ->
high -> low: a load step at the second stage's start) scales it 1 -> 2. The run polls the relay
driver's Serve instance details: the timeline ends with 2 RUNNING replicas, the scale-up is timed
from the high stage's start with positive lags, each stage has its SLO attainment, the report
shows both, and the replicas named by the replies' x-served-by are the two Serve lists."""

from __future__ import annotations

import io
import json
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from rich.console import Console

from tokenbench.backends.server import server_under_test
from tokenbench.config import BackendConfig, DatasetConfig, RunConfig, StagedLoad, StopConfig, TargetConfig
from tokenbench.config.slo import SLOConfig
from tokenbench.config.stages import Stage
from tokenbench.run import run

pytestmark = pytest.mark.e2e

PROBES = 6  # requests sent at once after the run, each naming its replica
# requests a replica takes at once: more wait at Serve's router for a free one, so once the second
# replica runs, both serve (left at 1e9, the router chose by queue-length probes, which on a loaded
# 2-core box timed out for one replica: seen live, every probe served by the first)
PER_REPLICA = 4

LOW_S, HIGH_S = 6.0, 10.0
STAGES = (Stage(duration_s=LOW_S, users=1), Stage(duration_s=HIGH_S, users=8), Stage(duration_s=LOW_S, users=1))
# a target of 2 ongoing a replica: one user's back-to-back requests (the last one's end overlapping
# the next one's start) averaged over 1 at a target of 1 and scaled up in the low stage (seen live)
AUTOSCALING = (
    "autoscaling=min:1,max:2,target_ongoing:2,upscale_delay:0,downscale_delay:60,metrics_interval:0.5,look_back:1"
)


@pytest.fixture(scope="module")
def scaled(tmp_path_factory, embedded_gguf, ray_extra):
    base = tmp_path_factory.mktemp("ray-autoscaling")
    backend = BackendConfig(
        name="ray",
        upstream="llamacpp",
        layer_args=(AUTOSCALING, f"max_ongoing_requests={PER_REPLICA}"),
        metrics_interval_s=0.5,
    )
    config = RunConfig(
        target=TargetConfig(api="chat"),
        loads=[StagedLoad(stages=STAGES, start_level=1)],
        stop=StopConfig(duration_s=sum(s.duration_s for s in STAGES), drain_timeout_s=30),
        slo=SLOConfig(ttft_s=5.0),
        dataset=DatasetConfig(input_tokens=16, output_tokens=8, num_prompts=20),
        live=False,
        out_dir=base / "run",
        backend=backend,
    )
    with server_under_test(backend, None, base / "server.log") as sut:
        assert sut.scaler is not None  # the launch answers its replicas
        outcome = run(config, Console(file=io.StringIO()), server=sut)
        with ThreadPoolExecutor(PROBES) as pool:  # at once, while both replicas run (downscale waits 60 s)
            served_by = list(pool.map(lambda _: _served_by(sut.url, sut.model), range(PROBES)))
        with urllib.request.urlopen(sut.scaler.url, timeout=30) as resp:
            details = json.loads(resp.read())
    return outcome, served_by, details


def _served_by(url: str, model: str | None) -> str | None:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=60) as resp:
        resp.read()
        return resp.headers.get("x-served-by")


def test_the_timeline_shows_two_running_replicas_after_the_step(scaled):
    outcome, _, _ = scaled
    (point,) = outcome.results["points"]
    timeline = point["scaling"]["timeline"]
    assert timeline[0]["running"] == 1 and timeline[-1]["running"] == 2 and timeline[-1]["desired"] == 2
    (up,) = point["scaling"]["scale_ups"]
    assert up["step_s"] == pytest.approx(point["span"]["start_s"] + LOW_S)  # the high stage's start
    assert 0 < up["lag_seen_s"] <= up["lag_running_s"]
    assert point["scaling"]["replica_seconds"] > point["span"]["end_s"] - point["span"]["start_s"]  # > 1 replica


def test_each_stage_has_its_slo_attainment_and_the_report_shows_them(scaled, tmp_path):
    from tokenbench.report import write_report

    outcome, _, _ = scaled
    (point,) = outcome.results["points"]
    stages = point["stages"]
    assert [s["target_users"] for s in stages] == [1, 8, 1]
    assert all(s["good_fraction"] is not None and s["ok"] > 0 for s in stages), stages
    md = write_report([outcome.run_dir], tmp_path / "report").markdown.read_text()
    assert "## Autoscaling: replicas over time" in md and "Scale-up lags" in md and "## Stages" in md


def test_replies_name_their_serve_replica(scaled):
    outcome, served_by, details = scaled
    (app,) = details["applications"].values()
    ids = {r["replica_id"] for d in app["deployments"].values() for r in d["replicas"]}
    # x-served-by is the replica's id in Serve's details; 6 at once, 4 a replica at most: both served
    assert len(ids) == 2 and set(served_by) == ids, served_by


def test_records_name_both_replicas(scaled):
    outcome, _, details = scaled
    (app,) = details["applications"].values()
    ids = {r["replica_id"] for d in app["deployments"].values() for r in d["replicas"]}
    records = [json.loads(line) for line in (outcome.run_dir / "records.jsonl").read_text().splitlines()]
    named = {r.get("replica") for r in records} - {None}
    assert named == ids
