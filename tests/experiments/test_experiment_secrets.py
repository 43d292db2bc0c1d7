"""Credentials given to an experiment's servers reach no file of the experiment and no console line:
experiment.json (its spec, its servers' commands and errors), the servers' logs, the cells' run
directories and the report. The launched engine is a script that prints its arguments and its
environment and exits, so its log would carry every secret if masking missed one."""

import os
import subprocess
import sys
import textwrap

import yaml

HF = "hf_plantedExperimentToken0042"
API_KEY = "sk-plantedExperimentKey0042"
PASSWORD = "plantedExperimentPassword0042"
GATEWAY = "plantedExperimentGateway0042"  # a request header's value: every header is a secret


def _engine(tmp_path):
    script = tmp_path / "fake-engine"
    script.write_text(
        textwrap.dedent(
            """\
            #!/bin/sh
            echo "fake engine started with: $*"
            echo "HF_TOKEN=$HF_TOKEN DB_PASSWORD=$DB_PASSWORD"
            exit 1
            """
        )
    )
    script.chmod(0o755)
    return script


def test_planted_secrets_reach_no_file_of_an_experiment(mock_server, tmp_path):
    url = mock_server(ttft_ms=5, itl_ms=1)
    spec = {
        "name": "secrets",
        "backends": [
            {"label": "mock", "url": url, "backend": "vllm", "headers": {"X-Gateway": GATEWAY}},
            {
                "label": "launched",
                "backend": "vllm",
                "model": "m",
                "engine_bin": str(_engine(tmp_path)),
                "ready_timeout_s": 20,
                "knobs": {
                    "engine_args": ["--api-key", API_KEY],
                    "engine_env": {"HF_TOKEN": HF, "DB_PASSWORD": PASSWORD},
                },
            },
        ],
        "load": {"users": [1]},
        "stop": {"duration_s": 1.0},
        "dataset": {"input_tokens": 8, "output_tokens": 4},
        "api": "chat",
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "exp"
    env = {**os.environ, "OPENAI_API_KEY": API_KEY}
    run = subprocess.run(
        [sys.executable, "-m", "tokenbench", "experiment", "run", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert run.returncode == 1, run.stderr[-3000:]  # the launched server failed: not a clean exit
    report = subprocess.run(
        [sys.executable, "-m", "tokenbench", "report", str(out)], capture_output=True, text=True, timeout=300
    )
    assert report.returncode == 0, report.stderr[-3000:]
    files = [p for p in out.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"experiment.json", "results.json", "records.jsonl", "config.json", "report.html", "report.md"} <= names
    logs = [p for p in files if p.suffix == ".log" and "launched" in p.name]
    assert logs and "fake engine started with" in logs[0].read_text()  # the engine's output was logged
    console = run.stdout + run.stderr + report.stdout + report.stderr
    for secret in (HF, API_KEY, PASSWORD, GATEWAY):
        assert secret not in console
        for p in files:
            assert secret.encode() not in p.read_bytes(), f"{secret} in {p}"
