"""`tokenbench run --dry-run`: the server checked, the dataset built and each point's schedule
planned as a run would, then exit 0 with the plan on stdout, no request of the load sent (the
mock's delivery log stays empty) and no --out directory made."""

import json
import urllib.request
from pathlib import Path

from typer.testing import CliRunner

from tokenbench.cli import app
from tokenbench.common.procs import free_port

TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "mooncake_conversation.first400.jsonl"


def _deliveries(url: str) -> dict:
    with urllib.request.urlopen(url + "/mock/deliveries", timeout=5) as resp:
        return json.load(resp)


def _dry_run(url: str, out: Path, *flags: str) -> str:
    result = CliRunner().invoke(app, ["run", "--url", url, *flags, "--out", str(out), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert _deliveries(url) == {}, "a dry run sent a request"
    assert not out.exists()
    return result.stdout


def test_a_rate_run_plans_its_requests_and_duration(mock_server, tmp_path):
    url = mock_server()
    plan = _dry_run(url, tmp_path / "out", "--rate", "2", "--duration", "10s", "--input-tokens", "16")
    assert "model: mock-model (the first the server lists)" in plan
    assert f"GET {url}/v1/models: answered" in plan
    assert "dataset: synthetic: 1000 prompts built" in plan
    assert "prompt tokens: min 16, mean 16.0, max 16" in plan  # the server's /tokenize counted them
    assert "output tokens: min 128, mean 128.0, max 128" in plan  # synthetic's default
    assert "schedule: open loop: 2 req/s, poisson arrivals" in plan
    assert "requests: 20" in plan and "expected duration: 10.0 s" in plan
    assert f"would write: {tmp_path / 'out'}/" in plan and "records.jsonl" in plan


def test_a_request_count_ends_a_rate_point_first(mock_server, tmp_path):
    """5 requests at 2 req/s take 2.5 s at the mean pace, before the 10 s --duration."""
    url = mock_server()
    plan = _dry_run(url, tmp_path / "out", "--rate", "2", "--duration", "10s", "--max-requests", "5")
    assert "stop: after 10s of load or after 5 requests" in plan
    assert "requests: 5" in plan and "expected duration: 2.5 s" in plan


def test_a_users_sweep_plans_each_point(mock_server, tmp_path):
    url = mock_server()
    plan = _dry_run(url, tmp_path / "out", "--users", "2,4", "--ramp-up", "2s", "--duration", "30s", "--trials", "2")
    assert "points: 2 (2 trials each, in a row)" in plan
    assert "schedule: closed loop: 2 users spawned evenly over 2s" in plan
    assert "schedule: closed loop: 4 users spawned evenly over 2s" in plan
    assert "expected duration: 120.0 s of load" in plan  # 2 points x 30 s x 2 trials


def test_a_trace_replay_plans_the_rows_its_window_sends(mock_server, tmp_path):
    """The rows in [0, 30 s) of the trace at speed 2: as many as the file has there, the last sent
    at its time / 2, their lengths the trace's own."""
    url = mock_server()
    rows = [json.loads(line) for line in TRACE.read_text().splitlines()]
    window = [r for r in rows if r["timestamp"] / 1000 < 30]
    plan = _dry_run(
        url,
        tmp_path / "out",
        *("--dataset", "trace", "--dataset-path", str(TRACE), "--replay-speed", "2", "--replay-end", "30"),
    )
    assert "schedule: trace replay: rows in [start, 30s) of trace time at x2" in plan
    assert f"requests: {len(window)}" in plan
    assert f"expected duration: {max(r['timestamp'] for r in window) / 1000 / 2:.1f} s" in plan
    inputs = [r["input_length"] for r in window]
    assert f"prompt tokens: min {min(inputs)}, mean {sum(inputs) / len(inputs):.1f}, max {max(inputs)}" in plan
    assert "stop: the trace's last row in the window" in plan


def test_an_unreachable_server_fails_the_plan(tmp_path):
    out = tmp_path / "out"
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(
        app, ["run", "--url", url, "--rate", "1", "--duration", "5", "--dry-run", "--out", str(out)]
    )
    assert result.exit_code == 3 and "cannot reach" in result.output
    assert not out.exists()


def test_a_dry_run_needs_a_running_server(tmp_path):
    result = CliRunner().invoke(app, ["run", "--rate", "1", "--duration", "5", "--dry-run"])
    assert result.exit_code == 2 and "--dry-run checks a running server" in result.output
