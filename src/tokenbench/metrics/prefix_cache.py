"""A point's prefix cache: the hit rate measured over its window, from the best signal there is,
beside the reuse its workload promises (pure: records, the server's figures and the dataset's facts).

Signals, best first (the first that has data is the hit rate; ``hit_rate_source`` names it):
1. ``server_counters``: the server's hit and query counters over the window (point.server:
   vLLM ``prefix_cache_hits/queries``, SGLang ``cached_tokens/prompt_tokens``), every request the
   engine served in the window, in tokens;
2. ``llamacpp_timings``: sum ``timings.cache_n`` / sum (``cache_n`` + ``prompt_n``) over the ok
   records of the window's population. llama.cpp's ``prompt_n`` is the prompt tokens it evaluated
   for the request (n_prompt_tokens_processed, tools/server: result_timings), the cached ones
   excluded, so the sum of both is the whole prompt;
3. ``usage_cached_tokens``: sum ``usage.prompt_tokens_details.cached_tokens`` / sum
   ``usage.prompt_tokens`` over the same records (vLLM with --enable-prompt-tokens-details,
   SGLang with --enable-cache-report, newer llama.cpp, the mock).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from tokenbench.records import Outcome, RequestRecord
from tokenbench.results import DatasetFacts, PrefixCache, Server, TracePointFacts
from tokenbench.results.manifest import PrefixCacheReset


class CacheTally:
    """The per-request signals over a point's population, fed every full record once (before a
    summary drops their server timings: ``observe`` passes them through unchanged)."""

    def __init__(self, in_population: Callable[[RequestRecord], bool]) -> None:
        self._in_population = in_population
        self.timings_cached = self.timings_prompt = self.timings_requests = 0
        self.usage_cached = self.usage_prompt = self.usage_requests = 0

    def observe(self, records: Iterable[RequestRecord]) -> Iterator[RequestRecord]:
        for r in records:
            self.add(r)
            yield r

    def add(self, r: RequestRecord) -> None:
        if r.outcome is not Outcome.OK or not self._in_population(r):
            return
        timings = r.server_timings or {}
        cache_n, prompt_n = timings.get("cache_n"), timings.get("prompt_n")
        if _count(cache_n) and _count(prompt_n):
            self.timings_cached += int(cache_n)  # type: ignore[arg-type]
            self.timings_prompt += int(cache_n) + int(prompt_n)  # type: ignore[arg-type]
            self.timings_requests += 1
        elif r.cached_prompt_tokens is not None and r.prompt_tokens:
            # without timings, the cached count can only have come from the usage report
            self.usage_cached += r.cached_prompt_tokens
            self.usage_prompt += r.prompt_tokens
            self.usage_requests += 1


def _count(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def prefix_cache(
    reset: PrefixCacheReset | None, server: Server | None, tally: CacheTally, expected_reuse: float | None
) -> PrefixCache:
    """``reset``: the point's ``prefix_cache_reset`` fact (backends.cache_control.CacheReset as
    written to samples.jsonl; None for a run that did not log one: nothing was asked)."""
    reset = reset or PrefixCacheReset(status="not_requested")
    rate, source, requests = _hit_rate(server, tally)
    return PrefixCache(
        reset=reset.status,
        reset_detail=reset.detail,
        hit_rate=rate,
        hit_rate_source=source,
        hit_rate_requests=requests,
        expected_reuse=expected_reuse,
    )


def _hit_rate(server: Server | None, tally: CacheTally) -> tuple[float | None, Any, int | None]:
    if server is not None and server.prefix_cache_hit_rate is not None:
        return float(server.prefix_cache_hit_rate), "server_counters", None
    if server is not None and server.prefix_cache_hits is None and server.prefix_cache_queries:
        # lookups counted, the hit counter never seen: SGLang creates sglang:cached_tokens_total
        # at its first hit (backends/sglang.py), so none in the window is 0, not unknown
        return 0.0, "server_counters", None
    if tally.timings_prompt:
        return tally.timings_cached / tally.timings_prompt, "llamacpp_timings", tally.timings_requests
    if tally.usage_prompt:
        return tally.usage_cached / tally.usage_prompt, "usage_cached_tokens", tally.usage_requests
    return None, None, None


def expected_reuse(dataset_info: DatasetFacts | None, point: TracePointFacts | None = None) -> float | None:
    """The workload's expected token reuse: over the rows a replay ``point`` sent (its trace
    facts), else from config.json's dataset facts: a trace's hash ids (a run from before points
    had their own), else a shared-prefix workload's (``shared_prefix.expected_reuse``)."""
    if point is not None:
        reuse = point.expected_reuse
        return float(reuse.token_fraction) if reuse is not None and reuse.token_fraction is not None else None
    if dataset_info is None:
        return None
    for facts in (dataset_info.trace, dataset_info.shared_prefix):
        reuse = facts.expected_reuse if facts is not None else None
        if reuse is not None and reuse.token_fraction is not None:
            return float(reuse.token_fraction)
    return None
