"""The run's settings as an experiment file writes them: a mapping of the file (the top level, a
backend entry, a variant) takes, beside its own keys, the fields of some of the run's settings
models (config/), under their own names, with their own types, constraints, defaults and field
checks. Nothing here restates a run setting: a field added to a run model is taken where its model
is.

A ``Layer`` is the settings one kind of mapping takes (``Fields`` of some run models, each bound
for a part of a cell's RunConfig); ``Layered`` is the base of such a mapping: its own fields are
declared on it, the settings are kept validated beside them (``settings()``: the run models'
values, by the file's keys). Checks across fields (``--prefix-groups`` with ``--prefix-tokens``)
are the run models' own, made on a cell's whole RunConfig (experiments/spec.py).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, ValidationInfo, create_model, field_validator, model_validator

from tokenbench.common.frozen import FrozenModel

# Where a run model's fields go in a cell's RunConfig: RunConfig's own fields, its target, its
# dataset, the server's BackendConfig, the hardware's price.
Into = Literal["run", "target", "dataset", "server", "cost"]
INTO: tuple[Into, ...] = get_args(Into)


@dataclass(frozen=True)
class Fields:
    """The fields of one run model a layer takes (all but ``leave_out``, or ``only`` these), each
    under its own name or the file's (``keys``: field -> key), bound for ``into``."""

    model: type[BaseModel]
    into: Into
    leave_out: frozenset[str] = frozenset()
    only: frozenset[str] | None = None
    keys: Mapping[str, str] = field(default_factory=dict)

    def taken(self) -> dict[str, str]:
        """Each field taken -> its key in the file."""
        return {
            name: self.keys.get(name, name)
            for name in self.model.model_fields
            if name not in self.leave_out and (self.only is None or name in self.only)
        }


class Layer:
    """The run settings one kind of mapping of the file takes, as one model (``model``). ``unset``:
    a setting not given (or given as null) is not set here, and the layer below decides (a variant
    over its experiment); otherwise each has the run model's default (the experiment's own level)."""

    def __init__(self, name: str, parts: tuple[Fields, ...], *, unset: bool) -> None:
        self.parts, self.unset = parts, unset
        self.model = settings_model(name, parts, unset=unset)
        self.routes = {key: (part.into, attr) for part in parts for attr, key in part.taken().items()}

    def validated(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The given settings as the run models' values (a bad value or an unknown key is an error
        naming it); with ``unset``, only those given."""
        settings = self.model.model_validate(given)
        values = {key: getattr(settings, key) for key in type(settings).model_fields}
        return {k: v for k, v in values.items() if v is not None} if self.unset else values

    def routed(self, settings: Mapping[str, Any]) -> dict[Into, dict[str, Any]]:
        """Settings by where they go, under the run models' own names."""
        out: dict[Into, dict[str, Any]] = {into: {} for into in INTO}
        for key, value in settings.items():
            into, attr = self.routes[key]
            out[into][attr] = value
        return out


def settings_model(name: str, parts: tuple[Fields, ...], *, unset: bool) -> type[FrozenModel]:
    """The settings ``parts`` name as one closed model: each field with its run model's type,
    constraints and field checks (a check across fields is its model's, on the whole); with
    ``unset``, each None unless given."""
    found: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    for part in parts:
        keys = part.taken()
        for field_name, key in keys.items():
            if key in found:
                raise TypeError(f"{name}: two run settings would be written {key!r}")
            info = copy.copy(part.model.model_fields[field_name])
            annotation: Any = info.annotation
            if unset:
                info.default, info.default_factory = None, None
                annotation = annotation | None
            found[key] = (annotation, info)
        for check_name, check in part.model.__pydantic_decorators__.field_validators.items():
            on = [keys[f] for f in check.info.fields if f in keys]
            mode = check.info.mode
            if not on:
                continue
            if mode not in ("before", "after"):
                raise TypeError(f"{part.model.__name__}.{check_name}: a {mode} field check is not taken over")
            checks[f"_{part.model.__name__}{check_name}"] = field_validator(*on, mode=mode)(_unless_none(check.func))
    return create_model(name, __base__=FrozenModel, __validators__=checks, **found)


def _unless_none(check: Callable[..., Any]) -> Callable[[Any, ValidationInfo], Any]:
    """A run model's field check, passing None by (in a layer: not set)."""
    with_info = len(inspect.signature(check).parameters) > 1

    def unless_none(value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return None
        return check(value, info) if with_info else check(value)

    return unless_none


class Layered(FrozenModel):
    """A mapping of the file: its own keys are its declared fields, every other key one of its
    ``LAYER``'s run settings, kept validated beside them (an unknown key is still an error naming
    it, under this mapping's place in the file)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    LAYER: ClassVar[Layer]

    @model_validator(mode="before")
    @classmethod
    def _settings(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = cls._given(data)
        own = {k: v for k, v in data.items() if k in cls.model_fields}
        return {**own, **cls.LAYER.validated({k: v for k, v in data.items() if k not in cls.model_fields})}

    @classmethod
    def _given(cls, data: dict[str, Any]) -> dict[str, Any]:
        """The mapping as given, before validation (a subclass may fill in what follows from it)."""
        return data

    def settings(self) -> dict[str, Any]:
        """The run settings this mapping gives (by the file's keys), as the run models' values."""
        return dict(self.model_extra or {})

    def routed(self) -> dict[Into, dict[str, Any]]:
        """The settings by where they go in a cell's RunConfig, under the run models' names."""
        return self.LAYER.routed(self.settings())
