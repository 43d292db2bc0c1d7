"""--help for the commands with many options, and the descriptions of every command.

A command's options come in groups (each flag names its own: ``Flag.panel``, config/flags.py;
an option of the command's own its ``rich_help_panel``), listed in ``GROUPS``' order. Each option
is its name line (``--[no-]x`` for a switch, then the value it takes) and under it, indented, its
help as a paragraph: the help gets the terminal's width whatever the length of the names, so
nothing is cut at 80 columns and a help of two sentences stays two or three lines.

``--help`` shows the groups a first run needs (``GroupedCommand.first``) and a line naming the
rest; ``--help GROUP`` (its name or a prefix of it or of a word of it, any case) shows one and
``--help all`` every one; a group it does not know is an error naming the groups (exit 2).

``reflow`` joins each paragraph of a docstring into one line: docstrings are wrapped in the
source, and the console wraps them again at its own width.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import typer
import typer.core
from rich.console import Console
from rich.text import Text

from tokenbench.config.flags import GROUPS

OPTIONS = "Options"  # an option that names no group
ARGUMENTS = "Arguments"
ALL = "all"  # --help all: every group
HELP_NAMES = ("-h", "--help")
_ARGUMENT = re.compile(r"\{[a-z_]+\}|\[[a-z_]+\]")  # an argument in Typer's usage line: {model}, [file]
MAX_WIDTH = 100  # wider, a paragraph is hard to read
NAME_INDENT = 2
HELP_INDENT = 6

# A value's name on an option's line when the option gives none (Typer's display type -> ours).
_METAVARS = {"<str>": "TEXT", "<int>": "INTEGER", "<float>": "NUMBER", "<path>": "PATH", "<list[str]>": "TEXT"}


def reflow(text: str | None) -> str | None:
    """Each paragraph of a docstring on one line (blank lines between paragraphs kept); a
    paragraph of a list (lines starting ``-`` or ``*``) or marked ``\\b`` keeps its lines."""
    if not text:
        return text
    paragraphs = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        lines = paragraph.splitlines()
        keep = paragraph.startswith("\b") or any(line.lstrip().startswith(("- ", "* ")) for line in lines)
        paragraphs.append(paragraph if keep else " ".join(line.strip() for line in lines))
    return "\n\n".join(paragraphs)


def reflow_all(command: Any) -> None:
    """``reflow`` the help of this command and of every command under it."""
    command.help = reflow(command.help)
    for sub in getattr(command, "commands", {}).values():
        reflow_all(sub)


@dataclass(frozen=True)
class Entry:
    """One option as --help shows it: its names (with the value it takes) and its help."""

    names: str
    help: Text


def _names(param: Any, ctx: Any) -> str:
    """``--x``, ``--[no-]x`` for a switch, aliases after a comma, then the value's name."""
    if isinstance(param, typer.core.TyperArgument):
        return str(param.metavar or param.name.upper()) + ("..." if param.nargs != 1 else "")
    longs = list(param.opts)
    secondary = list(param.secondary_opts)
    if len(secondary) == 1 and longs and secondary[0] == "--no-" + longs[0].removeprefix("--"):
        longs[0] = "--[no-]" + longs[0].removeprefix("--")
    else:
        longs += secondary
    names = ", ".join(sorted(longs, key=lambda n: (n.startswith("--"), 0)))
    if param.is_flag:
        return names
    value = param.display_type_rich(ctx=ctx) or ""
    return f"{names} {_METAVARS.get(value, value)}".rstrip()


def _help(param: Any) -> Text:
    """The option's help, then its default where Typer would show one, and whether it is required."""
    text = Text.from_markup(reflow(param.help) or "")
    default = getattr(param, "default", None)
    shown = getattr(param, "show_default", False)
    notes = []
    if shown and default not in (None, False, "", [], ()) and not callable(default) and not param.is_flag:
        notes.append(f"[default: {default}]")
    if param.required:
        notes.append("[required]")
    for note in notes:
        text.append((" " if text.plain else "") + note)
    return text


def entries(command: Any, ctx: Any) -> dict[str, list[Entry]]:
    """The command's options by group (the help option aside): its arguments, the groups a plain
    --help shows, the others in ``GROUPS``' order, groups it does not name, options of no group."""
    found: dict[str, list[Entry]] = {}
    help_option = command.get_help_option(ctx)
    for param in command.get_params(ctx):
        if param is help_option or getattr(param, "hidden", False):
            continue
        if isinstance(param, typer.core.TyperArgument):
            group = ARGUMENTS
        else:
            group = getattr(param, "rich_help_panel", None) or OPTIONS
        found.setdefault(group, []).append(Entry(_names(param, ctx), _help(param)))
    for group, rows in command.extra_groups().items():
        found.setdefault(group, []).extend(rows)
    first = command.first or ()
    order = [ARGUMENTS, *first, *(g for g in GROUPS if g not in first)]
    ranked = sorted(found, key=lambda g: order.index(g) if g in order else len(order) + (g == OPTIONS))
    return {g: found[g] for g in ranked}


def _plain(name: str) -> str:
    return " ".join(name.lower().replace("-", " ").replace("_", " ").split())


def find_groups(asked: str, groups: Sequence[str]) -> list[str]:
    """The groups ``--help ASKED`` names: ``all``, a group's name, or a prefix of its name or of a
    word of it (any case; ``-`` for a space). Empty: none."""
    want = _plain(asked)
    if want == ALL:
        return list(groups)
    exact = [g for g in groups if _plain(g) == want]
    starts = [g for g in groups if _plain(g).startswith(want)]
    words = [g for g in groups if any(w.startswith(want) for w in _plain(g).split())]
    return exact or starts or words


class GroupedCommand(typer.core.TyperCommand):
    """A command whose --help lists its options by group, each as a name line and its help under
    it; ``first``: the groups a plain --help shows (None: all)."""

    first: tuple[str, ...] | None = None

    def extra_groups(self) -> dict[str, list[Entry]]:
        """Groups of entries that are not options of the command (run: vllm bench's spellings)."""
        return {}

    def rewrite(self, args: list[str]) -> list[str]:
        """The arguments before they are parsed (run: vllm bench's names as tokenbench's)."""
        return args

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing:
            for i, arg in enumerate(args):
                name, eq, value = arg.partition("=")
                if name in HELP_NAMES:
                    following = args[i + 1] if i + 1 < len(args) else ""
                    asked = value if eq else ("" if following.startswith("-") else following)
                    self.print_help(ctx, asked or None)
                    ctx.exit(0)
                if arg == "--":
                    break
        return super().parse_args(ctx, self.rewrite(args))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """click's --help (and no_args_is_help) reach here: the first groups."""
        self.print_help(ctx, None)

    def print_help(self, ctx: Any, asked: str | None) -> None:
        from tokenbench.cli.common import fail

        console = Console(highlight=False)
        console.width = min(console.width, MAX_WIDTH)
        groups = entries(self, ctx)
        several = len(groups) > 1
        if not set(groups) - {ARGUMENTS, OPTIONS}:
            asked = None  # no groups to name: `report --help DIR` is the plain help
        groups.setdefault(OPTIONS, []).append(
            Entry(
                "-h, --help [GROUP|all]" if several else "-h, --help",
                Text(
                    "Show this help; GROUP: one group of options (a prefix will do), all: every one."
                    if several
                    else "Show this help."
                ),
            )
        )
        first = [g for g in groups if self.first is None or g in (*self.first, ARGUMENTS, OPTIONS)]
        shown = first if asked is None else find_groups(asked, list(groups))
        if not shown and ARGUMENTS in groups:  # `backends show --help vllm`: the word is its argument
            asked, shown = None, first
        if not shown:
            names = ", ".join(g.lower() for g in groups)
            fail(f"no group {asked!r} in `{ctx.command_path}`'s options; the groups: {names}, all", 2)
        usage = _ARGUMENT.sub(lambda m: m.group(0).upper().strip("{}"), self.get_usage(ctx).strip())
        _print_wrapped(console, Text(usage, "bold"), 1)
        if asked is None or asked.strip().lower() == ALL:
            for paragraph in (reflow(self.help) or "").split("\n\n"):
                console.print()
                _print_wrapped(console, Text(paragraph), 1)
        for group in shown:
            _print_group(console, group, groups[group])
        rest = [g for g in groups if g not in shown]
        if rest:
            console.print()
            _print_footer(console, ctx.command_path, rest)


def _print_wrapped(console: Console, text: Text, indent: int) -> None:
    """``text`` wrapped to the console's width less ``indent``, each line indented (no trailing blanks)."""
    for line in text.wrap(console, console.width - indent - 1, overflow="fold"):
        line.rstrip()
        console.print(Text(" " * indent) + line, overflow="fold", crop=False)


def _print_group(console: Console, group: str, rows: Iterable[Entry]) -> None:
    console.print()
    heading = Text(" " + group, "bold")
    if group in GROUPS:
        heading.append(f" — {GROUPS[group]}", "dim")
    console.print(heading)
    width = console.width
    for row in rows:
        for line in _name_lines(row.names, width - NAME_INDENT - 1):
            console.print(Text(" " * NAME_INDENT) + Text(line, "bold cyan"), overflow="fold")
        if row.help.plain:
            _print_wrapped(console, row.help, HELP_INDENT)


def _name_lines(names: str, width: int) -> list[str]:
    """An option's name line, broken after a ``|`` or a space when it is wider than ``width``
    (a long list of choices), the rest indented."""
    lines: list[str] = []
    rest = names
    while len(rest) > width:
        cut = max(rest.rfind("|", 0, width), rest.rfind(" ", 0, width))
        if cut <= 0:
            break
        lines.append(rest[: cut + 1].rstrip())
        rest = "  " + rest[cut + 1 :].lstrip()
    return [*lines, rest]


def _print_footer(console: Console, command: str, rest: Sequence[str]) -> None:
    """The groups not shown, and how to see them."""
    _print_wrapped(console, Text("More options, by group: " + ", ".join(g.lower() for g in rest) + "."), 1)
    _print_wrapped(
        console, Text(f"See a group with `{command} --help GROUP` (a prefix will do), every option with --help all."), 1
    )
