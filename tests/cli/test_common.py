"""cli/common.py: the one error formatter names the flag to fix for a pydantic error, fail() prints
one masked red line and exits with the code, and the option helpers (given, default, numbers)."""

from __future__ import annotations

import pytest
import typer
from pydantic import ValidationError

from tokenbench.cli import common
from tokenbench.cli.common import UsageError, default, fail, given, numbers, validation_message
from tokenbench.config import EngineKnobs, LoadSweep, ReplayLoad, StopConfig, TargetConfig, UsersLoad


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


def test_default_reads_the_settings_model_and_survives_rich_markup():
    assert default(StopConfig, "max_requests") == f" \\[default: {StopConfig.model_fields['max_requests'].default}]"
    assert default(EngineKnobs, "max_num_seqs") == " \\[default: None]"
    # the help is rich markup: unescaped, "[default: 1.0]" was read as a tag and vanished
    from rich.console import Console
    from rich.text import Text

    console = Console(file=None, width=200, record=True)
    console.print(Text.from_markup("speed." + default(ReplayLoad, "speed")))
    assert console.export_text().strip() == "speed. [default: 1.0]"


def test_numbers():
    assert numbers(None, "--users") == []
    assert numbers("1, 2,4,", "--users", int) == [1, 2, 4]
    assert numbers("0.5,2", "--rate") == [0.5, 2.0]
    with pytest.raises(UsageError, match=r"^--users takes a comma-separated list of numbers, got '1,x'$"):
        numbers("1,x", "--users", int)
    with pytest.raises(UsageError, match="^--rate is empty$"):
        numbers(" , ", "--rate")
