"""What every results type shares: the base model (frozen, unknown keys an error) and ``Number``
(an int stays an int, so JSON written through the types is the JSON computed)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

Number = int | float


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
