"""cli/tools.py: `tokenbench mock` and `tokenbench calibrate` turn flags into settings and refuse
bad input with exit 2 before serving or measuring anything (serve and calibrate are replaced by
recorders: nothing listens, nothing runs)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import tokenbench.mock
import tokenbench.run.calibrate
from tokenbench.cli import app
from tokenbench.mock.settings import MockSettings
from tokenbench.run.calibrate import CalibrationResult, CalibrationSpec

ENV = {"COLUMNS": "200"}


@pytest.fixture
def served(monkeypatch) -> list:
    calls: list = []
    monkeypatch.setattr(tokenbench.mock, "serve", lambda settings, **kw: calls.append((settings, kw)))
    return calls


def test_mock_help_lists_the_faults():
    result = CliRunner().invoke(app, ["mock", "--help"], env=ENV)
    assert result.exit_code == 0, result.output
    for word in ("--ttft-ms", "--fault", "--max-streams", "disconnect", "no_end"):
        assert word in result.output


def test_mock_flags_become_settings(served):
    args = ["mock", "--port", "9123", "--ttft-ms", "5", "--itl-ms", "2", "--output-tokens", "7"]
    args += ["--fault", "abort", "--fault-every", "3", "--fault-after-chunks", "1", "--max-streams", "4"]
    result = CliRunner().invoke(app, args, env=ENV)
    assert result.exit_code == 0, result.output
    assert served == [
        (
            MockSettings(
                ttft_ms=5, itl_ms=2, output_tokens=7, fault="abort", fault_every=3, fault_after_chunks=1, max_streams=4
            ),
            {"port": 9123},
        )
    ]


def test_mock_refuses_an_unknown_fault(served):
    result = CliRunner().invoke(app, ["mock", "--fault", "explode"], env=ENV)
    assert result.exit_code == 2
    assert "--fault must be one of none, http_500" in result.output and "no_end" in result.output
    assert served == []  # nothing was served


def test_mock_refuses_a_non_number(served):
    result = CliRunner().invoke(app, ["mock", "--ttft-ms", "fast"], env=ENV)
    assert result.exit_code == 2 and "--ttft-ms" in result.output
    assert served == []


@pytest.fixture
def measured(monkeypatch) -> list[CalibrationSpec]:
    specs: list[CalibrationSpec] = []

    def fake(spec: CalibrationSpec) -> CalibrationResult:
        specs.append(spec)
        return CalibrationResult(spec, 8, 8, *([1.25] * 6), 2.0, 3.0, 4.0, 0.5, 1000.0, 2000.0, "dir")

    monkeypatch.setattr(tokenbench.run.calibrate, "calibrate", fake)
    return specs


def test_calibrate_flags_become_the_spec_and_the_table_is_printed(measured):
    result = CliRunner().invoke(app, ["calibrate", "--users", "3", "--itl-ms", "4", "--no-pin"], env=ENV)
    assert result.exit_code == 0, result.output
    assert measured == [CalibrationSpec(users=3, requests=24, ttft_ms=50.0, itl_ms=4.0, pin_cores=False)]
    assert "8/8" in result.output and "2000" in result.output  # 8 requests per user by default


def test_calibrate_refuses_bad_input(measured):
    for args in (
        ["--users", "many"],
        ["--requests", "1.5"],
        ["--output-tokens", "x"],
        ["--bogus"],
        ["--api", "tgi"],
        ["--target-rate", "0"],
    ):
        result = CliRunner().invoke(app, ["calibrate", *args], env=ENV)
        assert result.exit_code == 2, (args, result.output)
    assert measured == []


def test_calibrate_says_the_request_rate_one_process_sustains(monkeypatch):
    """the compiled client: 450 µs of CPU per request -> 0.9 / 450e-6 = 2,000 requests/s per process, and
    --target-rate 5000 needs 3 of them."""
    from tokenbench.run.calibrate import RequestCost

    def fake(spec: CalibrationSpec) -> CalibrationResult:
        cost = RequestCost(64, 450.0, 900.0, 1.0, 2.0, 0.4, 0.3)
        return CalibrationResult(spec, 8, 8, *([1.25] * 6), 2.0, 3.0, 4.0, 0.5, 1000.0, 2000.0, "dir", cost=cost)

    monkeypatch.setattr(tokenbench.run.calibrate, "calibrate", fake)
    args = ["calibrate", "--output-tokens", "4", "--target-rate", "5000", "--api", "embeddings"]
    result = CliRunner().invoke(app, args, env={**ENV, "COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "about 2,000 requests/s of whole embeddings answers" in text and "needs --workers 3" in text
