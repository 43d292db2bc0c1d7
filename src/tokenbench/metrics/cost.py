"""A point's cost per million tokens from its price per hour (--cost-per-hour, --gpus) and its throughput."""

from __future__ import annotations

from tokenbench.config.cost import CostConfig
from tokenbench.results.cost import Cost

SECONDS_PER_HOUR = 3600.0
PER_MILLION = 1e6


def usd_per_million(usd_per_hour: float, tokens_per_s: float | None) -> float | None:
    """Dollars per million tokens at ``tokens_per_s``; None without a throughput (nothing
    measured): never 0 and never infinite."""
    if not tokens_per_s:
        return None
    return usd_per_hour / SECONDS_PER_HOUR / tokens_per_s * PER_MILLION


def point_cost(
    price: CostConfig,
    output_tokens_per_s: float | None,
    total_tokens_per_s: float | None,
    replica_seconds: float | None = None,
) -> Cost:
    """A point's ``cost``: the price and what its throughput costs per million tokens; with an
    autoscaler's replica-seconds (None: no replica timeline), what that replica time cost at the
    price per replica."""
    return Cost(
        usd_per_gpu_hour=price.usd_per_gpu_hour,
        gpus=price.gpus,
        usd_per_hour=price.usd_per_hour,
        usd_per_million_output_tokens=usd_per_million(price.usd_per_hour, output_tokens_per_s),
        usd_per_million_total_tokens=usd_per_million(price.usd_per_hour, total_tokens_per_s),
        replica_seconds=replica_seconds,
        usd_for_replica_seconds=replica_seconds / SECONDS_PER_HOUR * price.usd_per_hour
        if replica_seconds is not None
        else None,
    )
