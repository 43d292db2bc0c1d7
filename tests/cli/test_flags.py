"""cli/flags.py: every option comes from one Flag on a settings field; its type, choices, panel
and default text come from the field; its value comes back as the field's; an error names it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import typer.main
from pydantic import BaseModel, Field
from typer.testing import CliRunner

from tokenbench import __version__
from tokenbench.cli import app
from tokenbench.cli.flags import (
    RUN_FLAGS,
    FlagCommand,
    Option,
    default,
    flag_of,
    flagged,
    given_fields,
    options,
    run_options,
)
from tokenbench.config import DatasetConfig, EngineKnobs, ReplayLoad, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.config.flags import Flag, SetBy

ENV = {"COLUMNS": "240"}


class _Toy(BaseModel):
    speed: float = Field(default=1.5, gt=0)
    mode: Literal["a", "b"] = "a"
    on: bool = False
    tags: list[int] | None = None
    path: Path | None = None


def _toy_options(**overrides: Flag) -> list[Option]:
    flags = {
        "speed": Flag("--speed", "Speed.", "Toys", default=True),
        "mode": Flag("--mode", "Mode."),
        "on": Flag("--on", "On."),
        "tags": Flag("--tags", "Tags."),
        "path": Flag("--path", "Path.", aliases=("--file",)),
        **overrides,
    }
    return [Option(_Toy, field, flag.name, flag) for field, flag in flags.items()]


def test_an_option_takes_its_type_choices_panel_and_default_from_the_field():
    seen: dict = {}

    def toy(ctx: typer.Context, own: int = 0) -> None:
        seen.update(ctx.params, own_arg=own)

    app_ = typer.Typer()
    app_.command()(FlagCommand(toy, _toy_options()))
    result = CliRunner().invoke(app_, ["--help"], env=ENV)
    assert result.exit_code == 0, result.output
    assert "[a|b]" in result.output  # a Literal's choices
    assert "[default: 1.5]" in result.output and "Toys" in result.output
    assert "--no-on" in result.output and "--file" in result.output
    result = CliRunner().invoke(
        app_, ["--own", "3", "--speed", "2", "--mode", "b", "--on", "--tags", "1,2", "--file", "x"]
    )
    assert result.exit_code == 0, result.output
    # the function gets its own parameter; the flags' values are in ctx.params, None where not given
    assert seen == {"own": 3, "speed": 2.0, "mode": "b", "on": True, "tags": "1,2", "path": Path("x"), "own_arg": 3}
    CliRunner().invoke(app_, [])
    assert seen["speed"] is None and seen["on"] is None


def test_flagged_hands_back_the_plain_values_given_by_field():
    found = _toy_options()
    a = {"speed": 2.0, "mode": None, "on": False, "tags": "1,2", "path": None}
    # tags is text the command parses (a list field); None is "not given"; False is given
    assert given_fields(found, a) == {"speed": 2.0, "on": False}
    assert flagged(StopConfig, {"duration": 5.0, "warmup": None, "drain_timeout": 1.0}) == {
        "duration_s": 5.0,
        "drain_timeout_s": 1.0,
    }


def test_a_field_set_by_another_fields_flag_is_named_by_it():
    assert [(o.field, o.name, o.flag) for o in options(UsersLoad)] == [
        ("users", "--users", None),
        ("ramp_up_s", "--ramp-up", None),
        ("think_time_s", "--think-time", None),
    ]
    assert RUN_FLAGS["UsersLoad.users"] == "--users" and RUN_FLAGS["RateLoad.rate_per_s"] == "--rate"
    assert RUN_FLAGS["LoadSweep"] == "--users/--rate"  # a whole-sweep error
    assert RUN_FLAGS["TargetConfig.request_timeout_s"] == "--request-timeout"
    assert flag_of(_toy_options()) == {f"_Toy.{f}": f"--{f}" for f in ("speed", "mode", "on", "tags", "path")}


def test_each_flag_is_declared_once():
    names = [n for o in run_options() for n in (o.name, *(o.flag.aliases if o.flag else ()))]
    assert len(names) == len(set(names))
    # and every settings field SetBy names a flag that is declared
    setters = {o.name for m in (UsersLoad,) for o in options(m)}
    assert setters <= set(names)


def test_run_takes_every_declared_flag_and_help_shows_choices():
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    run = {o for p in commands["run"].params for o in p.opts}
    assert {n for o in run_options() for n in (o.name, *(o.flag.aliases if o.flag else ()))} <= run
    result = CliRunner().invoke(app, ["run", "--help", "all"], env=ENV)
    assert result.exit_code == 0, result.output
    output = re.sub(r"\|\n +", "|", result.output)  # a long list of choices goes on after a |
    for choice in (
        "[chat|messages|responses|completions|tgi|triton|ollama|embeddings|rerank|score]",
        "[synthetic|sharegpt|dolly|jsonl|trace|programs]",
        "[reset|keep]",
    ):
        assert choice in output
    for panel in ("Engine", "Trace replay", "Shared prefixes", "Sessions", "Cost", "Scale-out"):
        assert panel in result.output


def test_dash_h_is_help_everywhere_and_version_is_the_package_metadata():
    from importlib.metadata import version

    for args in (["-h"], ["run", "-h"], ["capacity", "-h"], ["backends", "show", "-h"], ["experiment", "run", "-h"]):
        result = CliRunner().invoke(app, args, env=ENV)
        assert result.exit_code == 0, (args, result.output)
        assert "Usage:" in result.output
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output == f"tokenbench {version('tokenbench')}\n"
    assert __version__ == version("tokenbench")


def test_a_new_flag_is_its_field_alone():
    """What adding a flag takes: a Flag on the field. The option, its value as the field's and the
    flag named in an error all follow from it (here a model made up for the test)."""

    class Extra(BaseModel):
        budget_s: float = Field(default=1.0, gt=0)

    found = [Option(Extra, "budget_s", "--budget", Flag("--budget", "Budget."))]
    assert found[0].param == "budget" and found[0].plain
    assert given_fields(found, {"budget": 2.0}) == {"budget_s": 2.0}
    assert flag_of(found) == {"Extra.budget_s": "--budget"}
    # the settings' own flags are read the same way, from the fields' annotations
    assert [o.name for o in options(DatasetConfig)][:2] == ["--dataset", "--dataset-path"]
    assert isinstance(TargetConfig.model_fields["model"].metadata[0], Flag)
    assert [m for m in RunConfig.model_fields["seed"].metadata if isinstance(m, (Flag, SetBy))][0].name == "--seed"


def test_default_reads_the_settings_model_and_survives_rich_markup():
    assert default(StopConfig, "max_requests") == f" \\[default: {StopConfig.model_fields['max_requests'].default}]"
    assert default(EngineKnobs, "max_num_seqs") == " \\[default: None]"
    # the help is rich markup: unescaped, "[default: 1.0]" was read as a tag and vanished
    from rich.console import Console
    from rich.text import Text

    console = Console(file=None, width=200, record=True)
    console.print(Text.from_markup("speed." + default(ReplayLoad, "speed")))
    assert console.export_text().strip() == "speed. [default: 1.0]"
