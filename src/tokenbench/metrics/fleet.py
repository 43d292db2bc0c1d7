"""A fleet over a point: each replica's requests, its router's counts and its own counters, and
the load imbalance across replicas (results.FleetStats). Pure.

Population: the point's window population. A record names the replica that served it where the
stack said: records' ``Served`` (a router's or proxy's response header), else its span's resource
``service.instance.id`` through the span join (--server-traces); each replica's group
figures are over the records naming it, as a group's are (metrics/groups.py: latencies over its
successful requests, rates over the point's rate period, goodput against the run's SLO). The
router's counts and the replicas' own counters are increases over the window's scrapes
(telemetry/summary.py), so they count the requests the server side saw in the window, which can
differ by the requests in flight at its edges.

Imbalance, over the first basis every replica has: the records' replicas (when every record
named one), the router's per-replica counts, the replicas' generated tokens, their finished
requests. ``max_over_mean`` = max_i x_i / mean x (1 even, N when one of N took all);
``cv`` = stdev x / mean x (population standard deviation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from tokenbench.config.slo import SLOConfig
from tokenbench.metrics.groups import group_stats
from tokenbench.records import RequestRecord
from tokenbench.results import Server
from tokenbench.results.run import FleetStats, ImbalanceBasis, ReplicaStats

# a record's key in the span join, (point, worker, id), to the replica its span's resource named
SpanReplicas = Mapping[tuple[int, int | None, int], str]


def replica_of(record: RequestRecord, from_spans: SpanReplicas) -> tuple[str | None, str | None]:
    """The replica that served ``record`` and where that was read: its response header, else its
    span's resource (the span join), else (None, None)."""
    if record.served is not None and record.served.replica:
        return record.served.replica, record.served.replica_from
    named = from_spans.get((record.point, record.worker, record.id))
    return (named, "span") if named else (None, None)


def fleet_stats(
    population: Sequence[RequestRecord],
    replicas: Sequence[str],
    routed: Mapping[str, float | None],
    servers: Mapping[str, Server | None],
    period_s: float | None,
    slo: SLOConfig,
    from_spans: SpanReplicas | None = None,
) -> FleetStats | None:
    """The fleet's figures over the window; None for a single server (no replica scraped or
    named). ``replicas``: the names scraped (in order); any other a record names is added.
    ``from_spans``: the replicas the joined spans named (a record without a header's)."""
    read = [replica_of(r, from_spans or {}) for r in population]
    named = [name for name, _ in read]
    names = list(dict.fromkeys([*replicas, *sorted({n for n in named if n is not None})]))
    if not names:
        return None
    by: dict[str, list[RequestRecord]] = {n: [] for n in names}
    for r, name in zip(population, named, strict=True):
        if name is not None:
            by[name].append(r)
    attributed = sum(1 for n in named if n is not None)
    total = len(population)
    rows = [
        ReplicaStats(
            replica=name,
            requests=group_stats(by[name], total, period_s, lambda _: slo, slo) if attributed else None,
            routed_requests=routed.get(name),
            server=servers.get(name),
            prefix_cache_hit_rate=_hit_rate(servers.get(name)),
        )
        for name in names
    ]
    sources = {source for _, source in read if source is not None}
    basis, values = _imbalance_basis(rows, attributed == total and total > 0)
    return FleetStats(
        replicas=rows,
        attributed=attributed,
        unattributed=total - attributed,
        attributed_from=sources.pop() if len(sources) == 1 else ("mixed" if sources else None),
        imbalance_over=basis,
        imbalance_max_over_mean=_max_over_mean(values),
        imbalance_cv=_cv(values),
    )


def _imbalance_basis(
    rows: Sequence[ReplicaStats], every_record_named: bool
) -> tuple[ImbalanceBasis | None, list[float] | None]:
    """The first basis every replica has a figure for, and the figures."""
    if every_record_named:
        return "requests", [float(r.requests.requests) if r.requests else 0.0 for r in rows]
    counted: dict[ImbalanceBasis, list[float | None]] = {
        "routed_requests": [r.routed_requests for r in rows],
        "generated_tokens": [r.server.generated_tokens if r.server else None for r in rows],
        "requests_finished": [r.server.requests_finished if r.server else None for r in rows],
    }
    for basis, values in counted.items():
        if all(v is not None for v in values):
            return basis, [float(v) for v in values if v is not None]
    return None, None


def _hit_rate(server: Server | None) -> float | None:
    """hits / queries, else hits / (hits + computed) (an engine counting the prompt tokens it
    computed rather than those it looked up: llama.cpp)."""
    if server is None or server.prefix_cache_hits is None:
        return None
    if server.prefix_cache_hit_rate is not None:
        return float(server.prefix_cache_hit_rate)
    if server.prompt_tokens_computed is not None and server.prefix_cache_hits + server.prompt_tokens_computed > 0:
        return float(server.prefix_cache_hits / (server.prefix_cache_hits + server.prompt_tokens_computed))
    return None


def _max_over_mean(values: list[float] | None) -> float | None:
    if not values or sum(values) <= 0:
        return None
    return max(values) / (sum(values) / len(values))


def _cv(values: list[float] | None) -> float | None:
    if not values or sum(values) <= 0:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) / mean
