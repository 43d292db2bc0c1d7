"""Load from several workers against the mock, end to end: ``--workers 2`` (local processes) and
``--ray --workers 2`` (a local Ray instance). One records.jsonl with every request exactly once,
each with its worker; sessions stay on one worker; the clocks of workers on this machine are found
in step with the driver's (the true offset here is 0: one monotonic clock)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict

import pytest
from safety_helpers import _deliveries

pytestmark = pytest.mark.e2e


def _run(out, *flags: str) -> tuple[dict, list[dict]]:
    cmd = [sys.executable, "-m", "tokenbench", "run", "--out", str(out), "--no-live", *flags]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr
    results = json.loads((out / "results.json").read_text())
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    return results, records


def _clocks_in_step(results: dict, mode: str) -> None:
    workers = results["workers"]
    assert workers["mode"] == mode and workers["count"] == 2
    for clock in workers["clocks"]:
        assert clock["lost"] is None
        for key in ("", "end_"):
            assert clock[f"{key}uncertainty_s"] < 0.05
            assert abs(clock[f"{key}offset_s"]) <= clock[f"{key}uncertainty_s"] + 1e-4


def test_two_worker_processes_send_one_schedule_and_keep_every_record_once(start_mock, tmp_path):
    url = start_mock(ttft_ms=50, itl_ms=10)
    flags = ["--url", url, "--rate", "40", "--arrival", "constant", "--duration", "3", "--output-tokens", "20"]
    results, records = _run(tmp_path / "rate", *flags, "--workers", "2")
    _clocks_in_step(results, "process")
    point = results["points"][0]
    assert len(records) == point["requests"]["total"] == 120  # 40/s for 3 s, constant: exactly
    assert len({r["id"] for r in records}) == len(records) == len(_deliveries(url))
    assert {r["worker"] for r in records} == {0, 1}
    assert sum(r["worker"] == 0 for r in records) == 60
    assert all(r["outcome"] == "ok" for r in records)
    # the arrivals are the global constant schedule: every 25 ms from the point's start
    start = min(r["scheduled_s"] for r in records)
    gaps = sorted(round((r["scheduled_s"] - start) / 0.025, 6) for r in records)
    assert gaps == [float(i) for i in range(120)]
    assert 0.049 < point["ttft_s"]["p50"] < 0.065  # the mock's 50 ms, as one process measures it
    assert point["client"]["workers"] == 2


def test_sessions_stay_on_one_worker(start_mock, tmp_path):
    url = start_mock(ttft_ms=20, itl_ms=5)
    flags = ["--url", url, "--users", "4", "--duration", "3", "--multi-turn", "--turns", "3", "--output-tokens", "8"]
    results, records = _run(tmp_path / "sessions", *flags, "--workers", "2")
    by_session: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_session[r["session_id"]].append(r)
    assert len(by_session) >= 4
    for turns in by_session.values():
        assert len({r["worker"] for r in turns}) == 1  # sticky
        assert sorted(r["turn_index"] for r in turns) == list(range(len(turns)))
    assert {r["worker"] for r in records} == {0, 1}
    assert results["points"][0]["sessions"]["started"] >= 4


def test_two_ray_actors_on_a_local_ray(ray_extra, start_mock, tmp_path):
    url = start_mock(ttft_ms=50, itl_ms=10)
    flags = ["--url", url, "--users", "4", "--duration", "3", "--output-tokens", "20"]
    results, records = _run(tmp_path / "ray", *flags, "--ray", "--workers", "2", "--ray-cpus-per-worker", "0.5")
    _clocks_in_step(results, "ray")
    assert results["workers"]["cpus_per_worker"] == 0.5
    point = results["points"][0]
    assert len(records) == point["requests"]["total"] > 20
    assert len({r["id"] for r in records}) == len(records) == len(_deliveries(url))
    assert {r["worker"] for r in records} == {0, 1}
    assert {r["user"] for r in records} == set(range(4))
    assert all(r["outcome"] == "ok" for r in records)
    assert 0.049 < point["ttft_s"]["p50"] < 0.065
