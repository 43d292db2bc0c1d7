"""cli/help.py: every command's --help reads at 80 columns (nothing cut, each option's help a
paragraph of a few lines at nearly the full width), run's options all in groups, --help GROUP
and --help all; fractions typed as 0.02 or 2% (common/units.py, cli/flags.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from tokenbench.cli import app
from tokenbench.cli.flags import run_options
from tokenbench.cli.help import HELP_INDENT, NAME_INDENT, GroupedCommand, find_groups, reflow
from tokenbench.cli.vllm_flags import aliases
from tokenbench.common.units import parse_fraction
from tokenbench.config.flags import DATASET, GROUPS, LOAD, OUTPUT, RUN_FILE, STOPPING, TARGET, VLLM
from tokenbench.errors import BadInput

NARROW = {"COLUMNS": "80"}
MAX_HELP_LINES = 4  # an option's help, wrapped at 80 columns
MIN_HELP_WIDTH = 40  # the columns an option's help is given at 80
ROOT = typer.main.get_command(app)
RUN = ROOT.commands["run"]  # type: ignore[attr-defined]
RUN_GROUPS = [g for g in GROUPS if g == VLLM or any(o.flag and o.flag.panel == g for o in run_options())]


def _commands(command: Any = ROOT, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def _help(*args: str, env: dict[str, str] = NARROW) -> str:
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result.output


def _helps() -> Iterator[tuple[str, ...]]:
    """Every command's --help, every group of run's and --help all."""
    for path, command in _commands():
        yield (*path, "--help")
        if isinstance(command, GroupedCommand):
            yield (*path, "--help", "all")
    yield from (("run", "--help", group) for group in RUN_GROUPS)


def _option_help_lines(text: str) -> dict[str, list[str]]:
    """A grouped --help's options -> the lines of each one's help (its lines at HELP_INDENT)."""
    found: dict[str, list[str]] = {}
    name = ""
    for line in text.splitlines():
        if re.match(rf"^ {{{NAME_INDENT}}}\S", line):
            name = line.split()[0].rstrip(",")
            found[name] = []
        elif name and re.match(rf"^ {{{HELP_INDENT}}}\S", line):
            found[name].append(line[HELP_INDENT:])
        elif not line.startswith(" " * NAME_INDENT):
            name = ""
    return found


@pytest.mark.parametrize("args", list(_helps()), ids=" ".join)
def test_every_help_reads_at_80_columns(args):
    text = _help(*args)
    lines = text.splitlines()
    assert not [line for line in lines if line.rstrip().endswith("…")], "a line is cut"
    assert max(len(line) for line in lines) <= 80
    if "Commands" in text:  # a group's: Typer's panels of commands
        return
    assert not [line for line in lines if line != line.rstrip()], "trailing blanks"
    help_lines = _option_help_lines(text)
    assert help_lines, text
    long = {name: len(h) for name, h in help_lines.items() if len(h) > MAX_HELP_LINES}
    assert not long, f"help longer than {MAX_HELP_LINES} lines at 80 columns: {long}"
    # a help that wraps was given the width: its first line is long
    narrow = {name: h[0] for name, h in help_lines.items() if len(h) > 1 and len(h[0]) < MIN_HELP_WIDTH}
    assert not narrow, f"help wrapped narrower than {MIN_HELP_WIDTH} columns: {narrow}"


def test_the_known_cut_lines_of_the_old_layout_are_whole():
    """The option column was ~52 wide: names were cut (--api,--endpoin…) and help got ~20 columns."""
    text = _help("run", "--help", "target")
    assert "--api, --endpoint-type [chat|messages|responses|completions|tgi|triton|" in text
    assert "  --request-timeout, --timeout DURATION\n" in text
    assert "      Seconds a whole request may take, from its send to the end of its stream;\n" in text


def test_every_run_option_belongs_to_a_group():
    assert not [o.name for o in run_options() if o.flag is None or o.flag.panel not in GROUPS]
    for param in RUN.params:
        if param.name != "help":
            assert getattr(param, "rich_help_panel", None) in GROUPS, param.opts


def test_run_help_shows_a_first_runs_groups_and_names_the_others():
    text = _help("run", "--help")
    headings = [line.split(" — ")[0].strip() for line in text.splitlines() if " — " in line and line[1] != " "]
    assert headings == [TARGET, LOAD, DATASET, STOPPING, OUTPUT, RUN_FILE]
    assert "--url" in text and "--engine-arg" not in text and "--turns" not in text
    more = " ".join(text[text.index("More options, by group:") :].split())
    for group in ("request kinds", "engine", "telemetry", "scale-out", "trace replay", "vllm bench's spellings"):
        assert group in more
    assert "`root run --help GROUP`" in more and "--help all" in more
    assert len(text.splitlines()) < len(_help("run", "--help", "all").splitlines()) / 2


def test_help_all_lists_every_option_and_every_vllm_name():
    text = _help("run", "--help", "all", env={"COLUMNS": "100"})
    names = {n.rstrip(",") for line in text.splitlines() if re.match(r"^  -", line) for n in line.split()}
    for option in run_options():
        assert option.flag is not None
        bool_form = "--[no-]" + option.name.removeprefix("--")
        assert option.name in names or bool_form in names, option.name
        assert set(option.flag.aliases) <= names
    ours = {o.name for o in run_options()}
    assert {n for n in aliases() if n not in ours} <= names
    for group in RUN_GROUPS:
        assert f"\n {group} — " in text


def test_help_group_takes_a_name_or_prefix_in_any_case():
    groups = RUN_GROUPS
    assert find_groups("ENGINE", groups) == ["Engine"]
    assert find_groups("eng", groups) == ["Engine"]
    assert find_groups("request-kinds", groups) == ["Request kinds"]
    assert find_groups("replay", groups) == ["Trace replay"]  # a word of the name
    assert find_groups("st", groups) == ["Stopping"]
    assert find_groups("all", groups) == groups
    assert find_groups("nothing", groups) == []
    text = _help("run", "--help", "Sess")
    assert "--turns" in text and "--url" not in text
    assert _help("run", "--help=vllm") == _help("run", "-h", "vllm")
    assert "--request-rate" in _help("run", "--help", "vllm")


def test_a_command_without_groups_reads_help_then_its_argument_as_plain_help():
    assert _help("report", "--help", "runs/x") == _help("report", "--help")
    assert _help("backends", "show", "--help", "vllm") == _help("backends", "show", "--help")
    assert "--served-model-name" not in _help("backends", "show", "--help", "engine")


def test_an_unknown_group_is_one_line_naming_the_groups():
    result = CliRunner().invoke(app, ["run", "--help", "nonsense"], env={"COLUMNS": "400"})
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line and "'nonsense'" in line
    for group in ("target", "load", "engine", "vllm bench's spellings", "all"):
        assert group in line


def test_mock_help_lists_its_options_by_group():
    text = _help("mock", "--help")
    for heading in ("Replies — ", "Faults — ", "Scheduling — ", "Spans — ", "Engine figures — "):
        assert f"\n {heading}" in text
    assert text.index("Faults — ") < text.index("--fault-every") < text.index("Scheduling — ")
    assert "--max-streams" not in _help("mock", "--help", "faults")


def test_capacity_help_leads_with_the_search():
    text = _help("capacity", "--help")
    assert text.index("Capacity search — ") < text.index("Target — ")
    assert "--tolerance FRACTION" in text and "--engine-arg" not in text


def test_descriptions_are_paragraphs_and_version_takes_no_value():
    assert reflow("One line\nwrapped in source.\n\nA second\nparagraph.") == (
        "One line wrapped in source.\n\nA second paragraph."
    )
    assert reflow("Items:\n- one\n- two") == "Items:\n- one\n- two"
    run_help = _help("run", "--help", env={"COLUMNS": "100"})
    assert "exits with 130 or 143; a second signal\n exits at once" in run_help  # the source broke after "second"
    root = _help("--help", env={"COLUMNS": "200"})
    assert "objective of --slo: a saturating probe estimates the ceiling" in root
    version = next(line for line in root.splitlines() if "--version" in line)
    assert "<bool>" not in version
    assert _help("--version").startswith("tokenbench ")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_the_shells_script(shell):
    script = _help("completion", shell)
    assert "_TOKENBENCH_COMPLETE" in script and f"complete_{shell}" in script
    assert "--install-completion" in _help("--help")


def test_completion_offers_an_options_choices():
    env = {"_TOKENBENCH_COMPLETE": "complete_bash", "COMP_WORDS": "tokenbench run --dataset sh", "COMP_CWORD": "3"}
    result = CliRunner().invoke(app, [], env=env, prog_name="tokenbench")
    assert result.output.split() == ["sharegpt"]


def test_a_fraction_is_a_number_or_a_percentage():
    assert parse_fraction("0.02") == 0.02
    assert parse_fraction("2%") == pytest.approx(0.02)
    assert parse_fraction(" 90 % ") == pytest.approx(0.9)
    assert parse_fraction(".5") == 0.5
    for bad in ("", "two", "2%%", "0.02s", "-1%"):
        with pytest.raises(BadInput, match="0.02 or as 2%"):
            parse_fraction(bad)


def test_a_fraction_flag_takes_both_forms_and_names_itself_when_wrong(monkeypatch):
    from tokenbench.cli import run as run_cli

    seen: list = []
    monkeypatch.setattr(run_cli, "_benchmark", seen.append)
    base = ["run", "--url", "http://127.0.0.1:1", "--duration", "auto", "--model", "m"]
    for value, expected in (("2%", 0.02), ("0.02", 0.02), ("0.5%", 0.005)):
        result = CliRunner().invoke(app, [*base, "--precision", value])
        assert result.exit_code == 0, result.output
        assert seen[-1].stop.precision == pytest.approx(expected)
    for value in ("90%", "0.9"):  # the engine's flag: vLLM's --gpu-memory-utilization
        shown = _help("backends", "show", "vllm", "--kv-memory", value)
        assert "--gpu-memory-utilization 0.9" in shown
    result = CliRunner().invoke(app, [*base, "--precision", "two"], env={"COLUMNS": "400"})
    assert result.exit_code == 2
    assert "'--precision'" in result.output and "0.02 or as 2%" in result.output
    result = CliRunner().invoke(app, [*base, "--precision", "150%"], env={"COLUMNS": "400"})
    assert result.exit_code == 2 and "--precision" in result.output


def test_capacity_tolerance_and_error_objective_take_percentages():
    from tokenbench.capacity import parse_objectives
    from tokenbench.capacity.plan import CapacitySettings

    assert CapacitySettings(tolerance="5%").tolerance == pytest.approx(0.05)
    assert CapacitySettings(tolerance=0.05).tolerance == 0.05
    (errors,) = parse_objectives("errors<=1%")
    assert errors.limit == pytest.approx(0.01)
    (errors,) = parse_objectives("errors<=0.01")
    assert errors.limit == pytest.approx(0.01)
