"""Against the real llama.cpp server tokenbench launches: kill -9 of a run and of an experiment
leaves no process of theirs; planted credentials reach no file and no console line; a port a
stale server holds is named, never reused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
import yaml
from safety_helpers import _descendants, _events, _recompute, _wait_for, assert_all_gone

pytestmark = pytest.mark.e2e

HF = "hf_PlantedSecretValue0123456789"
API_KEY = "sk-planted-api-key-0123456789abcdef"
HEADER = "planted-gateway-value-4242"


@pytest.fixture(scope="module")
def gguf(embedded_gguf):
    """Every test here launches its own server: the launch (its kill, its credentials, its port) is the subject."""
    return str(embedded_gguf)


def _spawn(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tokenbench", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _engine(children: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in children if "_xllamacpp_child" in " ".join(p.cmdline())]


def test_kill_9_of_a_run_with_the_embedded_server_leaves_nothing(gguf, tmp_path):
    out = tmp_path / "run"
    proc = _spawn("run", "--users", "2", "--duration", "30", "--output-tokens", "16", "--out", str(out), "--no-live")
    _wait_for(lambda: _events(out, "point_start"), 120, "the load to start")
    time.sleep(1.0)
    children = _descendants(proc.pid)
    assert _engine(children), [p.cmdline() for p in children]
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    assert_all_gone(children, within_s=5.0)
    recomputed = _recompute(out)
    assert recomputed["interrupted"] is True and recomputed["points"][0]["interrupted"] is True


def test_kill_9_of_an_experiment_leaves_nothing(gguf, tmp_path):
    spec = {
        "name": "kill-me",
        "backends": [{"label": "llama", "backend": "xllamacpp", "model": gguf, "knobs": {"max_num_seqs": 2}}],
        "load": {"users": [1, 2]},
        "stop": {"duration_s": 20},
        "dataset": {"input_tokens": 16, "output_tokens": 8},
        "trials": 1,
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "exp"
    proc = _spawn("experiment", "run", str(path), "--out", str(out))
    _wait_for(
        lambda: (
            any(_events(d, "point_start") for d in (out / "cells").glob("*")) if (out / "cells").exists() else False
        ),
        120,
        "the first cell to start",
    )
    time.sleep(1.0)
    children = _descendants(proc.pid)
    assert _engine(children)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    assert_all_gone(children, within_s=5.0)
    state = _recompute(out)
    running = [c for c in state["cells"].values() if c["status"] == "interrupted"]
    assert running and "killed" in running[0]["error"]


def test_planted_secrets_reach_no_file_and_no_console(gguf, smollm2_tokenizer, tmp_path):
    """The server requires an API key (passed as an engine argument); the client sends it from
    the environment; the engine gets a token in its environment; a gateway header goes with
    every request. None of them appears in any file of the run, its report, or the console."""
    out = tmp_path / "run"
    proc = _spawn(
        "run",
        "--backend",
        "xllamacpp",
        "--model",
        gguf,
        "--users",
        "2",
        "--duration",
        "6",
        "--output-tokens",
        "8",
        "--input-tokens",
        "16",
        "--tokenizer",
        str(smollm2_tokenizer),
        "--engine-env",
        f"HF_TOKEN={HF}",
        "--engine-arg=--api-key",
        f"--engine-arg={API_KEY}",
        "--header",
        f"X-Gateway-Key: {HEADER}",
        "--out",
        str(out),
        "--no-live",
        env={"OPENAI_API_KEY": API_KEY},
    )
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["points"][0]["requests"]["ok"] >= 2  # the key was right: the server answered
    report = subprocess.run(
        [sys.executable, "-m", "tokenbench", "report", str(out)], capture_output=True, text=True, timeout=300
    )
    assert report.returncode == 0, report.stderr[-2000:]
    console = stdout + stderr + report.stdout + report.stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {"config.json", "results.json", "records.jsonl", "samples.jsonl", "server.log", "report.html"} <= {
        p.name for p in files
    }
    for secret in (HF, API_KEY, HEADER):
        assert secret not in console
        for path in files:
            assert secret.encode() not in path.read_bytes(), f"{secret} in {path}"
    config = json.loads((out / "config.json").read_text())
    assert config["target"]["headers"] == {"X-Gateway-Key": "***"}
    assert "--api-key" in results["target"]["command"] and "***" in results["target"]["command"]


def test_a_stale_server_on_the_port_is_named_not_reused(gguf, tmp_path):
    from tokenbench.common.procs import free_port

    port = free_port()
    stale = subprocess.Popen(
        [sys.executable, "-m", "tokenbench", "mock", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        from tokenbench.common.procs import wait_http

        wait_http(f"http://127.0.0.1:{port}/health", 20, stale)
        proc = _spawn(
            "run",
            "--backend",
            "xllamacpp",
            "--model",
            gguf,
            "--engine-port",
            str(port),
            "--users",
            "1",
            "--max-requests",
            "1",
            "--out",
            str(tmp_path / "run"),
            "--no-live",
        )
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 3, stderr
        assert f"PID {stale.pid}" in stderr and "already answers" in stderr.replace("\n", " ")
        assert not (tmp_path / "run" / "records.jsonl").exists() or not (tmp_path / "run" / "records.jsonl").read_text()
    finally:
        stale.terminate()
        stale.wait(timeout=10)
