"""Every fault becomes a record with its outcome; the run never crashes; records == requests sent."""

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from rich.console import Console

from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.procs import free_port
from tokenbench.runner import run


def run_against(url, tmp_path, requests=6, read_timeout_s=120.0, duration_s=None):
    cfg = RunConfig(
        target=TargetConfig(url=url, read_timeout_s=read_timeout_s),
        loads=[UsersLoad(users=2)],
        stop=StopConfig(max_requests=requests, duration_s=duration_s, drain_timeout_s=5),
        dataset=DatasetConfig(input_tokens=4, output_tokens=10, num_prompts=4),
        live=False,
        out_dir=tmp_path / "run",
    )
    result = run(cfg, Console(file=io.StringIO()))
    records = [json.loads(line) for line in (result.run_dir / "records.jsonl").read_text().splitlines()]
    point = result.results["points"][0]
    assert point["requests"]["total"] == len(records)
    return point, records


@pytest.mark.parametrize(
    "fault,outcome,status",
    [
        ("http_500", "http_error", 500),
        ("http_429", "http_error", 429),
        ("http_400", "http_error", 400),
        ("disconnect", "stream_error", 200),
        ("malformed", "stream_error", 200),
        ("error_event", "stream_error", 200),
        ("no_content", "no_output", 200),
        ("abort", "stream_error", 200),  # finish_reason "abort" then [DONE], as vLLM and SGLang end aborts
    ],
)
def test_fault_is_a_record_with_its_outcome(mock_server, tmp_path, fault, outcome, status):
    url = mock_server(ttft_ms=5, itl_ms=2, fault=fault, fault_every=2)
    point, records = run_against(url, tmp_path, requests=6)
    assert point["requests"]["total"] == 6
    assert point["requests"]["by_outcome"] == {"ok": 3, outcome: 3}
    bad = [r for r in records if r["outcome"] != "ok"]
    assert {r["status"] for r in bad} == {status}
    assert all(r["error"] for r in bad)
    if fault in ("disconnect", "malformed", "error_event", "abort"):
        # the chunks that did arrive before the fault are kept as facts
        assert all(len(r["chunk_times_s"]) == 3 for r in bad)
    assert point["ttft_s"]["count"] == 3  # latency distributions are over successful requests


def test_an_engine_abort_is_a_failure_and_a_clean_end_without_marker_is_flagged(mock_server, tmp_path):
    url = mock_server(ttft_ms=5, itl_ms=2, fault="abort", fault_every=2)
    point, records = run_against(url, tmp_path / "abort", requests=4)
    aborted = [r for r in records if r["outcome"] != "ok"]
    assert len(aborted) == 2 and {r["finish_reason"] for r in aborted} == {"abort"}
    assert all("abort" in r["error"] for r in aborted)
    assert point["e2e_s"]["count"] == 2  # the aborted short replies do not pull the E2E down
    assert {r["finish_reason"] for r in records if r["outcome"] == "ok"} == {"length"}
    url = mock_server(ttft_ms=5, itl_ms=2, fault="no_end", fault_every=2)
    point, records = run_against(url, tmp_path / "no_end", requests=4)
    assert point["requests"]["by_outcome"] == {"ok": 4}
    assert point["requests"]["ok_without_end_marker"] == 2
    assert sorted(r["end_marker"] for r in records) == [False, False, True, True]


def test_read_timeout_on_a_stalled_stream(mock_server, tmp_path):
    url = mock_server(ttft_ms=5, itl_ms=2, fault="stall", fault_every=1)
    point, records = run_against(url, tmp_path, requests=2, read_timeout_s=1.0)
    assert point["requests"]["by_outcome"] == {"timeout": 2}
    assert all("timed out" in r["error"] for r in records)


def test_server_dying_mid_run_gives_connect_or_stream_errors(start_mock, tmp_path):
    url = start_mock(ttft_ms=20, itl_ms=20)
    proc = start_mock.procs[-1]
    import threading

    threading.Timer(1.0, proc.kill).start()
    point, records = run_against(url, tmp_path, requests=None, duration_s=3.0)
    outcomes = point["requests"]["by_outcome"]
    assert outcomes.get("ok", 0) >= 2
    assert outcomes.get("connect_error", 0) + outcomes.get("stream_error", 0) >= 1
    assert set(outcomes) <= {"ok", "connect_error", "stream_error"}


def test_unreachable_target_fails_before_any_load(tmp_path):
    port = free_port()  # nothing listens there
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tokenbench",
            "run",
            "--url",
            f"http://127.0.0.1:{port}",
            "--users",
            "1",
            "--max-requests",
            "1",
            "--out",
            str(out),
            "--no-live",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3
    assert "cannot reach" in proc.stderr and "--url" in proc.stderr
    assert not (out / "records.jsonl").exists() or (out / "records.jsonl").read_text() == ""


def test_ctrl_c_stops_cleanly_and_keeps_everything(start_mock, tmp_path):
    url = start_mock(ttft_ms=50, itl_ms=50)
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tokenbench",
            "run",
            "--url",
            url,
            "--users",
            "3",
            "--duration",
            "60",
            "--output-tokens",
            "40",
            "--out",
            str(out),
            "--no-live",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 30
    records_file = out / "records.jsonl"
    while time.time() < deadline and not (records_file.exists() and records_file.stat().st_size):
        time.sleep(0.05)
    time.sleep(1.0)  # requests take ~2 s: the first ones are done, three are in flight
    os.kill(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    results = json.loads((out / "results.json").read_text())
    assert results["interrupted"] is True
    assert results["points"][0]["requests"]["total"] == len(records)
    outcomes = {r["outcome"] for r in records}
    assert "cancelled" in outcomes and "ok" in outcomes
    cancelled = [r for r in records if r["outcome"] == "cancelled"]
    assert len(cancelled) == 3 and all(r["chunk_times_s"] for r in cancelled)
