"""The hit rate of a point's prefix cache from each signal, with known answers, and which wins."""

import pytest

from tokenbench.metrics.prefix_cache import CacheTally, expected_reuse, prefix_cache
from tokenbench.records import Outcome, RequestRecord
from tokenbench.results import DatasetFacts, Server
from tokenbench.results.manifest import PrefixCacheReset


def _rec(i, cached=None, prompt=None, timings=None, outcome=Outcome.OK, scheduled_s=1.0) -> RequestRecord:
    return RequestRecord(
        point=0,
        id=i,
        scheduled_s=scheduled_s,
        sent_s=scheduled_s,
        outcome=outcome,
        prompt_tokens=prompt,
        cached_prompt_tokens=cached,
        server_timings=timings,
    )


def _tally(records, in_population=lambda r: r.scheduled_s < 10) -> CacheTally:
    tally = CacheTally(in_population)
    assert list(tally.observe(records)) == records  # passed through unchanged
    return tally


def _server(hits, queries) -> Server:
    rate = hits / queries if hits is not None and queries else None
    return Server.model_validate(
        {
            "period_s": [0, 1],
            "scrapes": 2,
            "failed_scrapes": 0,
            "first_scrape_error": None,
            "bracket_s": None,
            "bracketed": True,
            "preemptions": None,
            "generated_tokens": None,
            "prefix_cache_hits": hits,
            "prefix_cache_queries": queries,
            "prefix_cache_hit_rate": rate,
            "running": None,
            "waiting": None,
            "kv_usage": None,
            "ttft_s_mean": None,
            "ttft_count": None,
            "itl_s_mean": None,
            "itl_count": None,
        }
    )


def _dataset(**facts) -> DatasetFacts:
    base = {"name": "synthetic", "num_requests": 8, "exact_lengths": True, "tokenizer": None}
    return DatasetFacts.model_validate(base | {"system_prompt": False, "unique_prefix": False, "source": None} | facts)


def _reuse(token_fraction) -> dict:
    counts = {"num_blocks": 4, "num_blocks_reused": 3, "num_tokens": 64, "num_tokens_reused": 48}
    return counts | {"token_fraction": token_fraction, "block_fraction": 0.75}


def test_llamacpp_timings_count_cache_n_over_cache_n_plus_prompt_n():
    # prompt_n is what llama.cpp evaluated, cached tokens excluded: 30 / (30 + 10 + 0 + 60)
    records = [
        _rec(0, cached=30, prompt=40, timings={"cache_n": 30, "prompt_n": 10}),
        _rec(1, cached=0, prompt=60, timings={"cache_n": 0, "prompt_n": 60}),
        _rec(2, timings={"cache_n": 99, "prompt_n": 1}, outcome=Outcome.HTTP_ERROR),  # not ok: out
        _rec(3, timings={"cache_n": 99, "prompt_n": 1}, scheduled_s=20.0),  # not in the window: out
    ]
    got = prefix_cache(None, None, _tally(records), None)
    assert (got.hit_rate, got.hit_rate_source, got.hit_rate_requests) == (pytest.approx(0.3), "llamacpp_timings", 2)
    assert got.reset == "not_requested"


def test_usage_cached_tokens_over_usage_prompt_tokens():
    records = [_rec(0, cached=16, prompt=64), _rec(1, cached=48, prompt=64), _rec(2, prompt=64)]
    got = prefix_cache(PrefixCacheReset(status="done"), None, _tally(records), 0.5)
    assert (got.hit_rate, got.hit_rate_source, got.hit_rate_requests) == (0.5, "usage_cached_tokens", 2)
    assert (got.reset, got.expected_reuse) == ("done", 0.5)


def test_server_counters_win_over_per_request_signals():
    records = [_rec(0, cached=16, prompt=64)]
    got = prefix_cache(None, _server(30, 120), _tally(records), None)
    assert (got.hit_rate, got.hit_rate_source, got.hit_rate_requests) == (0.25, "server_counters", None)


def test_no_signal_is_none_never_zero():
    got = prefix_cache(
        PrefixCacheReset(status="failed", detail="HTTP 500"), _server(None, None), _tally([_rec(0, prompt=8)]), None
    )
    assert (got.hit_rate, got.hit_rate_source) == (None, None)
    assert (got.reset, got.reset_detail) == ("failed", "HTTP 500")


def test_expected_reuse_from_a_trace_or_a_shared_prefix_workload():
    trace_facts = {"format": "mooncake", "sha256": "0" * 64, "num_rows": 4, "num_rows_used": 4, "block_size": 16}
    trace_facts |= {"num_failed_skipped": 0, "num_filtered_out": 0, "expected_reuse": _reuse(0.75)}
    trace = _dataset(trace=trace_facts)
    assert expected_reuse(trace) == 0.75
    shared = {"groups": 2, "tokens": 16, "skew": None, "expected_reuse": _reuse(0.5)}
    assert expected_reuse(_dataset(shared_prefix=shared)) == 0.5
    assert expected_reuse(_dataset(name="synthetic")) is None and expected_reuse(None) is None
    # a trace without hash ids promises nothing; a shared prefix over it still does
    no_ids = trace_facts | {"block_size": None, "expected_reuse": None}
    assert expected_reuse(_dataset(trace=no_ids)) is None
    assert expected_reuse(_dataset(trace=no_ids, shared_prefix=shared)) == 0.5


def test_queries_counted_without_a_hit_counter_is_no_hit_sglang_creates_it_at_the_first():
    got = prefix_cache(None, _server(None, 512), _tally([]), 0.0)
    assert (got.hit_rate, got.hit_rate_source) == (0.0, "server_counters")
