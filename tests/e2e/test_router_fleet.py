"""A fleet live: two embedded llama.cpp replicas behind vllm-router (round robin), 8 requests from 2
users with 8 output tokens each (ignore_eos). Known answers: the router's per-replica counter
(routed_requests@HOST:PORT) over the point sums to the run's requests (attempts: the router's
retries, on here, count twice), round robin gives each replica about half, and the replicas' own
llamacpp:tokens_predicted_total grew by 8 tokens a request in all, none more than its routed count. A fleet launched by `tokenbench run --replicas 2` writes
every replica's facts and log, and leaves no process behind (checked by PID)."""

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from fleet_helpers import FLEET_REPLICAS, fleet_flags

from tokenbench.telemetry.prom import ROUTED_PREFIX, first_present, parse

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
REQUESTS, OUTPUT_TOKENS = 8, 8
LOAD = ["--users", "2", "--input-tokens", "16", "--output-tokens", str(OUTPUT_TOKENS), "--ignore-eos"]


def _tokenbench(*args: str) -> list[str]:
    return [sys.executable, "-m", "tokenbench", *args]


def _predicted_tokens(metrics_url: str) -> float:
    with urllib.request.urlopen(metrics_url, timeout=10) as resp:
        value = first_present(parse(resp.read().decode()), ("llamacpp:tokens_predicted_total",))
    assert value is not None, metrics_url
    return value


def _routed_over_the_point(run_dir: Path) -> dict[str, float]:
    """Each replica's routed requests over the run's one point: the last scrape at or before its
    start to the last scrape (the sampler's final one, after the load ended)."""
    lines = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    start_s = next(x["start_s"] for x in lines if x.get("kind") == "point_start")
    scrapes = [x for x in lines if x.get("kind") == "scrape" and x["ok"]]
    before = [x for x in scrapes if x["t_s"] <= start_s][-1]["values"]
    after = scrapes[-1]["values"]
    return {k.removeprefix(ROUTED_PREFIX): after[k] - before.get(k, 0.0) for k in after if k.startswith(ROUTED_PREFIX)}


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]


def test_round_robin_sends_each_replica_half_and_its_tokens_match(shared_llamacpp_fleet, tmp_path):
    fleet = shared_llamacpp_fleet
    assert len(fleet.replicas) == FLEET_REPLICAS
    tokens_before = {r.name: _predicted_tokens(r.metrics_url) for r in fleet.replicas}
    out = tmp_path / "run"
    proc = subprocess.run(
        _tokenbench("run", *fleet_flags(fleet), *LOAD, "--max-requests", str(REQUESTS), "--out", str(out)),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    records = _records(out)
    assert len(records) == REQUESTS and all(r["outcome"] == "ok" for r in records)
    assert {r["output_tokens"] for r in records} == {OUTPUT_TOKENS}
    routed = _routed_over_the_point(out)
    assert sorted(routed) == sorted(r.name for r in fleet.replicas)  # named as the replicas are
    # the router counts attempts: with its retries on (fleet_helpers), a request it re-sent after
    # a dead pooled connection counts twice (seen: 5 + 4 for 8 requests)
    assert REQUESTS <= sum(routed.values()) <= REQUESTS + 2 and min(routed.values()) >= REQUESTS / FLEET_REPLICAS - 1
    grew = {r.name: _predicted_tokens(r.metrics_url) - tokens_before[r.name] for r in fleet.replicas}
    assert sum(grew.values()) == OUTPUT_TOKENS * REQUESTS  # every request decoded once, by one replica
    for name, tokens in grew.items():  # each replica decoded at most what the router sent it
        assert tokens <= OUTPUT_TOKENS * routed[name], name
    # results.json says the same per replica over the point's window: the router's count, and the
    # replica's own counters (scraped beside the router) within the requests in flight at its edges
    point = json.loads((out / "results.json").read_text())["points"][0]
    figures = {r["replica"]: r for r in point["fleet"]["replicas"]}
    assert sorted(figures) == sorted(routed)
    window = point["requests_in_window"]["ok"]
    assert window <= sum(f["routed_requests"] for f in figures.values()) <= window + 2 + 2  # retries, 2 users
    for name, f in figures.items():
        assert f["server"]["bracketed"], name
        assert f["server"]["generated_tokens"] <= OUTPUT_TOKENS * f["routed_requests"], name
        assert f["requests"] is None  # neither router names the serving replica in a header
    fleet_figures = point["fleet"]
    assert fleet_figures["imbalance_over"] == "routed_requests" and fleet_figures["imbalance_max_over_mean"] <= 1.25
    assert fleet_figures["attributed"] == 0 and fleet_figures["unattributed"] == window


def _children(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:  # the field after the state: the parent's PID
            found.add(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_launched_fleet_records_its_replicas_and_leaves_no_process(embedded_gguf, router_venv, tmp_path):
    out = tmp_path / "launched"
    argv = _tokenbench(
        *("run", "--backend", "vllm-router", "--replicas", str(FLEET_REPLICAS), "--model", str(embedded_gguf)),
        *("--layer-arg", "policy=round_robin", *LOAD, "--max-requests", "4", "--out", str(out)),
    )
    log = tmp_path / "stderr.txt"
    seen: set[int] = set()
    with log.open("w") as stderr, subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr) as proc:
        while proc.poll() is None:  # every process the run started, by PID, while it runs
            seen |= _children(proc.pid)
            time.sleep(0.2)
    assert proc.returncode == 0, log.read_text()[-4000:]
    assert len(seen) >= FLEET_REPLICAS + 1  # the replicas and the router at least
    assert [pid for pid in seen if _alive(pid)] == []
    target = json.loads((out / "results.json").read_text())["target"]
    assert target["backend"] == "vllm-router" and len(target["replicas"]) == FLEET_REPLICAS
    urls = [r["url"] for r in target["replicas"]]
    assert (
        len(set(urls)) == FLEET_REPLICAS
        and target["command"][target["command"].index("--worker-urls") + 1 :][:FLEET_REPLICAS] == urls
    )
    cpus = os.cpu_count() or 2
    for k, replica in enumerate(target["replicas"]):
        assert replica["backend"] == "xllamacpp" and replica["cold_start_s"] > 0
        assert replica["command"][replica["command"].index("--threads") + 1] == str(max(1, (cpus - 1) // 2))
        assert replica["log"] == str(out / f"server-replica-{k}.log") and Path(replica["log"]).stat().st_size > 0
    routed = _routed_over_the_point(out)
    assert sorted(routed) == sorted(u.split("://")[1] for u in urls) and sum(routed.values()) == 4
