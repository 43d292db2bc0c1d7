"""tokenbench run's flags: bad input gets a clear error naming what to fix, and a non-zero exit
before any load."""

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from tokenbench.cli import app
from tokenbench.procs import free_port


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--users", "2", "--rate", "1"], "not both"),
        (["--users", "two"], "--users takes a comma-separated list"),
        (["--users", "2"], "--duration and/or --max-requests"),
        (["--users", "2", "--duration", "5", "--ramp-up", "10"], "longer than --ramp-up"),
        (["--users", "2", "--duration", "5", "--slo", "ttft:5"], "--slo part"),
        (["--users", "2", "--duration", "5", "--dataset", "nope"], "dataset"),
        (["--users", "0", "--duration", "5"], "users"),
        (["--rate", "1", "--duration", "5", "--arrival", "sometimes"], "arrival"),
        (["--url", "localhost:8000", "--users", "1", "--duration", "5"], "--url must look like"),
    ],
)
def test_bad_flags_exit_2_with_a_message(args, needle):
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == 2, result.output
    assert needle in result.output


def test_missing_dataset_file_is_named(tmp_path, mock_server):
    url = mock_server()
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--url",
            url,
            "--users",
            "1",
            "--max-requests",
            "1",
            "--dataset",
            "jsonl",
            "--dataset-path",
            str(tmp_path / "none.jsonl"),
            "--out",
            str(tmp_path / "out"),
            "--no-live",
        ],
    )
    assert result.exit_code == 2 and "none.jsonl" in result.output


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
