"""--duration auto, --warmup auto, --precision, --max-duration, --min-requests, --stop-oversaturated."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from tokenbench.cli import app
from tokenbench.cli.flags import run_options
from tokenbench.cli.run_flags import run_config
from tokenbench.config import DEFAULT_MAX_DURATION_S, ReplayLoad


def _given(**values: Any) -> dict[str, Any]:
    params: dict[str, Any] = {o.param: None for o in run_options()}
    params.update(values)
    return params


def test_duration_auto_runs_to_its_ceiling_at_most():
    cfg = run_config(_given(users="2", duration="auto", precision=0.05, max_duration=60.0, min_requests=200))
    stop = cfg.stop
    assert stop.duration_auto and stop.duration_s == 60.0  # the ceiling is the deadline
    assert (stop.auto_precision, stop.auto_min_requests) == (0.05, 200)
    cfg = run_config(_given(rate="4", duration="auto"))
    assert cfg.stop.duration_s == DEFAULT_MAX_DURATION_S and cfg.stop.auto_precision == 0.02


def test_warmup_auto():
    cfg = run_config(_given(users="2", duration=10.0, warmup="auto"))
    assert cfg.stop.warmup_auto and cfg.stop.warmup_s == 0.0 and not cfg.stop.duration_auto


def test_a_trace_replay_ignores_duration_auto():
    cfg = run_config(_given(dataset="trace", dataset_path="t.jsonl", duration="auto", precision=0.05))
    assert cfg.loads == [ReplayLoad()]
    assert cfg.stop.duration_s is None and not cfg.stop.duration_auto and cfg.stop.precision is None


def test_the_new_keys_stay_out_of_a_plain_runs_config():
    cfg = run_config(_given(users="2", duration=10.0))
    assert set(cfg.redacted()["stop"]) == {"duration_s", "max_requests", "warmup_s", "drain_timeout_s", "schedule_ends"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--precision", "0.05"], "--precision goes with --duration auto"),
        (["--max-duration", "30"], "--max-duration goes with --duration auto"),
        (["--duration", "auto", "--precision", "2"], "--precision"),
        (["--duration", "soon"], "--duration"),
    ],
)
def test_bad_auto_flags_are_one_line_naming_the_flag(args, message):
    result = CliRunner().invoke(
        app, ["run", "--url", "http://127.0.0.1:9", "--users", "1", "--max-requests", "1", *args]
    )
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
