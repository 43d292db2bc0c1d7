"""A point's requests by group: by LoRA adapter, by class, by tenant, and
Jain's fairness index across tenants.

Population: the point's window population (the records its own distributions read). Each group's
latency distributions are over its successful requests; its rates are its completed requests and
their output tokens over the point's rate period (``rate_period_s``, else the window), each
request counted whole; its goodput counts its requests that met every objective of their class's
SLO (the run's ``--slo`` for a request without a class SLO), and ``good_fraction`` is those over
its requests that ended (cancelled and never-sent ones are neither: METRICS.md's rule).

Fairness (across two or more tenants): Jain's index J = (sum x)^2 / (n * sum x^2) over the n
tenants. With objectives, x_t is tenant t's goodput divided by its share of the population's
requests (demand-normalised goodput: a tenant sending a third of the requests and getting a third
of the goodput is treated fairly); J is scale-free, so this is J over each tenant's fraction of
requests that were good. Without objectives, x_t is 1 / the tenant's mean normalised latency (E2E
per output token). J = 1: every tenant served alike; 1/n: one tenant got everything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tokenbench.config.mix import WorkloadMix
from tokenbench.config.slo import SLOConfig
from tokenbench.metrics.point import meets_slo
from tokenbench.metrics.stats import distribution
from tokenbench.records import UNFINISHED, Outcome, RequestRecord, failed
from tokenbench.results.run import Fairness, GroupSlo, GroupStats


def _slo_for(mix: WorkloadMix | None, run_slo: SLOConfig) -> Callable[[RequestRecord], SLOConfig]:
    """Each request's objectives: its class's own SLO, else the run's."""
    own: dict[str, SLOConfig] = {}
    for c in mix.classes if mix is not None else ():
        if c.slo is not None:
            own[c.name] = SLOConfig(ttft_s=c.slo.ttft_s, tpot_s=c.slo.tpot_s, e2e_s=c.slo.e2e_s)

    def slo(r: RequestRecord) -> SLOConfig:
        return own.get((r.group.request_class if r.group is not None else None) or "", run_slo)

    return slo


def group_stats(
    records: Sequence[RequestRecord],
    total: int,
    period_s: float | None,
    slo: Callable[[RequestRecord], SLOConfig],
    shown_slo: SLOConfig | None,
    of_class: bool = False,
) -> GroupStats:
    ok = [r for r in records if r.outcome is Outcome.OK]
    ended = [r for r in records if r.outcome not in UNFINISHED]
    judged = [r for r in ended if slo(r).any]
    good = sum(1 for r in judged if meets_slo(r, slo(r)))
    tpots = [r.tpot_s for r in ok if r.tpot_s is not None]
    per = (lambda x: x / period_s) if period_s else (lambda x: None)
    first = records[0].group if records and of_class else None  # a class's priority and tenant
    return GroupStats(
        requests=len(records),
        ok=len(ok),
        failed=sum(1 for r in records if failed(r.outcome)),
        share=len(records) / total if total else None,
        requests_per_s=per(len(ok)),
        output_tokens_per_s=per(sum(r.output_tokens or 0 for r in ok)),
        goodput_per_s=per(good) if judged else None,
        good_fraction=good / len(judged) if judged else None,
        slo=GroupSlo(**shown_slo.model_dump(exclude={"session_s"}))
        if shown_slo is not None and shown_slo.any
        else None,
        priority=first.priority if first is not None else None,
        tenant=first.tenant if first is not None else None,
        ttft_s=distribution([r.ttft_s for r in ok if r.ttft_s is not None]),
        tpot_s=distribution(tpots),
        e2e_s=distribution([r.e2e_s for r in ok if r.e2e_s is not None]),
        queue_s=distribution([w for w in (r.wait_s for r in records) if w is not None]),
        normalized_latency_s=distribution(
            [r.e2e_s / r.output_tokens for r in ok if r.e2e_s is not None and r.output_tokens]
        ),
    )


def _split(
    records: Sequence[RequestRecord], key: Callable[[RequestRecord], str | None]
) -> dict[str, list[RequestRecord]]:
    groups: dict[str, list[RequestRecord]] = {}
    for r in records:
        k = key(r)
        if k is not None:
            groups.setdefault(k, []).append(r)
    return dict(sorted(groups.items()))


def jain(values: Sequence[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n * sum x^2); None without values or when all are 0."""
    n, squares = len(values), sum(x * x for x in values)
    return sum(values) ** 2 / (n * squares) if n and squares > 0 else None


def fairness(by_tenant: dict[str, GroupStats]) -> Fairness | None:
    if len(by_tenant) < 2:
        return None
    if all(g.goodput_per_s is not None for g in by_tenant.values()):
        values = {
            t: (g.goodput_per_s / g.share if g.goodput_per_s is not None and g.share else None)
            for t, g in by_tenant.items()
        }
        over = "goodput_per_share"
    else:
        values = {
            t: (1.0 / g.normalized_latency_s.mean if g.normalized_latency_s.mean else None)
            for t, g in by_tenant.items()
        }
        over = "inverse_normalized_latency"
    known = [v for v in values.values() if v is not None]
    index = jain(known) if len(known) == len(values) else None
    return Fairness(jain_index=index, over=over, tenants=len(values), values=values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class GroupBreakdowns:
    """A point's requests by group: each breakdown only where its requests had such groups (None:
    none had), and fairness only across two tenants or more."""

    by_adapter: dict[str, GroupStats] | None = None
    by_class: dict[str, GroupStats] | None = None
    by_tenant: dict[str, GroupStats] | None = None
    fairness: Fairness | None = None


def group_breakdowns(
    population: Sequence[RequestRecord], period_s: float | None, run_slo: SLOConfig, mix: WorkloadMix | None
) -> GroupBreakdowns:
    """``by_adapter``, ``by_class``, ``by_tenant`` and ``fairness`` of a point: only those its
    requests have groups for (a point without any has none: results keep their shape)."""
    slo = _slo_for(mix, run_slo)
    total = len(population)
    # the SLO a group shows: a class its own, else the run's; an adapter or a tenant the run's,
    # unless classes have their own (then none is the group's)
    shared_slo = None if mix and any(c.slo for c in mix.classes) else run_slo

    def class_slo(name: str) -> SLOConfig | None:
        own = mix.slo_of(name) if mix is not None else None
        return SLOConfig(ttft_s=own.ttft_s, tpot_s=own.tpot_s, e2e_s=own.e2e_s) if own is not None else run_slo

    def by(key: Callable[[RequestRecord], str | None], of_class: bool = False) -> dict[str, GroupStats] | None:
        stats = {
            name: group_stats(rs, total, period_s, slo, class_slo(name) if of_class else shared_slo, of_class)
            for name, rs in _split(population, key).items()
        }
        return stats or None

    by_adapter = by(lambda r: r.group.adapter if r.group is not None else None)
    by_class = by(lambda r: r.group.request_class if r.group is not None else None, of_class=True)
    by_tenant = by(lambda r: r.group.tenant if r.group is not None else None)
    fair = fairness(by_tenant) if by_tenant is not None else None
    return GroupBreakdowns(by_adapter=by_adapter, by_class=by_class, by_tenant=by_tenant, fairness=fair)
