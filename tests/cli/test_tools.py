"""cli/tools.py: `tokenbench mock` and `tokenbench calibrate` turn flags into settings and refuse
bad input with exit 2 before serving or measuring anything (serve and calibrate are replaced by
recorders: nothing listens, nothing runs)."""

from __future__ import annotations

import subprocess
import sys
from typing import Literal, get_args, get_origin

import pytest
import typer
from pydantic import ValidationError
from run_helpers import mock_command
from typer.testing import CliRunner

import tokenbench.mock
import tokenbench.run.calibrate
from tokenbench.cli import app
from tokenbench.cli.flags import options
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


def test_every_settings_flag_is_an_option_of_mock_and_reaches_the_settings(served):
    """MockSettings declares `tokenbench mock`'s flags: each is an option of the command, named as
    its field (tests/run_helpers.mock_command's knobs: ttft_ms -> --ttft-ms), and a value other
    than the default given on the command line is the settings' value."""
    command = typer.main.get_command(app).commands["mock"]
    names = {name for param in command.params for name in (*param.opts, *param.secondary_opts)}
    found = options(MockSettings)
    assert {o.field for o in found} == set(MockSettings.model_fields) - NOT_FLAGS
    knobs = {}
    for option in found:
        assert option.name == "--" + option.field.replace("_", "-"), option.name
        assert option.name in names
        knobs[option.field] = _another_value(option.field)
    args = mock_command(9123, **knobs)[3:]  # from "mock" on
    result = CliRunner().invoke(app, args, env=ENV)
    assert result.exit_code == 0, result.output
    assert served == [(MockSettings(**knobs), {"port": 9123})]
    assert all(getattr(served[0][0], field) != MockSettings.model_fields[field].default for field in knobs)


# MockSettings' fields no flag sets: the tests that serve it in their own process set them.
NOT_FLAGS = {"word", "record_deliveries", "max_model_len"}


def _another_value(field: str) -> object:
    """A value of the field that is not its default."""
    info = MockSettings.model_fields[field]
    kind, was = info.annotation, info.default
    if get_origin(kind) is Literal:
        return next(v for v in get_args(kind) if v != was)
    if kind is bool:
        return not was
    if field == "diverge_share":  # a share: 0..1
        return 0.5
    if kind is str or kind == str | None:
        return {"adapters": "a=5,b=7", "spec_accept": "2,0,1", "replicas_script": "0:1,4:2"}.get(
            field, f"{field}-value"
        )
    return kind(was + 3)


def test_mock_with_no_flags_serves_the_default_settings(served):
    result = CliRunner().invoke(app, ["mock"], env=ENV)
    assert result.exit_code == 0, result.output
    assert served == [(MockSettings(), {"port": 9000})]


def test_the_cli_starts_without_loading_the_server():
    """`tokenbench mock`'s options come from MockSettings; the server (aiohttp) loads only when a
    command serves it."""
    code = "import sys, typer; from tokenbench.cli import app; typer.main.get_command(app); "
    code += "print(sorted({'aiohttp', 'prometheus_client', 'tokenbench.mock.server'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_mock_refuses_an_unknown_fault(served):
    result = CliRunner().invoke(app, ["mock", "--fault", "explode"], env=ENV)
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert "--fault: Input should be 'none', 'http_500'" in text and "'no_end'" in text
    assert served == []  # nothing was served


def test_mock_refuses_an_unknown_otlp_protocol(served):
    result = CliRunner().invoke(app, ["mock", "--otlp-protocol", "http"], env=ENV)
    assert result.exit_code == 2
    assert "--otlp-protocol: Input should be 'http/protobuf' or 'grpc'" in " ".join(result.output.split())
    assert served == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--spec-tokens", "2", "--spec-accept", "3,1"], "--spec-accept: '3,1': write the drafts each verify step"),
        (["--spec-tokens", "2", "--spec-accept", "1,x"], "each 0..2 (--spec-tokens 2)"),
        (["--spec-accept", "1"], "--spec-accept: '1' needs --spec-tokens K > 0"),
        (["--spec-tokens", "-1"], "--spec-tokens: Input should be greater than or equal to 0"),
    ],
)
def test_mock_refuses_an_acceptance_cycle_the_draft_length_cannot_take(served, args, says):
    result = CliRunner().invoke(app, ["mock", *args], env=ENV)
    assert result.exit_code == 2
    assert says in " ".join(result.output.split())
    assert served == []


def test_mock_settings_refuse_an_unknown_field():
    with pytest.raises(ValidationError, match="ttft_sm"):
        MockSettings(ttft_sm=5)


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
