"""Workers that die and runs that are stopped: a killed worker's requests in flight become
worker_lost records and the run goes on with the others; Ctrl-C with workers exits 130 with a
record for every request the server received."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from safety_helpers import _deliveries, _descendants, _tokenbench, _wait_for, assert_all_gone

# Serial (run alone, never beside other tests): kills a worker a set time into its requests: a busy
# neighbour delayed the run past the kill.
pytestmark = pytest.mark.serial


def _workers_of(pid: int) -> dict[int, int]:
    """The run's worker processes: {worker index: pid}, in start order."""
    found = [p for p in _descendants(pid) if "tokenbench.workers.process" in " ".join(p.cmdline())]
    return {i: p.pid for i, p in enumerate(sorted(found, key=lambda p: p.create_time()))}


def _records(out) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def test_a_killed_worker_loses_its_requests_in_flight_and_the_run_goes_on(mock_server, tmp_path):
    url = mock_server(ttft_ms=100, itl_ms=50)
    out = tmp_path / "run"
    flags = ["--url", url, "--users", "6,4", "--output-tokens", "40", "--out", str(out), "--no-live", "--workers", "2"]
    proc = _tokenbench("run", *flags, "--duration", "4")  # two points: 6 users, then 4
    records_file = out / "records.jsonl"
    _wait_for(lambda: records_file.exists() and records_file.stat().st_size > 0, 60, "a first record")
    workers = _workers_of(proc.pid)
    assert len(workers) == 2, workers
    # which index is which pid: the worker's own log names nothing, results do once written;
    # kill the one whose records are on disk, mid-request (requests take ~2.1 s)
    time.sleep(0.3)
    victim_pid = workers[1]
    os.kill(victim_pid, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    results = json.loads((out / "results.json").read_text())
    clocks = {c["pid"]: c for c in results["workers"]["clocks"]}
    victim = clocks[victim_pid]["worker"]
    assert "SIGKILL" in clocks[victim_pid]["lost"]
    assert f"worker {victim}" in stderr and "worker_lost" in stderr and "SIGKILL" in stderr
    first, second = results["points"]
    loss = first["workers_lost"][0]
    assert loss["worker"] == victim and loss["in_flight"] == 3  # its 3 users' requests
    lost = [r for r in _records(out) if r["outcome"] == "worker_lost"]
    assert len(lost) == 3 and {r["worker"] for r in lost} == {victim}
    assert all("SIGKILL" in r["error"] for r in lost)
    # the run went on: the next point ran on the survivor, its whole schedule (all 4 users)
    assert "workers_lost" not in second
    assert second["requests"]["by_outcome"].get("ok", 0) > 0
    later = [r for r in _records(out) if r["point"] == 1]
    assert {r["worker"] for r in later} == {1 - victim} and {r["user"] for r in later} == set(range(4))
    assert first["requests"]["by_outcome"]["worker_lost"] == 3


def test_ctrl_c_with_workers_exits_130_with_a_record_for_every_request(mock_server, tmp_path):
    url = mock_server(ttft_ms=50, itl_ms=50)
    out = tmp_path / "run"
    flags = ["--url", url, "--users", "4", "--duration", "60", "--output-tokens", "40", "--out", str(out)]
    proc = _tokenbench("run", *flags, "--no-live", "--workers", "2", start_new_session=True)
    records_file = out / "records.jsonl"
    _wait_for(lambda: records_file.exists() and records_file.stat().st_size > 0, 60, "a first record")
    time.sleep(1.0)  # requests take ~2 s: some done, four in flight
    children = _descendants(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert_all_gone(children)
    records = _records(out)
    received = _deliveries(url)
    assert len(received) == sum(r["sent_s"] is not None for r in records)  # every request sent has its record
    assert len({r["id"] for r in records}) == len(records)
    assert {r["worker"] for r in records} == {0, 1}
    assert sum(r["outcome"] == "cancelled" for r in records) == 4
    results = json.loads((out / "results.json").read_text())
    assert results["interrupted"] is True
    assert results["points"][0]["requests"]["total"] == len(records)


def test_when_every_worker_is_lost_the_run_stops_with_a_message_naming_them(mock_server, tmp_path):
    url = mock_server(ttft_ms=100, itl_ms=50)
    out = tmp_path / "run"
    flags = ["--url", url, "--users", "4,4", "--output-tokens", "40", "--duration", "4", "--out", str(out)]
    proc = _tokenbench("run", *flags, "--no-live", "--workers", "2")
    records_file = out / "records.jsonl"
    _wait_for(lambda: records_file.exists() and records_file.stat().st_size > 0, 60, "a first record")
    workers = _workers_of(proc.pid)
    for pid in workers.values():
        os.kill(pid, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    assert "every worker was lost" in stderr and "worker 0" in stderr and "worker 1" in stderr
    results = json.loads((out / "results.json").read_text())
    assert len(results["points"]) == 1  # the run stopped after the point it lost them in
    assert {loss["worker"] for loss in results["points"][0]["workers_lost"]} == {0, 1}
    assert all(c["lost"] for c in results["workers"]["clocks"])
    lost = [r for r in _records(out) if r["outcome"] == "worker_lost"]
    assert len(lost) == 4  # the 4 users' requests in flight
