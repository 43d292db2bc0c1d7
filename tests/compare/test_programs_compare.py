"""Compare and ``--fail-on`` by sessions (compare/__init__.py, spec.py, samples.py): two real
agent-programs runs against the mock, the second's calls slower (TTFT 100 ms, not 5: 25 calls on
the critical path, 2.4 s a session more, far over what a loaded machine adds): compare shows
the session latency and rate as results.json has them, and a gate on the session latency's p90
fails on the slower run, tested over the runs' measured sessions, and passes on an unchanged one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from program_runs import program_run
from run_helpers import mock_process
from typer.testing import CliRunner

from tokenbench.cli import app
from tokenbench.compare import compare
from tokenbench.compare.samples import Samples, read_cells
from tokenbench.compare.spec import parse_fail_on
from tokenbench.metrics.programs import sessions
from tokenbench.rundir import read_records

SESSIONS = 3  # each run replays the session three times, one after another
SESSION_METRICS = {"session_s_mean", "session_s_p90", "sessions_per_s"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Each run against a mock process of its own (its prompts of up to 100k words parsed off this
    process's GIL)."""
    out = {}
    for name, ttft_ms in (("base", 5.0), ("slow", 100.0)):
        with mock_process(ttft_ms=ttft_ms, itl_ms=2, output_tokens=4) as url:
            out[name] = program_run(url, tmp_path_factory.mktemp(name) / "run", sessions=SESSIONS, time_scale=0.0001)
    return out


def _programs(run: Path) -> dict:
    [p] = json.loads((run / "results.json").read_text())["points"]
    return p["programs"]


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["compare", *args], env={"COLUMNS": "400"})
    return result.exit_code, result.output


def test_compare_shows_the_sessions_as_the_results_have_them(runs: dict[str, Path]) -> None:
    rows = {r.metric: r for r in compare([runs["base"], runs["slow"]])}
    assert SESSION_METRICS <= set(rows)
    base, slow = _programs(runs["base"]), _programs(runs["slow"])
    assert base["measured_sessions"] == slow["measured_sessions"] == SESSIONS
    for key, get in (
        ("session_s_mean", lambda p: p["session_s"]["mean"]),
        ("session_s_p90", lambda p: p["session_s"]["p90"]),
        ("sessions_per_s", lambda p: p["sessions_per_s"]),
    ):
        assert rows[key].baseline.mean == pytest.approx(get(base)) and rows[key].other.mean == pytest.approx(get(slow))
    assert rows["session_s_p90"].better is False and rows["sessions_per_s"].better is False  # slower calls
    code, text = _cli(str(runs["base"]), str(runs["slow"]))
    assert code == 0 and "session latency p90 (s)" in text and "session rate (sessions/s)" in text


def test_the_gate_tests_a_single_run_over_its_measured_sessions(runs: dict[str, Path]) -> None:
    [gate] = parse_fail_on("session:p90:+10%")
    [cell] = read_cells(runs["base"])
    found = Samples().of(gate.metric, cell.trials)
    assert found is not None
    values, unit = found
    expected = [s.latency_s for s in sessions(read_records(runs["base"])) if s.ok and s.latency_s is not None]
    assert unit == "sessions" and sorted(values) == pytest.approx(sorted(expected))
    assert float(np.percentile(values, 90)) == pytest.approx(_programs(runs["base"])["session_s"]["p90"])


def test_a_gate_on_session_latency_fails_on_the_slower_run(runs: dict[str, Path]) -> None:
    base, slow = str(runs["base"]), str(runs["slow"])
    code, text = _cli(base, slow, "--fail-on", "session:p90:+10%")
    assert code == 1, text
    [line] = [ln for ln in text.splitlines() if ln.startswith("FAIL")]
    assert (
        "session:p90:+10% at 1 users" in line
        and "z-test of the p90s" in line
        and f"{SESSIONS}/{SESSIONS} sessions" in line
    )
    code, text = _cli(base, base, "--fail-on", "session:p90:+10%,session_s:mean:+10%")
    assert code == 0, text  # the same run: nothing changed
    assert len([ln for ln in text.splitlines() if ln.startswith("pass session")]) == 2
