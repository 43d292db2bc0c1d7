"""Prometheus text -> flat samples -> the normalized fields of a backend profile (pure).

Parsing uses prometheus_client's text parser. A flat sample key is the sample name plus its
labels in sorted order (``name{a="1",b="2"}``); histogram buckets and ``_created`` samples are
dropped (they are large and not used). A profile's candidate name may carry a label selector,
``name{label="value"}``: the samples with that name whose labels include those pairs are summed,
except ratio gauges (``RATIO_FIELDS``: KV-cache usage), which are averaged: two data-parallel
engines at 60% each are 60% used, not 120%.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class MetricNames:
    """Prometheus sample names per normalized field. Each field lists candidates, newest name
    first (engines rename metrics between versions); the first one present in a scrape is used
    and samples with the same name but different labels are summed. Histograms are given by base
    name (``<name>_sum`` / ``<name>_count`` are read), in seconds unless a scale says otherwise."""

    running: tuple[str, ...] = ()  # gauge: requests being decoded/prefilled now
    waiting: tuple[str, ...] = ()  # gauge: requests queued in the engine
    kv_usage: tuple[str, ...] = ()  # gauge: KV-cache usage
    kv_usage_scale: float = 1.0  # multiply to get 0..1 (0.01 when the engine reports percent)
    preemptions: tuple[str, ...] = ()  # counter
    prefix_cache_hits: tuple[str, ...] = ()  # counter (tokens or blocks, as the engine counts)
    prefix_cache_queries: tuple[str, ...] = ()  # counter, same unit as hits
    # counter: prompt tokens the engine computed, not served from its cache (llama.cpp's
    # prompt_tokens_total: a repeated 25-token prompt added 1 to it and 24 to the cached count,
    # measured); without prefix_cache_queries, queries = hits + these
    prompt_tokens_computed: tuple[str, ...] = ()
    generated_tokens: tuple[str, ...] = ()  # counter
    requests_finished: tuple[str, ...] = ()  # counter: requests the engine finished (a fleet's per replica)
    # speculative decoding (counters): verify steps (drafts), draft tokens proposed, of them accepted,
    # and accepted by draft position (samples labelled ``position``: one field per position)
    spec_drafts: tuple[str, ...] = ()
    spec_draft_tokens: tuple[str, ...] = ()
    spec_accepted_tokens: tuple[str, ...] = ()
    spec_accepted_by_position: tuple[str, ...] = ()
    # a router in front of a fleet (backends/routers.py): requests it received (counter), and the
    # requests it sent to each replica (counter, samples labelled ``worker`` with the replica's base
    # URL: one field per replica, ``ROUTED_PREFIX`` + its host:port)
    requests: tuple[str, ...] = ()
    routed_requests_by_worker: tuple[str, ...] = ()
    ttft_histogram: tuple[str, ...] = ()
    itl_histogram: tuple[str, ...] = ()  # inter-token / time-per-output-token histogram
    histogram_scale: float = 1.0  # multiply a histogram's _sum to get seconds (0.001 for ms)
    path: str = "/metrics"

    def fields(self) -> dict[str, tuple[str, ...]]:
        return {
            "running": self.running,
            "waiting": self.waiting,
            "kv_usage": self.kv_usage,
            "preemptions": self.preemptions,
            "prefix_cache_hits": self.prefix_cache_hits,
            "prefix_cache_queries": self.prefix_cache_queries,
            "prompt_tokens_computed": self.prompt_tokens_computed,
            "generated_tokens": self.generated_tokens,
            "requests_finished": self.requests_finished,
            "spec_drafts": self.spec_drafts,
            "spec_draft_tokens": self.spec_draft_tokens,
            "spec_accepted_tokens": self.spec_accepted_tokens,
            "requests": self.requests,
        }

    def histograms(self) -> dict[str, tuple[str, ...]]:
        return {"ttft": self.ttft_histogram, "itl": self.itl_histogram}

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, object]) -> MetricNames:
        """``to_json``'s dict back (lists as tuples): how the sampler child gets its backend's names
        without importing the backends (their launch code and config cost it ~0.4 s of CPU a run)."""
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})  # type: ignore[arg-type]


_SELECTOR = re.compile(r"^([^{]+)(?:\{(.*)\})?$")
_PAIR = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
RATIO_FIELDS = frozenset({"kv_usage"})


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    @property
    def key(self) -> str:
        if not self.labels:
            return self.name
        return self.name + "{" + ",".join(f'{k}="{v}"' for k, v in self.labels) + "}"


def parse(text: str) -> list[Sample]:
    """All samples except histogram buckets and ``_created`` timestamps. Raises ValueError on
    text that is not the Prometheus exposition format."""
    out: list[Sample] = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith(("_bucket", "_created")):
                continue
            out.append(Sample(s.name, tuple(sorted(s.labels.items())), float(s.value)))
    return out


def flat(samples: list[Sample]) -> dict[str, float]:
    return {s.key: s.value for s in samples}


def _select(samples: list[Sample], candidate: str, average: bool = False) -> float | None:
    m = _SELECTOR.match(candidate.strip())
    if m is None:
        return None
    name, selector = m.group(1), m.group(2) or ""
    wanted = set(_PAIR.findall(selector))
    values = [s.value for s in samples if s.name == name and wanted <= set(s.labels)]
    if not values:
        return None
    return sum(values) / len(values) if average else sum(values)


# normalize's field for the accepted tokens at draft position i: this prefix and i
SPEC_POSITION_PREFIX = "spec_accepted_pos_"


def replica_name(url: str) -> str:
    """How a fleet names a replica: its URL's host:port (a router labels it by URL)."""
    return url.split("://", 1)[-1].split("/", 1)[0]


# normalize's field for the requests a router sent to one replica: this prefix and the replica's
# host:port (its ``worker`` label without the scheme: ReplicaEndpoint.name), e.g.
# ``routed_requests@127.0.0.1:8001``
ROUTED_PREFIX = "routed_requests@"


def _by_worker(samples: list[Sample], name: str) -> dict[str, float]:
    """The samples named ``name`` summed by their ``worker`` label (a URL: keyed by its host:port;
    other labels, e.g. a circuit breaker's outcome, summed over)."""
    out: dict[str, float] = {}
    for s in samples:
        worker = dict(s.labels).get("worker") if s.name == name else None
        if worker:
            key = replica_name(worker)
            out[key] = out.get(key, 0.0) + s.value
    return out


def _by_label(samples: list[Sample], name: str, label: str) -> dict[int, float]:
    """The samples named ``name`` summed by their integer ``label`` (other labels summed over)."""
    out: dict[int, float] = {}
    for s in samples:
        if s.name != name:
            continue
        value = dict(s.labels).get(label)
        if value is not None and value.isdigit():
            out[int(value)] = out.get(int(value), 0.0) + s.value
    return out


def first_present(samples: list[Sample], candidates: tuple[str, ...], average: bool = False) -> float | None:
    for candidate in candidates:
        value = _select(samples, candidate, average)
        if value is not None:
            return value
    return None


def normalize(samples: list[Sample], names: MetricNames) -> dict[str, float]:
    """Normalized fields present in this scrape (absent fields are left out, never 0).
    Histograms give ``<field>_sum_s`` (seconds) and ``<field>_count``."""
    values: dict[str, float] = {}
    for field, candidates in names.fields().items():
        value = first_present(samples, candidates, average=field in RATIO_FIELDS)
        if value is not None:
            values[field] = value * names.kv_usage_scale if field == "kv_usage" else value
    for candidate in names.spec_accepted_by_position:  # the first name present, its positions summed
        by_position = _by_label(samples, candidate, "position")
        if by_position:
            for position, value in by_position.items():
                values[f"{SPEC_POSITION_PREFIX}{position}"] = value
            break
    for candidate in names.routed_requests_by_worker:  # the first name present, each worker's sum
        by_worker = _by_worker(samples, candidate)
        if by_worker:
            values.update({f"{ROUTED_PREFIX}{worker}": value for worker, value in by_worker.items()})
            break
    for field, candidates in names.histograms().items():
        for base in candidates:
            name, _, selector = base.partition("{")
            suffix = "{" + selector if selector else ""
            total = _select(samples, f"{name}_sum{suffix}")
            count = _select(samples, f"{name}_count{suffix}")
            if total is not None and count is not None:
                values[f"{field}_sum_s"] = total * names.histogram_scale
                values[f"{field}_count"] = count
                break
    return values
