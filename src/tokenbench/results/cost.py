"""What a point cost and what energy it took: ``cost`` (the price given with --cost-per-hour and
--gpus, per million tokens at the point's throughput; cost.point_cost) and ``energy`` (the GPUs'
energy over the window, per output token; telemetry.energy.point_energy). docs/usage.md, "Cost and
energy", states the formulas."""

from __future__ import annotations

from typing import Literal

from tokenbench.common.frozen import FrozenModel
from tokenbench.results.base import Number, OptionalParts


class Cost(OptionalParts):
    """The hardware's price over a point: only on points of a run given a price (exclude_unset).

    ``usd_per_hour`` = ``usd_per_gpu_hour`` x ``gpus``; per million tokens =
    usd_per_hour / 3600 / (tokens/s) x 1e6, with the point's output (or total) tokens/s: the tokens
    of its rate population over ``rate_period_s`` (METRICS.md). None when the point has no such
    throughput (nothing measured): never 0, never infinite.

    Autoscaling (only a point with a replica timeline: results.scaling): the price is per replica,
    ``replica_seconds`` the point's RUNNING replicas integrated over its span (scaling's), and
    ``usd_for_replica_seconds`` = replica_seconds / 3600 x usd_per_hour: what the replicas the
    scaler ran cost over the point, whatever the load used of them."""

    usd_per_gpu_hour: Number
    gpus: int
    usd_per_hour: Number
    usd_per_million_output_tokens: Number | None
    usd_per_million_total_tokens: Number | None
    replica_seconds: Number | None = None
    usd_for_replica_seconds: Number | None = None


# nvml_total_energy: NVML's energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ since the
# driver loaded; Volta and later) read at each scrape; power_integral: where a GPU has no such
# counter, its power readings (nvmlDeviceGetPowerUsage) integrated by the trapezoid rule
EnergySource = Literal["nvml_total_energy", "power_integral"]


class Energy(FrozenModel):
    """Every GPU NVML sees, over the point's window (the client's), summed: energy per output token
    = mean power over the window / the point's output tokens/s (J/s over tok/s: J/token).

    ``available`` False: no GPU, or too few readings in the window; ``reason`` says which and every
    figure is None, never 0."""

    available: bool
    reason: str | None
    source: EnergySource | None
    gpus: int | None  # the GPUs counted: NVML sees every GPU of the machine, used or idle
    period_s: list[Number] | None  # what the readings cover: the window, or less when not bracketed
    joules: Number | None  # over period_s
    mean_power_w: Number | None  # joules / period_s's length
    joules_per_output_token: Number | None  # None also when the point has no output tokens/s
