"""Mock replicas behind the real vllm-router (round robin), known answers from their scripts.

A fleet of a 20 ms and an 80 ms TTFT replica, each naming itself in its response header (the
mock's --served-by, as a proxy's $upstream_addr would): each record names the replica the script
says served it (its TTFT tells), each replica's TTFT is its own script's, the router's count of
requests it sent each replica equals the records naming it, and round robin splits them evenly.

Then the what-if model meets the fleet: fitted on one replica's runs (two rates), it predicts a
fleet of two such replicas behind the router's round robin (`model validate` on the fleet run),
each figure's error stated, within the model's stated error for its mean figures."""

from __future__ import annotations

import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest
from run_helpers import config, mock_command, mock_process, quiet, records_of

from tokenbench.backends.base import LaunchSpec
from tokenbench.backends.routers import VLLM_PROFILE, metrics_url
from tokenbench.common.procs import free_port, stop, wait_http
from tokenbench.config import BackendConfig, EngineKnobs, RateLoad, StopConfig, UsersLoad
from tokenbench.model.fit import fit
from tokenbench.model.validate import FIGURES, validate
from tokenbench.run import run

pytestmark = pytest.mark.e2e

FAST_S, SLOW_S = 0.020, 0.080
REQUESTS = 16
STATED_ERROR = 0.15  # the model's aim for mean figures below saturation (tests/model/test_model_predict.py)


def _mock(stack: ExitStack, **knobs) -> str:
    port = free_port()
    name = f"127.0.0.1:{port}"
    proc = subprocess.Popen(
        mock_command(port, served_by=name, **knobs), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    stack.callback(stop, proc, 10)
    wait_http(f"http://{name}/health", 20.0, proc)
    return f"http://{name}"


def _router(stack: ExitStack, replicas: list[str], log: Path) -> tuple[str, str]:
    """vllm-router in front of ``replicas`` (round robin), as its profile renders it: its URL and
    its Prometheus URL."""
    spec = LaunchSpec(
        model="mock",
        served_name="mock",
        host="127.0.0.1",
        port=free_port(),
        knobs=EngineKnobs(engine_args=("policy=round_robin",)),
        upstream_url=replicas[0],
        upstream_model="mock",
        upstream_urls=tuple(replicas),
    )
    launch = VLLM_PROFILE.local(spec)
    out = log.open("wb")
    stack.callback(out.close)
    proc = subprocess.Popen(list(launch.argv), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    stack.callback(stop, proc, 10)
    url = f"http://127.0.0.1:{spec.port}"
    wait_http(url + VLLM_PROFILE.ready_path, 60.0, proc)
    return url, metrics_url(spec)


def _fleet_backend(prometheus: str, replicas: list[str]) -> BackendConfig:
    return BackendConfig(
        name="vllm-router",
        upstream="vllm",  # the mock speaks vLLM's metric names
        metrics_url=prometheus,
        replica_urls=tuple(replicas),
        layer_args=("policy=round_robin",),
        metrics_interval_s=0.2,
    )


@pytest.fixture(scope="module")
def mixed_fleet(router_venv, tmp_path_factory):
    base = tmp_path_factory.mktemp("mock-fleet")
    with ExitStack() as stack:
        replicas = [_mock(stack, ttft_ms=FAST_S * 1e3, itl_ms=5), _mock(stack, ttft_ms=SLOW_S * 1e3, itl_ms=5)]
        url, prometheus = _router(stack, replicas, base / "router.log")
        cfg = config(
            url,
            base,
            [UsersLoad(users=4)],
            StopConfig(max_requests=REQUESTS, drain_timeout_s=10),
            output_tokens=6,
            backend=_fleet_backend(prometheus, replicas),
        )
        result = run(cfg, quiet())
    names = [r.split("://", 1)[1] for r in replicas]
    return result, names


def test_each_record_names_the_replica_its_ttft_says(mixed_fleet):
    result, (fast, slow) = mixed_fleet
    records = records_of(result.run_dir)
    assert len(records) == REQUESTS and all(r["outcome"] == "ok" for r in records)
    assert {r["replica"] for r in records} == {fast, slow} and {r["replica_from"] for r in records} == {"header"}
    for r in records:
        ttft = r["chunk_times_s"][0] - r["sent_s"]
        script = FAST_S if r["replica"] == fast else SLOW_S
        assert script <= ttft < script + 0.045, (r["replica"], ttft)  # a timer never fires early


def test_per_replica_ttft_and_counts_match_the_script_and_the_router(mixed_fleet):
    result, (fast, slow) = mixed_fleet
    point = result.results["points"][0]
    fleet = point["fleet"]
    rows = {r["replica"]: r for r in fleet["replicas"]}
    assert sorted(rows) == sorted([fast, slow])
    for name, script in ((fast, FAST_S), (slow, SLOW_S)):
        ttft = rows[name]["requests"]["ttft_s"]
        assert script <= ttft["p50"] < script + 0.030, (name, ttft)
        # the router's count of requests it sent there over the window: the records naming it
        assert rows[name]["routed_requests"] == rows[name]["requests"]["requests"], name
        # its own count of replies finished over the window: those routed, less the ones still in
        # flight when the window's last scrape came (4 users at most)
        finished = rows[name]["server"]["requests_finished"]
        assert rows[name]["routed_requests"] - 4 <= finished <= rows[name]["routed_requests"], name
    assert fleet["attributed"] == point["requests_in_window"]["ok"] and fleet["attributed_from"] == "header"
    counts = [rows[n]["requests"]["requests"] for n in (fast, slow)]
    assert abs(counts[0] - counts[1]) <= 1  # round robin
    assert fleet["imbalance_over"] == "requests" and fleet["imbalance_max_over_mean"] == pytest.approx(
        max(counts) / (sum(counts) / 2)
    )


def test_the_model_of_one_replica_predicts_the_fleet_of_two(router_venv, tmp_path):
    knobs = dict(ttft_ms=FAST_S * 1e3, itl_ms=5, max_streams=2)
    fit_runs = []
    with mock_process(**knobs) as url:  # one replica alone, at two rates
        for rate in (10, 30):
            cfg = config(
                url, tmp_path / f"r{rate}", [RateLoad(rate_per_s=rate)], StopConfig(duration_s=3), output_tokens=6
            )
            fit_runs.append(run(cfg, quiet()).run_dir)
    model = fit(fit_runs)
    with ExitStack() as stack:  # two such replicas behind the router, at a rate one alone could not carry
        replicas = [_mock(stack, **knobs), _mock(stack, **knobs)]
        url, prometheus = _router(stack, replicas, tmp_path / "router.log")
        cfg = config(
            url,
            tmp_path / "fleet",
            [RateLoad(rate_per_s=40)],
            StopConfig(duration_s=3, drain_timeout_s=10),
            output_tokens=6,
            backend=_fleet_backend(prometheus, replicas),
        )
        fleet_run = run(cfg, quiet()).run_dir
    result = validate(model, "m.json", fleet_run, tmp_path / "predicted")
    predicted = (tmp_path / "predicted" / "results.json").read_text()
    assert '"replicas": 2' in predicted and '"routing": "round-robin"' in predicted
    (check,) = result.points
    errors = {key: check.error[key] for key, _ in FIGURES}
    print(f"model vs the measured 2-replica fleet, relative error by figure: {errors}")
    for key in ("ttft_mean_s", "tpot_mean_s", "output_tokens_per_s"):
        assert errors[key] is not None and abs(errors[key]) <= STATED_ERROR, (key, check.predicted, check.measured)
