"""The commands' options, built from the settings' own flags: a config field that the command
line sets says so once (``Flag`` in its annotation, tokenbench/config/flags.py), and from that one
declaration come the option (name, type, choices, help, panel, default shown), its value back
as the field's (``flagged``) and the flag named in a validation error (``flag_of``).

`run` takes every flag of ``RUN_MODELS``; `capacity` the same but the load values and the
trace's (cli/capacity.py), plus its own; `backends show` the engine's; `mock` MockSettings'
(cli/tools.py). A command is a function that reads the values from ``ctx.params``;
``FlagCommand`` gives Typer its signature: the function's own parameters, then one keyword per
flag.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from tokenbench.config import (
    BackendConfig,
    DatasetConfig,
    EngineKnobs,
    LoadSweep,
    RateLoad,
    ReplayLoad,
    RunConfig,
    SessionConfig,
    StopConfig,
    TargetConfig,
    UsersLoad,
    WorkersConfig,
)
from tokenbench.config.cost import CostConfig
from tokenbench.config.flags import Flag, SetBy

AUTO = "auto"  # the value of a duration option that takes it (Flag.auto): the tool decides
Params = Mapping[str, Any]  # a command's values by parameter name (ctx.params); None: not given

# The settings `run` takes flags for, in the order --help lists them (panels in first-seen order).
RUN_MODELS: tuple[type[BaseModel], ...] = (
    TargetConfig,
    LoadSweep,
    StopConfig,
    DatasetConfig,
    RunConfig,
    BackendConfig,
    EngineKnobs,
    ReplayLoad,
    SessionConfig,
    CostConfig,
    WorkersConfig,
)
# Settings whose fields are set from another model's flag (SetBy): named in their errors only.
NAMED_MODELS: tuple[type[BaseModel], ...] = (UsersLoad, RateLoad)

_PLAIN = (bool, int, float, str, Path)


@dataclass(frozen=True)
class Option:
    """A settings field and the flag that sets it (``flag`` None: SetBy another field's flag)."""

    model: type[BaseModel]
    field: str
    name: str  # --the-flag
    flag: Flag | None = None

    @property
    def param(self) -> str:
        """The parameter's name in ``ctx.params``: the flag's, with underscores."""
        return self.name.removeprefix("--").replace("-", "_")

    @property
    def info(self) -> FieldInfo:
        return self.model.model_fields[self.field]

    @property
    def plain(self) -> bool:
        """The option's value is the field's (a number, text, path, choice or switch); otherwise the
        command parses its text into the field (a list, a mapping, a model)."""
        if self.flag is not None and (self.flag.repeat or self.flag.switch):
            return False
        bare = _bare(self.info.annotation)
        return bare in _PLAIN or get_origin(bare) is Literal

    @property
    def duration(self) -> bool:
        """A number of seconds (a ``*_s`` float field): the option takes a duration with its unit,
        ``500ms``, ``5s``, ``2m``, or a plain number of seconds (units.parse_duration_s)."""
        return self.field.endswith("_s") and _bare(self.info.annotation) is float

    @property
    def fraction(self) -> bool:
        """A share of a whole (a float field at most 1: --precision, --kv-memory, --tolerance): the
        option takes ``0.02`` or ``2%`` (units.parse_fraction)."""
        if _bare(self.info.annotation) is not float:
            return False
        bounds = [getattr(m, "le", None) for m in self.info.metadata] + [
            getattr(m, "lt", None) for m in self.info.metadata
        ]
        return any(b is not None and b <= 1 for b in bounds)

    def _default_text(self) -> str:
        assert self.flag is not None
        if self.flag.default is False:
            return ""
        return default(self.model, self.field) if self.flag.default is True else f" \\[default: {self.flag.default}]"

    def parameter(self) -> inspect.Parameter:
        """The option as Typer reads it from a signature: ``Annotated[T | None, typer.Option(...)] = None``."""
        assert self.flag is not None
        flag = self.flag
        bare = _bare(self.info.annotation)
        switch = flag.switch or bare is bool
        decls = [f"{flag.name}/--no-{flag.name.removeprefix('--')}" if switch else flag.name, *flag.aliases]
        value: Any = bool if switch else bare if bare in _PLAIN else str
        if flag.repeat:
            value = list[str]
        if self.duration or self.fraction:
            parse: Callable[[str], float | str] = _fraction if self.fraction else _duration
            metavar = "FRACTION" if self.fraction else "DURATION"
            if flag.auto:
                metavar, parse = "DURATION|auto", _duration_or_auto
            option = typer.Option(
                *decls,
                help=flag.help + (" Written 0.02 or 2%." if self.fraction else "") + self._default_text(),
                rich_help_panel=flag.panel,
                metavar=metavar,
                parser=parse,
                autocompletion=_words(AUTO) if flag.auto else None,
            )
            return inspect.Parameter(
                self.param, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[float | None, option]
            )
        literal = get_origin(bare) is Literal
        option = typer.Option(
            *decls,
            help=flag.help + self._default_text(),
            rich_help_panel=flag.panel,
            metavar=choices(bare) if literal else _metavar(bare, flag),
            autocompletion=_words(*map(str, get_args(bare))) if literal else None,
        )
        annotation = Annotated[value | None, option]
        return inspect.Parameter(self.param, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)


def _duration(text: str) -> float:
    """A duration option's text -> seconds; click names the option in the error (exit 2)."""
    from tokenbench.common.units import parse_duration_s

    try:
        return parse_duration_s(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _fraction(text: str) -> float:
    """A fraction option's text (``0.02`` or ``2%``) -> the fraction; click names the option in the error (exit 2)."""
    from tokenbench.common.units import parse_fraction

    try:
        return parse_fraction(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _words(*words: str) -> Callable[[str], list[str]]:
    """Shell completion of an option's value: the words it takes that start as typed."""
    return lambda incomplete: [w for w in words if w.startswith(incomplete)]


def _metavar(bare: Any, flag: Flag) -> str | None:
    """The value's name on the option's --help line: a list's ``LIST`` (comma-separated), a
    repeated option's ``TEXT``; None: the type's."""
    if get_origin(bare) is list and not flag.repeat:
        return "LIST"
    return None


def _duration_or_auto(text: str) -> float | str:
    """A duration, or the word ``auto`` (--duration auto, --warmup auto) as it is."""
    return AUTO if text.strip().lower() == AUTO else _duration(text)


def choices(literal: Any) -> str:
    """A Literal's values as an option's metavar, ``[a|b]``: --help shows them (the value is
    checked by the settings, whose error names the flag)."""
    return "[" + "|".join(map(str, get_args(literal))) + "]"


def _bare(annotation: Any) -> Any:
    """``T`` of ``T | None``."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def default(model: type[BaseModel], field: str) -> str:
    """`` [default: X]`` for an option's help, read from the settings model that holds it (escaped:
    rich would read [..] as markup)."""
    return f" \\[default: {model.model_fields[field].default}]"


def options(model: type[BaseModel]) -> list[Option]:
    """The model's fields set by a flag, its own (Flag) and another's (SetBy), in field order."""
    found = []
    for field, info in model.model_fields.items():
        for meta in info.metadata:
            if isinstance(meta, Flag):
                found.append(Option(model, field, meta.name, meta))
            elif isinstance(meta, SetBy):
                found.append(Option(model, field, meta.name))
    return found


def declared(models: Iterable[type[BaseModel]]) -> list[Option]:
    """The options the models declare (each flag once: SetBy fields are not options)."""
    return [o for model in models for o in options(model) if o.flag is not None]


def run_options() -> list[Option]:
    return declared(RUN_MODELS)


def given_fields(found: Iterable[Option], a: Params) -> dict[str, Any]:
    """The plain options given (not None), by their fields' names."""
    return {o.field: a[o.param] for o in found if o.plain and a.get(o.param) is not None}


def flagged(model: type[BaseModel], a: Params) -> dict[str, Any]:
    """The model's fields the flags given set as they are (a plain flag's value is its field's);
    the command adds the ones it parses. Pass them on: every other field keeps its default."""
    return given_fields(options(model), a)


def flag_names(model: type[BaseModel], fields: Iterable[str]) -> list[str]:
    """The flags that set these fields of the model."""
    by_field = {o.field: o.name for o in options(model)}
    return [by_field[f] for f in fields]


def flag_of(found: Iterable[Option]) -> dict[str, str]:
    """``Model.field`` (and ``Model`` for a whole-model error) -> the flag to name in an error."""
    named = {f"{o.model.__name__}.{o.field}": o.name for o in found}
    for model in {o.model for o in found}:
        whole = getattr(model, "FLAGS", None)
        if isinstance(whole, str):
            named[model.__name__] = whole
    return named


RUN_FLAGS = flag_of([o for model in (*RUN_MODELS, *NAMED_MODELS) for o in options(model)])


class FlagCommand:
    """A command function with options built from flags after its own parameters. Typer reads
    ``__signature__`` and calls this with every value; the function gets its own parameters and
    reads the flags' values from ``ctx.params`` (by ``Option.param``). ``name``: the function's
    name for Typer (the command's name, where the command is registered without one)."""

    def __init__(
        self,
        function: Callable[..., None],
        found: Sequence[Option],
        extra: Sequence[inspect.Parameter] = (),
        name: str | None = None,
    ) -> None:
        own = inspect.signature(function, eval_str=True)
        self._function = function
        self._own = set(own.parameters)
        params = [*own.parameters.values(), *(o.parameter() for o in found), *extra]
        self.__signature__ = own.replace(parameters=params)
        self.__name__ = name or function.__name__
        self.__doc__ = function.__doc__
        self.__annotations__: dict[str, Any] = {}  # typing.get_type_hints: the signature holds the types

    def __call__(self, **values: Any) -> None:
        self._function(**{k: v for k, v in values.items() if k in self._own})
