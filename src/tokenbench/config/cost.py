"""What the hardware under test costs: its price (``CostConfig``: --cost-per-hour, --gpus; per
backend in an experiment file) and a point's cost per million tokens at its throughput (pure).

The price is per GPU-hour, times the GPUs (cloud lists quote a GPU-hour, or an instance-hour: give
an instance's price with ``--gpus 1``, the default). Per million output tokens:
``usd_per_hour / 3600 / output_tokens_per_s x 1e6``, with the point's output tokens/s (its rate
population's output tokens over ``rate_period_s``, METRICS.md): what the hardware costs while it
sustains that throughput, the whole machine paid for the benchmark's load alone.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from tokenbench.common.frozen import FrozenModel
from tokenbench.config.flags import COST, Flag


class CostConfig(FrozenModel):
    """The hardware's price: ``usd_per_gpu_hour`` (--cost-per-hour) x ``gpus`` (--gpus)."""

    usd_per_gpu_hour: Annotated[
        float,
        Flag(
            "--cost-per-hour",
            "USD per GPU-hour of the server's hardware (an instance's price: with --gpus 1): each point's "
            "cost per million tokens at its throughput.",
            COST,
        ),
    ] = Field(gt=0)
    gpus: Annotated[int, Flag("--gpus", "GPUs --cost-per-hour pays for.", COST, default=True)] = Field(default=1, gt=0)

    @property
    def usd_per_hour(self) -> float:
        return self.usd_per_gpu_hour * self.gpus
