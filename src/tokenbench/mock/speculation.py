"""The mock's speculative decoding and vLLM's per-request ``metrics`` object (the server's doc).

A reply's plan (``plan``): chunk 0 is the prefill's one token; each later chunk is one verify step
that accepted ``a`` drafts (the settings' cycle, in turn) and carries ``a + 1`` tokens, the bonus
included, until the reply's tokens are reached: the last chunk is cut to what is left, and its step
still counts with its scripted accepted and drafted figures (vLLM's report: a 24-token reply at
k = 3, all accepted, came in chunks of 1, 4, 4, 4, 4, 4, 3 tokens and 6 steps, 18 drafted, 18
accepted).

``request_metrics`` is vLLM's PerRequestMetrics (entrypoints/generate/base/protocol.py), from the
times the mock wrote (its Delivery); ``SpecCounters`` vLLM's ``vllm:spec_decode_*`` counters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter

if TYPE_CHECKING:
    from tokenbench.mock.settings import Delivery, MockSettings

# A JSON object of the metrics the mock writes.
Metrics = dict[str, object]


@dataclass(frozen=True)
class Plan:
    """What each content chunk of a reply carries: its tokens, and (chunks 1 on) its step's
    accepted drafts (``accepted[i - 1]`` for chunk i; every step drafted ``k``)."""

    tokens: tuple[int, ...]
    accepted: tuple[int, ...] = ()
    k: int = 0


def plan(total: int, k: int, cycle: tuple[int, ...]) -> Plan:
    """``total`` tokens (at least 1) as the prefill's token, then verify steps of the cycle's
    accepted drafts plus the bonus, the last step's chunk cut to what is left."""
    tokens: list[int] = [1]
    accepted: list[int] = []
    left = max(1, total) - 1
    while left > 0:
        a = cycle[len(accepted) % len(cycle)]
        accepted.append(a)
        tokens.append(min(a + 1, left))
        left -= tokens[-1]
    return Plan(tuple(tokens), tuple(accepted), k)


def speculative_decoding(accepted: list[int], k: int, detailed: bool) -> Metrics:
    """vLLM's ``metrics.speculative_decoding`` of a reply whose verify steps accepted ``accepted``."""
    histogram = [0] * (k + 1)
    for a in accepted:
        histogram[a] += 1
    steps, hits = len(accepted), sum(accepted)
    drafted = steps * k
    out: Metrics = {
        "mean_acceptance_length": 1 + hits / steps if steps else 1.0,
        "draft_acceptance_rate": hits / drafted if drafted else 0.0,
        "acceptance_histogram": histogram,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": hits,
        "num_draft_tokens": drafted,
        "num_spec_tokens": k,
    }
    if detailed:
        out["per_step_accepted"] = list(accepted)
        out["per_step_drafted"] = [k] * steps
    return out


def timing(delivery: Delivery, completion: int) -> Metrics:
    """vLLM's timing fields, in ms, from what the mock did: queued = received, scheduled =
    admitted, first and last token = the first and last content chunk written."""
    admitted = delivery.admitted_s if delivery.admitted_s is not None else delivery.received_s
    times = delivery.chunk_times_s
    out: Metrics = {
        "time_to_first_token_ms": (times[0] - admitted) * 1e3 if times else None,
        "generation_time_ms": None,
        "queue_time_ms": (admitted - delivery.received_s) * 1e3,
        "mean_itl_ms": None,
        "tokens_per_second": None,
    }
    if times:
        generation = (times[-1] - times[0]) * 1e3
        out["generation_time_ms"] = generation
        out["mean_itl_ms"] = generation / (completion - 1) if completion >= 2 else None
        elapsed = times[-1] - admitted
        out["tokens_per_second"] = completion / elapsed if elapsed > 0 else None
    return out


def request_metrics(settings: MockSettings, delivery: Delivery, completion: int, accepted: list[int]) -> Metrics | None:
    """The ``metrics`` object of the final usage chunk (None: the settings ask for none, or it
    would be empty)."""
    out: Metrics = timing(delivery, completion) if settings.per_request_metrics else {}
    if settings.spec_tokens and settings.spec_metrics != "none":
        detailed = settings.spec_metrics == "detailed"
        out["speculative_decoding"] = speculative_decoding(accepted, settings.spec_tokens, detailed)
    return out or None


class SpecCounters:
    """vLLM's speculation counters (prometheus_client adds ``_total``): verify steps, drafted and
    accepted tokens, and the accepted per draft position (``position`` "0".."k-1": the steps that
    accepted more than that many)."""

    def __init__(self, registry: CollectorRegistry, model: str, k: int) -> None:
        names = ["model_name"]
        self._drafts = Counter("vllm:spec_decode_num_drafts", "verify steps", names, registry=registry).labels(model)
        self._drafted = Counter("vllm:spec_decode_num_draft_tokens", "drafted tokens", names, registry=registry).labels(
            model
        )
        self._accepted = Counter(
            "vllm:spec_decode_num_accepted_tokens", "accepted draft tokens", names, registry=registry
        ).labels(model)
        per_pos = Counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "accepted draft tokens at each position",
            ["model_name", "position"],
            registry=registry,
        )
        self._per_pos = [per_pos.labels(model, str(i)) for i in range(k)]
        self.k = k

    def step(self, accepted: int) -> None:
        """One verify step that accepted ``accepted`` of its ``k`` drafts."""
        self._drafts.inc()
        self._drafted.inc(self.k)
        self._accepted.inc(accepted)
        for position in self._per_pos[:accepted]:
            position.inc()
