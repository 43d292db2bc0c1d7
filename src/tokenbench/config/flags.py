"""How a settings field says which command-line option sets it (config/, capacity/plan.py, mock/settings.py): read by
cli/flags.py, which builds the commands' options from them and names the flag in an error. No
imports: every settings module can declare its flags with these."""

from __future__ import annotations

from dataclasses import dataclass

# Help panels of `tokenbench run --help` (None: the general "Options").
ENGINE = "Engine"
TRACE = "Trace replay"
PREFIXES = "Shared prefixes"
SESSIONS = "Sessions"
PROGRAMS = "Agent programs"
COST = "Cost"
SCALE = "Scale-out"
IMAGES = "Images"  # images
SEARCH = "Capacity search"  # `tokenbench capacity --help` (capacity/plan.py: CapacitySettings)


@dataclass(frozen=True)
class Flag:
    """The command-line option that sets this field: its name, help and help panel. The option's
    value type comes from the field (bool: ``--x/--no-x``; a Literal: its choices shown in
    --help); a list, dict or model field takes text the command parses (``repeat``: the option
    may be given several times). ``default``: True appends ``[default: <the field's default>]``
    to the help, a string appends that text. ``aliases``: other names of the same option."""

    name: str
    help: str
    panel: str | None = None
    default: bool | str = False
    repeat: bool = False
    aliases: tuple[str, ...] = ()
    switch: bool = False  # a --x/--no-x option for a field that is not a bool (--multi-turn: sessions)
    auto: bool = False  # a duration option that also takes the word ``auto`` (--duration, --warmup)


@dataclass(frozen=True)
class SetBy:
    """This field is set from another field's flag (named in its errors)."""

    name: str
