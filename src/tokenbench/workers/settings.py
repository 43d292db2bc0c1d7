"""Where the load runs (``--workers``, ``--ray``, ``--ray-address``, ``--ray-cpus-per-worker``):
the run's settings for the workers package (its docstring says how they work)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class WorkersConfig(BaseModel):
    """Where the load runs: one process, ``count`` local worker processes (``--workers``), or
    ``count`` Ray actors (``--ray``, ``--ray-address``); one global schedule dealt (workers/)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    count: int = Field(default=1, ge=1, le=1024)
    ray: bool = False
    ray_address: str | None = None  # ADDR or "auto"; implies Ray
    cpus_per_worker: float = Field(default=1.0, ge=0)

    @property
    def on_ray(self) -> bool:
        return self.ray or self.ray_address is not None

    @property
    def distributed(self) -> bool:  # else the run's own process sends the load
        return self.count > 1 or self.on_ray
