"""The one base of tokenbench's typed settings and results (config, experiment files, results.json,
experiment.json, capacity.json): frozen, so a validated value never changes after it is checked,
and closed, so an unknown key (a misspelt YAML field, a key this version does not write) is an error
that names it, never silently dropped."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FrozenModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
