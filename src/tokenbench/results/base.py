"""``Number``, what every results type writes a measured number as: an int stays an int, so JSON
written through the types is the JSON computed. (Their base model is ``tokenbench.common.frozen.FrozenModel``;
``OptionalParts`` for a results type whose optional parts are absent where they have no value.)"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import ValidationInfo, model_validator

from tokenbench.common.frozen import FrozenModel

Number = int | float

AS_WRITTEN = "as_written"  # validation context: a file read, which keeps the keys it has


class OptionalParts(FrozenModel):
    """A results type whose optional parts (each field that defaults to None: what only some points
    or runs have) are absent where they have no value: a part built as None is left unset, so its
    JSON (``exclude_unset``) has no key for it, as for a part not given at all. So a point is built
    with every part by name, None where it has none. A file read (``AS_WRITTEN`` in the validation
    context: ``RunResults.from_json``) keeps the keys it has, null ones too."""

    @model_validator(mode="before")
    @classmethod
    def _none_is_absent(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict) or (info.context or {}).get(AS_WRITTEN):
            return data
        optional = _optional_parts(cls)
        return {key: value for key, value in data.items() if value is not None or key not in optional}


@cache
def _optional_parts(model: type[FrozenModel]) -> frozenset[str]:
    """The fields of ``model`` that default to None."""
    return frozenset(name for name, f in model.model_fields.items() if not f.is_required() and f.default is None)
