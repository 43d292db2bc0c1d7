"""cli/common.py: the one error formatter names the flag to fix for a pydantic error, fail() prints
one masked red line and exits with the code, the option helpers (given, numbers), and
the exit code of each kind of failure."""

from __future__ import annotations

import pytest
import typer
from pydantic import ValidationError
from typer.testing import CliRunner

from tokenbench.cli import app, common
from tokenbench.cli.common import UsageError, fail, given, numbers, validation_message
from tokenbench.config import EngineKnobs, LoadSweep, StopConfig, TargetConfig, UsersLoad


def _error(build) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        build()
    return info.value


def test_validation_message_names_the_flag():
    assert validation_message(_error(lambda: UsersLoad(users=0))) == (
        "invalid settings: --users: Input should be greater than 0"
    )


def test_validation_message_joins_every_error_and_drops_the_value_error_prefix():
    message = validation_message(_error(lambda: EngineKnobs(max_num_seqs=0, kv_memory=2)))
    assert message == (
        "invalid settings: --max-num-seqs: Input should be greater than 0; "
        "--kv-memory: Input should be less than or equal to 1"
    )
    message = validation_message(_error(lambda: TargetConfig(url="x")))
    assert message.startswith("invalid settings: --url: ") and "Value error" not in message


def test_validation_message_for_the_whole_model_names_its_flags():
    message = validation_message(_error(lambda: LoadSweep(users=[1], rates=[1.0])))
    assert message.startswith("invalid settings: --users/--rate: ")


def test_validation_message_falls_back_to_the_field_name():
    class Other(StopConfig):
        pass

    message = validation_message(_error(lambda: Other(max_requests=-1)))
    assert message.startswith("invalid settings: max_requests: ")  # no flag known for Other


def test_fail_prints_one_masked_line_and_exits_with_the_code(monkeypatch):
    from rich.console import Console

    console = Console(record=True, width=200)
    monkeypatch.setattr(common, "err", console)
    with pytest.raises(typer.Exit) as info:
        fail("server said: Authorization: Bearer abcdefghijklmnop", 3)
    assert info.value.exit_code == 3
    assert console.export_text() == "error: server said: Authorization: Bearer ***\n"


def test_given_keeps_only_what_was_given():
    assert given(a=None, b=0, c="", d=False) == {"b": 0, "c": "", "d": False}


def test_numbers():
    assert numbers(None, "--users") == []
    assert numbers("1, 2,4,", "--users", int) == [1, 2, 4]
    assert numbers("0.5,2", "--rate") == [0.5, 2.0]
    with pytest.raises(UsageError, match=r"^--users takes a comma-separated list of numbers, got '1,x'$"):
        numbers("1,x", "--users", int)
    with pytest.raises(UsageError, match="^--rate is empty$"):
        numbers(" , ", "--rate")


# Errors by kind (tokenbench/errors.py): bad input exits 2 in one line, an expected failure keeps
# its own code, anything else is a bug: its traceback, a line asking for a report, exit 70.
_RUN = ["run", "--users", "1", "--max-requests", "1", "--no-live"]


def test_bad_input_found_deep_in_a_run_exits_2_with_one_line(mock_server, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "hi"}\nnot json\n')
    args = [*_RUN, "--url", mock_server(), "--dataset", "jsonl", "--dataset-path", str(prompts)]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "run")], env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert errors == [f"error: --dataset-path {prompts}:2: not a JSON line (Expecting value)"]
    assert "Traceback" not in result.output


def test_an_expected_failure_keeps_its_exit_code(monkeypatch, tmp_path):
    import tokenbench.run
    from tokenbench.workers.pool import AllWorkersLost

    def lost(*_a, **_k):
        raise AllWorkersLost("every worker died")

    monkeypatch.setattr(tokenbench.run, "run", lost)
    result = CliRunner().invoke(app, [*_RUN, "--url", "http://127.0.0.1:9", "--out", str(tmp_path / "run")])
    assert result.exit_code == 1, result.output
    assert "error: every worker died; what was measured is on disk" in result.output


@pytest.mark.parametrize("exc", [RuntimeError("boom"), ValueError("an internal invariant broke"), KeyError("k")])
def test_anything_else_is_a_bug_with_its_traceback_and_exit_70(monkeypatch, tmp_path, exc):
    """A ValueError from our own code is a bug too, never "bad input" (exit 2)."""
    import tokenbench.run
    from tokenbench.errors import BUG_EXIT

    def broken(*_a, **_k):
        raise exc

    monkeypatch.setattr(tokenbench.run, "run", broken)
    result = CliRunner().invoke(app, [*_RUN, "--url", "http://127.0.0.1:9", "--out", str(tmp_path / "run")])
    assert result.exit_code == BUG_EXIT == 70, result.output
    assert "Traceback" in result.output and "in broken" in result.output
    assert "internal error" in result.output and "please report it" in " ".join(result.output.split())
