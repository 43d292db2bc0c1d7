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
        (["--users", "2", "--duration", "5", "--ramp-up", "10"], "longer than ramp-up + warmup (10s; --ramp-up 10s)"),
        (["--users", "2", "--duration", "5", "--slo", "ttft:5"], "--slo part"),
        (["--users", "2", "--duration", "5", "--dataset", "nope"], "dataset"),
        (["--users", "0", "--duration", "5"], "users"),
        (["--rate", "1", "--duration", "5", "--arrival", "sometimes"], "arrival"),
        (["--url", "localhost:8000", "--users", "1", "--duration", "5"], "--url must look like"),
        (["--dataset", "trace", "--dataset-path", "t.jsonl", "--users", "2"], "drop --users"),
        (["--dataset", "trace", "--dataset-path", "t.jsonl", "--rate", "1,2"], "drop --rate"),
        (["--dataset", "trace", "--users", "2", "--rate", "1"], "drop --users and --rate"),
        (["--users", "2", "--duration", "5", "--replay-speed", "2"], "--replay-speed need a trace"),
        (["--rate", "2", "--duration", "5", "--block-size", "16"], "--block-size need a trace"),
        (["--dataset", "trace", "--dataset-path", "t.jsonl", "--replay-speed", "0"], "--replay-speed"),
        (["--dataset", "trace", "--dataset-path", "t", "--replay-start", "5", "--replay-end", "2"], "--replay-end 2"),
        (["--dataset", "trace", "--dataset-path", "t.jsonl", "--trace-format", "csv"], "--trace-format"),
        (["--dataset", "trace", "--dataset-path", "t.jsonl", "--arrival", "constant"], "drop --arrival"),
        (["--dataset", "trace", "--max-requests", "3"], "--dataset trace needs --dataset-path"),
        (["--users", "1", "--max-requests", "3", "--prefix-cache", "flush"], "--prefix-cache: Input should be 'reset'"),
        (["--users", "1", "--max-requests", "3", "--gpus", "2"], "--gpus counts the GPUs --cost-per-hour pays for"),
        (["--users", "1", "--max-requests", "3", "--cost-per-hour", "0"], "--cost-per-hour: Input should be greater"),
        (["--users", "1", "--max-requests", "3", "--cost-per-hour", "2", "--gpus", "0"], "--gpus: Input should be"),
        (["--users", "1", "--max-requests", "3", "--deadlines", "ttft:5"], "--deadlines part 'ttft:5'"),
        (["--users", "1", "--max-requests", "3", "--deadlines", "tbt=soon"], "--deadlines tbt: cannot read"),
        (
            ["--users", "1", "--max-requests", "3", "--deadlines", "tbt=0"],
            "--deadlines tbt: a deadline must be above 0",
        ),
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


@pytest.mark.parametrize("flag", ["--request-timeout", "--timeout"])
def test_request_timeout_records_a_timeout_not_a_crash(mock_server, tmp_path, flag):
    """The server takes 1.5 s to a first token; the client gives each request 0.3 s: every request
    is a record with outcome timeout after 0.3 s, and the run ends normally."""
    import json

    url = mock_server(ttft_ms=1500, itl_ms=5)
    out = tmp_path / "run"
    args = ["run", "--url", url, "--users", "2", "--max-requests", "4", flag, "0.3"]
    args += ["--input-tokens", "8", "--output-tokens", "4", "--no-live", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    assert config["target"]["request_timeout_s"] == 0.3
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in records] == ["timeout"] * 4
    assert all(r["error"].startswith("timed out") and r["chunk_times_s"] == [] for r in records)
    # ended by the 0.3 s timeout (its clock starts as the request is made, a moment before sent_s
    # is stamped), not by the 1.5 s to a first token
    assert all(0.25 <= r["closed_s"] - r["sent_s"] <= 0.3 + 0.5 for r in records)
    assert "timeout 4" in result.output  # the summary's failures
