"""``search:`` of an experiment file: a capacity search (tokenbench capacity) per cell instead of a
fixed ``load:`` list. Each (server configuration, variant) is one cell whose run directory holds
every probe as a point and capacity.json beside them.

Trials: the experiment's ``trials: N`` (or ``search.trials``) repeats each probed value N times
within one search (the verdict on the trial mean, the answer's figures with their 95 % CI), as
``tokenbench capacity --trials N`` does; it does not run N searches.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from tokenbench.capacity import CapacitySettings, ObjectiveError, parse_objectives
from tokenbench.common.frozen import FrozenModel
from tokenbench.config import RateLoad, UsersLoad
from tokenbench.results.capacity import Objective, Variable


class SearchSpec(FrozenModel):
    """The search's settings, named as tokenbench capacity's flags (docs/capacity.md)."""

    slo: str  # 'ttft:p90<=500ms,errors<=1%' (--slo's syntax)
    variable: Variable = "rate"
    arrival: Literal["constant", "poisson"] = "poisson"  # variable rate: the probes' arrivals
    tolerance: float = Field(default=0.05, gt=0, lt=1)
    trials: int | None = Field(default=None, ge=1)  # default: the experiment's trials
    max_probes: int = Field(default=8, gt=0)
    saturate_users: int = Field(default=32, gt=0)
    ramp_up_s: float = Field(default=0.0, ge=0)  # variable users: the probes' ramp

    @field_validator("slo")
    @classmethod
    def _slo(cls, v: str) -> str:
        try:
            parse_objectives(v)
        except ObjectiveError as exc:
            raise ValueError(str(exc).replace("--slo", "slo")) from None
        return v

    def objectives(self) -> list[Objective]:
        return parse_objectives(self.slo)

    def settings(self) -> CapacitySettings:
        return CapacitySettings(
            variable=self.variable,
            tolerance=self.tolerance,
            trials=self.trials or 1,
            max_probes=self.max_probes,
            saturate_users=self.saturate_users,
        )

    def template(self) -> RateLoad | UsersLoad:
        """The probed load (each probe replaces its rate or users)."""
        if self.variable == "users":
            return UsersLoad(users=1, ramp_up_s=self.ramp_up_s)
        return RateLoad(rate_per_s=1.0, arrival=self.arrival)
