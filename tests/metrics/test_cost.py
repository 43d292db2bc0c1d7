"""cost.py: the price per GPU-hour x GPUs, a point's cost per million tokens at its throughput
(known answers; no throughput gives None, never 0 or infinity), and an autoscaled point's replica time."""

import pytest
from pydantic import ValidationError

from tokenbench.config.cost import CostConfig
from tokenbench.metrics.cost import point_cost, usd_per_million


def test_cost_per_million_tokens_known_answers():
    # $2.50 per GPU-hour x 4 GPUs = $10 an hour; at 1000 output tok/s an hour makes 3.6M tokens
    cost = point_cost(CostConfig(usd_per_gpu_hour=2.5, gpus=4), output_tokens_per_s=1000.0, total_tokens_per_s=4000.0)
    assert cost.model_dump(exclude_unset=True) == {  # no replica timeline: no replica time
        "usd_per_gpu_hour": 2.5,
        "gpus": 4,
        "usd_per_hour": 10.0,
        "usd_per_million_output_tokens": pytest.approx(10.0 / 3.6),
        "usd_per_million_total_tokens": pytest.approx(10.0 / 14.4),
    }


def test_an_autoscaled_points_replica_time_costs_the_price_per_replica():
    # 1.5 replicas on average over 2 minutes: 180 replica-seconds at $10 per replica-hour = $0.50
    cost = point_cost(CostConfig(usd_per_gpu_hour=2.5, gpus=4), 1000.0, 4000.0, replica_seconds=180.0)
    assert cost.replica_seconds == 180.0
    assert cost.usd_for_replica_seconds == pytest.approx(0.5)


def test_one_gpu_by_default_and_an_instance_price_is_given_with_one_gpu():
    price = CostConfig(usd_per_gpu_hour=32.77)  # e.g. an 8-GPU instance's hourly price
    assert (price.gpus, price.usd_per_hour) == (1, 32.77)
    assert usd_per_million(3.6, 1.0) == pytest.approx(1e6 / 1000)  # $3.6/h at 1 tok/s: $0.001 a token


@pytest.mark.parametrize("tokens_per_s", [None, 0.0])
def test_no_throughput_has_no_cost_per_token(tokens_per_s):
    cost = point_cost(CostConfig(usd_per_gpu_hour=1.0), tokens_per_s, tokens_per_s)
    assert cost.usd_per_million_output_tokens is None and cost.usd_per_million_total_tokens is None
    assert cost.usd_per_hour == 1.0  # the price itself is still stated


@pytest.mark.parametrize(
    "fields", [{"usd_per_gpu_hour": 0}, {"usd_per_gpu_hour": -1}, {"usd_per_gpu_hour": 1, "gpus": 0}]
)
def test_a_price_or_gpu_count_that_is_not_positive_is_refused(fields):
    with pytest.raises(ValidationError):
        CostConfig(**fields)
