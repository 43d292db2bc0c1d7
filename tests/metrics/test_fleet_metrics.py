"""A fleet's figures from hand-built records and counters: each replica's requests and TTFT as a
group's, the imbalance by its formula over the first basis every replica has, and none for a
single server."""

import math

import pytest
from metric_records import rec

from tokenbench.config.slo import SLOConfig
from tokenbench.metrics.fleet import fleet_stats
from tokenbench.records import Served
from tokenbench.results import Server

A, B = "127.0.0.1:8001", "127.0.0.1:8002"


def _served(i: int, replica: str | None, ttft_s: float):
    r = rec(i, sent=float(i), ttft=ttft_s, n_chunks=4, itl=0.01)
    r.served = Served(replica, "header") if replica else None
    return r


def _server(**counts) -> Server:
    fields = {k: None for k in Server.model_fields if k not in ("speculation", "client_ttft_s_matched")}
    fields.update(period_s=[0.0, 10.0], scrapes=3, failed_scrapes=0, bracketed=True, **counts)
    return Server(**fields)


def test_each_replica_gets_its_records_and_the_imbalance_is_over_them():
    # 3 records served by A at 20 ms TTFT, 1 by B at 80 ms
    population = [_served(0, A, 0.02), _served(1, A, 0.02), _served(2, B, 0.08), _served(3, A, 0.02)]
    fleet = fleet_stats(population, [A, B], {A: 3.0, B: 1.0}, {}, 10.0, SLOConfig(ttft_s=0.05))
    assert fleet is not None and [r.replica for r in fleet.replicas] == [A, B]
    a, b = fleet.replicas
    assert (a.requests.requests, b.requests.requests) == (3, 1)
    assert a.requests.ttft_s.p50 == pytest.approx(0.02) and b.requests.ttft_s.p50 == pytest.approx(0.08)
    assert a.requests.good_fraction == 1.0 and b.requests.good_fraction == 0.0  # the run's SLO, per replica
    assert a.requests.requests_per_s == pytest.approx(0.3) and a.routed_requests == 3.0
    assert (fleet.attributed, fleet.unattributed, fleet.attributed_from) == (4, 0, "header")
    assert fleet.imbalance_over == "requests"
    assert fleet.imbalance_max_over_mean == pytest.approx(3 / 2)  # max 3 over a mean of 2
    assert fleet.imbalance_cv == pytest.approx(math.sqrt(((3 - 2) ** 2 + (1 - 2) ** 2) / 2) / 2)


def test_without_every_record_named_the_router_counts_then_the_replicas_counters():
    population = [_served(0, None, 0.02), _served(1, None, 0.02)]
    routed = fleet_stats(population, [A, B], {A: 1.0, B: 1.0}, {}, 10.0, SLOConfig())
    assert routed.imbalance_over == "routed_requests" and routed.imbalance_max_over_mean == 1.0
    assert routed.attributed == 0 and routed.attributed_from is None
    assert all(r.requests is None for r in routed.replicas)
    servers = {A: _server(generated_tokens=300.0), B: _server(generated_tokens=100.0)}
    counted = fleet_stats(population, [A, B], {}, servers, 10.0, SLOConfig())
    assert counted.imbalance_over == "generated_tokens"
    assert counted.imbalance_max_over_mean == pytest.approx(1.5)
    assert counted.replicas[0].server.generated_tokens == 300.0
    unknown = fleet_stats(population, [A, B], {}, {}, 10.0, SLOConfig())
    assert unknown.imbalance_over is None and unknown.imbalance_max_over_mean is None


def test_a_single_server_has_no_fleet_and_a_record_can_name_an_unscraped_replica():
    assert fleet_stats([_served(0, None, 0.02)], [], {}, {}, 10.0, SLOConfig()) is None
    fleet = fleet_stats([_served(0, B, 0.02)], [], {}, {}, 10.0, SLOConfig())
    assert [r.replica for r in fleet.replicas] == [B] and fleet.replicas[0].server is None


def test_a_replicas_hit_rate_from_its_computed_prompt_tokens():
    """llama.cpp counts the prompt tokens it found cached and those it computed (not those looked up)."""
    servers = {A: _server(prefix_cache_hits=24.0, prompt_tokens_computed=26.0), B: _server(prefix_cache_hits=0.0)}
    fleet = fleet_stats([_served(0, A, 0.02)], [A, B], {}, servers, 10.0, SLOConfig())
    assert fleet.replicas[0].prefix_cache_hit_rate == pytest.approx(24 / 50)
    assert fleet.replicas[1].prefix_cache_hit_rate is None  # neither queries nor computed: unknown
