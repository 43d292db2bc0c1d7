"""tokenbench run's flags: bad input gets a clear error naming what to fix, and a non-zero exit
before any load."""

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from tokenbench.cli import app
from tokenbench.common.procs import free_port


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
    is a record with outcome timeout after 0.3 s, and the run ends without a crash: with exit 4, the
    server failed every request (results.failures), and the timeout's text shown."""
    import json

    url = mock_server(ttft_ms=1500, itl_ms=5)
    out = tmp_path / "run"
    args = ["run", "--url", url, "--users", "2", "--max-requests", "4", flag, "0.3"]
    args += ["--input-tokens", "8", "--output-tokens", "4", "--no-live", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 4, result.output
    assert "[timeout 200] ×" in result.output and ": timed out (TimeoutError) after 0." in result.output
    assert "failed: 4 of 4 finished requests failed (timeout 4)" in result.output and "Traceback" not in result.output
    config = json.loads((out / "config.json").read_text())
    assert config["target"]["request_timeout_s"] == 0.3
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["outcome"] for r in records] == ["timeout"] * 4
    assert all(r["error"].startswith("timed out") and r["chunk_times_s"] == [] for r in records)
    # ended by the 0.3 s timeout (its clock starts as the request is made, a moment before sent_s
    # is stamped), not by the 1.5 s to a first token
    assert all(0.25 <= r["closed_s"] - r["sent_s"] <= 0.3 + 0.5 for r in records)
    assert "timeout 4" in result.output  # the summary's failures


def test_a_server_that_fails_every_request_is_not_flooded_its_error_is_shown_and_the_run_exits_4(mock_server, tmp_path):
    """A server answering HTTP 400 to everything, 4 users for 3 s, two points: the circuit breaker
    stops the first point at its 20th failure (before: ~1,500-5,000 requests in 3 s), the next
    point never runs, the server's text is on the console and in results.json, and the run exits 4.
    Recompute derives the same errors_seen and stopped_early from the run's files."""
    import json

    from tokenbench.rundir.derive import recompute_run

    url = mock_server(ttft_ms=1, itl_ms=1, fault="http_400")
    out = tmp_path / "run"
    args = ["run", "--url", url, "--users", "4,8", "--duration", "3", "--no-live", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 4, result.output
    assert '[http_error 400] ×20: HTTP 400: {"error": {"message": "scripted http_400"' in result.output
    assert "stopped early by the circuit breaker" in result.output and "the server failed at 4 users" in result.output
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 20 and {r["outcome"] for r in records} == {"http_error"}  # at most 20 + 4 - 1
    results = json.loads((out / "results.json").read_text())
    assert len(results["points"]) == 1  # the 8-users point would only flood a broken server
    point = results["points"][0]
    assert point["errors_seen"] == [
        {
            "outcome": "http_error",
            "status": 400,
            "text": 'HTTP 400: {"error": {"message": "scripted http_400", "code": 400}}',
            "count": 20,
        }
    ]
    assert (
        point["stopped_early"]["by"] == "circuit_breaker"
        and "20 requests in a row failed" in (point["stopped_early"]["reason"])
    )
    assert point["span"]["load_end_s"] - point["span"]["start_s"] < 1.5  # stopped, not 3 s of load
    again = recompute_run(out).to_json()["points"][0]
    assert (again["errors_seen"], again["stopped_early"]) == (point["errors_seen"], point["stopped_early"])


def test_a_model_the_server_does_not_serve_fails_before_any_request_naming_what_it_serves(mock_server, tmp_path):
    import json
    import urllib.request

    url = mock_server(ttft_ms=1, itl_ms=1, model="served-a")
    out = tmp_path / "run"
    args = ["run", "--url", url, "--model", "gpt-4o", "--users", "1", "--max-requests", "3", "--no-live"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "--model gpt-4o" in result.output and "serves served-a" in result.output
    assert "Traceback" not in result.output
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        assert json.loads(resp.read()) == {}  # not one request reached the server
    ok = CliRunner().invoke(app, [*args[:4], "served-a", *args[5:], "--out", str(tmp_path / "ok")])
    assert ok.exit_code == 0, ok.output  # the name it serves runs
