"""Experiments against the mock: cells, trials aggregated, a failed server recorded, resume."""

import json
import subprocess
import sys

import pytest
import yaml


def _write(tmp_path, url, **extra):
    spec = {
        "name": "mock-exp",
        "backends": [
            {"label": "mock", "url": url, "backend": "vllm"},
            # an engine that is there but never becomes ready (one not installed at all is refused
            # before any cell: experiments/prerequisites.py)
            {"label": "broken", "backend": "vllm", "model": "m", "engine_bin": "/bin/false"},
        ],
        "load": {"users": [1, 2]},
        "stop": {"duration_s": 1.5},
        "dataset": {"input_tokens": 16, "output_tokens": 8},
        "trials": 2,
        "api": "chat",
        **extra,
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _run(path, out):
    return subprocess.run(
        [sys.executable, "-m", "tokenbench", "experiment", "run", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.serial  # TTFT is checked to 15 ms of the mock's 30: CI's side-by-side tier read 50.8 ms
def test_experiment_runs_cells_aggregates_trials_and_records_a_failed_server(mock_server, tmp_path):
    url = mock_server(ttft_ms=30, itl_ms=5)
    out = tmp_path / "exp"
    proc = _run(_write(tmp_path, url), out)
    assert proc.returncode == 1, proc.stderr[-3000:]  # one server failed: not a clean exit
    state = json.loads((out / "experiment.json").read_text())
    cells = state["cells"]
    ok = [c for c in cells.values() if c["status"] == "ok"]
    failed = [c for c in cells.values() if c["status"] == "failed"]
    assert len(ok) == 2 and len(failed) == 2
    assert all("server did not start" in c["error"] and "did not become ready" in c["error"] for c in failed)
    assert {s["label"]: s["status"] for s in state["servers"]} == {"mock": "ok", "broken": "failed"}
    for c in ok:
        results = json.loads((out / c["run_dir"] / "results.json").read_text())
        assert [p["label"] for p in results["points"]] == ["1 users", "2 users"]
        assert results["points"][0]["server"]["ttft_s_mean"] is not None  # metric names from --backend vllm
    rows = state["aggregates"]
    assert [(r["server"], r["label"]) for r in rows] == [("mock", "1 users"), ("mock", "2 users")]
    tput = rows[1]["metrics"]["output_tokens_per_s"]
    assert tput["n"] == 2 and tput["ci95"] is not None and tput["mean"] > 0
    assert rows[0]["metrics"]["ttft_s_mean"]["mean"] == pytest.approx(0.030, abs=0.015)
    assert state["complete"] is False
    assert "mock" in proc.stderr and "broken" in proc.stderr  # the summary table


def test_resume_skips_finished_cells_and_reruns_the_rest(mock_server, tmp_path):
    url = mock_server(ttft_ms=20, itl_ms=5)
    spec = _write(tmp_path, url, load={"users": [1]}, stop={"duration_s": 0.5})  # what is run matters, not how long
    out = tmp_path / "exp"
    _run(spec, out)
    state = json.loads((out / "experiment.json").read_text())
    ok_ids = sorted(k for k, c in state["cells"].items() if c["status"] == "ok")
    first_mtimes = {k: (out / state["cells"][k]["run_dir"] / "results.json").stat().st_mtime for k in ok_ids}
    # as if the run had been interrupted during the second trial
    state["cells"][ok_ids[1]]["status"] = "running"
    (out / "experiment.json").write_text(json.dumps(state))
    proc = _run(spec, out)
    state = json.loads((out / "experiment.json").read_text())
    assert "all 2 cells done" not in proc.stderr
    after = {k: (out / state["cells"][k]["run_dir"] / "results.json").stat().st_mtime for k in ok_ids}
    assert after[ok_ids[0]] == first_mtimes[ok_ids[0]]  # finished: skipped
    assert after[ok_ids[1]] > first_mtimes[ok_ids[1]]  # was running: run again
    assert state["cells"][ok_ids[1]]["status"] == "ok"


def test_a_different_experiment_in_the_same_directory_is_refused(tmp_path):
    """The state file of an experiment (as its first run writes it, before any server starts), then
    the same command with other settings: refused before anything runs."""
    from tokenbench.experiments.runner import _load_state, _save
    from tokenbench.experiments.spec import load_spec

    url = "http://127.0.0.1:9"  # never contacted
    out = tmp_path / "exp"
    _save(out, _load_state(out, load_spec(_write(tmp_path, url))))
    proc = _run(_write(tmp_path, url, trials=3), out)
    assert proc.returncode == 2 and "different experiment" in proc.stderr
    assert not (out / "cells").exists()


def test_ctrl_c_stops_the_experiment_and_the_same_command_resumes_it(mock_server, tmp_path):
    import os
    import signal
    import time

    url = mock_server(ttft_ms=20, itl_ms=5)
    mock = [{"label": "mock", "url": url, "backend": "vllm"}]
    spec = _write(tmp_path, url, backends=mock, trials=3, load={"users": [1]}, stop={"duration_s": 1.5})
    out = tmp_path / "exp"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenbench", "experiment", "run", str(spec), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    state_file = out / "experiment.json"
    deadline = time.time() + 60
    while time.time() < deadline:  # wait until the second cell is running
        if state_file.exists() and len(json.loads(state_file.read_text())["cells"]) >= 2:
            break
        time.sleep(0.1)
    time.sleep(0.5)  # into the second cell's 1.5 s point
    os.kill(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-2000:]
    state = json.loads(state_file.read_text())
    assert state["complete"] is False
    statuses = sorted(c["status"] for c in state["cells"].values())
    assert statuses == ["interrupted", "ok"], statuses
    again = _run(spec, out)
    assert again.returncode == 0, again.stderr[-2000:]
    state = json.loads(state_file.read_text())
    assert state["complete"] is True and len(state["cells"]) == 3
    assert all(c["status"] == "ok" for c in state["cells"].values())


def test_an_experiment_replays_a_trace_at_each_speed(mock_server, tmp_path):
    from replay_helpers import BLOCK_SIZE, ROWS, write_trace

    url = mock_server(ttft_ms=10, itl_ms=2)
    trace = write_trace(tmp_path / "trace.jsonl")
    spec = {
        "name": "replay-exp",
        "backends": [{"label": "mock", "url": url, "backend": "vllm"}],
        "load": {"replay": {"speeds": [2, 4]}},
        "stop": {"drain_timeout_s": 5},
        "dataset": {"name": "trace", "path": str(trace), "block_size": BLOCK_SIZE},
        "api": "chat",
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "exp"
    proc = _run(path, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = json.loads((out / "experiment.json").read_text())
    (cell,) = state["cells"].values()
    results = json.loads((out / cell["run_dir"] / "results.json").read_text())
    points = results["points"]
    assert [(p["load"]["kind"], p["load"]["speed"]) for p in points] == [("replay", 2), ("replay", 4)]
    assert [p["requests"]["total"] for p in points] == [len(ROWS), len(ROWS)]  # every row, each speed
    assert results["dataset"]["trace"]["num_rows_used"] == len(ROWS)
    records = [json.loads(line) for line in (out / cell["run_dir"] / "records.jsonl").read_text().splitlines()]
    for index, speed in ((0, 2), (1, 4)):
        sent = sorted((r["scheduled_s"], r["trace_row"]) for r in records if r["point"] == index)
        offsets = [t - sent[0][0] for t, _ in sent]
        assert offsets == pytest.approx([row[0] / 1000 / speed for row in ROWS], abs=1e-6)  # the schedule
        assert [row for _, row in sent] == [1, 2, 3, 4]


def test_a_priced_configuration_aggregates_its_cost_per_token(mock_server, tmp_path):
    """cost_per_hour x gpus of a backend entry reaches each cell's points and the aggregates; an
    unpriced configuration's cost is absent (n 0), never 0."""
    url = mock_server(ttft_ms=5, itl_ms=2)
    spec = {
        "name": "priced",
        "backends": [
            {"label": "priced", "url": url, "cost_per_hour": 1.8, "gpus": 2},
            {"label": "free", "url": url},
        ],
        "load": {"rates": [10], "arrival": "constant"},
        "stop": {"duration_s": 1.5},
        "dataset": {"input_tokens": 8, "output_tokens": 8},
        "api": "chat",
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "exp"
    proc = _run(path, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = json.loads((out / "experiment.json").read_text())
    rows = {r["server"]: r["metrics"] for r in state["aggregates"]}
    cell = next(c for c in state["cells"].values() if c["server"] == "priced")
    point = json.loads((out / cell["run_dir"] / "results.json").read_text())["points"][0]
    assert point["cost"]["usd_per_hour"] == 3.6
    expected = 3.6 / 3600 / point["output_tokens_per_s"] * 1e6
    assert rows["priced"]["usd_per_million_output_tokens"]["mean"] == pytest.approx(expected)
    assert rows["free"]["usd_per_million_output_tokens"] == {"mean": None, "ci95": None, "n": 0, "values": []}
