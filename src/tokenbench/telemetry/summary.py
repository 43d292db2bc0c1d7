"""Server and GPU samples -> what a load point and each time-series window report (pure).

A point's figures cover its measurement window, the same period as the client's numbers
(``point_server``/``point_gpu`` over the window; the runner also keeps them over the whole point,
ramp and drain included, named ``server_whole_point``/``gpu_whole_point``).

Counters take Prometheus ``increase()`` semantics over the scrapes from the last at or before
the span's start to the first at or after its end: a value lower than the one before is a reset
(the engine restarted) and counts from 0, never as a negative delta; a counter missing from a
scrape and present in a later one was created in between and counts from 0. A 1 s scrape interval
can attribute up to one interval of a neighbouring span; when no scrape lies at or before the
start, or at or after the end, the span is not bracketed: ``bracketed`` says so and the counters
cover less than the span. Gauges are the mean/max of the scrapes inside the span. A field the
server does not expose stays None, never 0. Server-side latency means come from histogram
_sum/_count increases over the same scrapes.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any

from tokenbench.results import Gauge, Gpu, MatchedTtft, Server, ServerCpu, ServerSpeculation
from tokenbench.results.run import WindowServer
from tokenbench.telemetry.prom import ROUTED_PREFIX, SPEC_POSITION_PREFIX

# One line of samples.jsonl (telemetry.sampler) as read back: JSON whose keys are prom.py's, so any
# value (an edge: read key by key).
Sample = dict[str, Any]


def _increase(series: list[Sample], field: str) -> float | None:
    """Prometheus ``increase()`` of a counter over consecutive scrapes (no extrapolation)."""
    values = [s["values"].get(field) for s in series]
    if all(v is None for v in values):
        return None
    total, prev = 0.0, None
    for v in values:
        if v is None:
            continue
        if prev is None:
            # The first scrape that has it. If an earlier scrape lacked it, it was created in
            # between (engines create labelled counters lazily): Prometheus counters start at 0.
            total += v if values[0] is None else 0.0
        else:
            total += v - prev if v >= prev else v  # lower than before: a reset, counting from 0
        prev = v
    return total


def _bracket(ok: list[Sample], start_s: float, end_s: float) -> tuple[Sample | None, Sample | None]:
    times = [s["t_s"] for s in ok]
    i = bisect_right(times, start_s) - 1
    j = bisect_left(times, end_s)
    before = ok[i] if i >= 0 else (ok[0] if ok and ok[0]["t_s"] <= end_s else None)
    after = ok[j] if j < len(ok) else (ok[-1] if ok and ok[-1]["t_s"] >= start_s else None)
    return before, after


def _between(ok: list[Sample], before: Sample | None, after: Sample | None) -> list[Sample]:
    if before is None or after is None:
        return []
    return [s for s in ok if before["t_s"] <= s["t_s"] <= after["t_s"]]


def _received(scrape: Sample) -> float:
    t: float = scrape["t_s"] + (scrape.get("scrape_s") or 0.0)
    return t


def _stats(values: list[float]) -> Gauge | None:
    if not values:
        return None
    return Gauge(mean=sum(values) / len(values), max=max(values))


def _gauge(inside: list[Sample], field: str) -> Gauge | None:
    return _stats([s["values"][field] for s in inside if field in s["values"]])


def _hist_mean(series: list[Sample], field: str) -> tuple[float | None, float | None]:
    d_sum, d_count = _increase(series, f"{field}_sum_s"), _increase(series, f"{field}_count")
    if d_sum is None or d_count is None:
        return None, None
    return (d_sum / d_count if d_count > 0 else None), d_count


def _speculation(series: list[Sample]) -> ServerSpeculation | None:
    """The speculation counters' increases over ``series`` (None: the server counts none)."""
    drafts, tokens = _increase(series, "spec_drafts"), _increase(series, "spec_draft_tokens")
    accepted = _increase(series, "spec_accepted_tokens")
    if drafts is None and tokens is None and accepted is None:
        return None
    keys = {k for s in series for k in s["values"] if k.startswith(SPEC_POSITION_PREFIX)}
    positions = sorted(int(k[len(SPEC_POSITION_PREFIX) :]) for k in keys)
    by_position = [
        _increase(series, f"{SPEC_POSITION_PREFIX}{p}") or 0.0 for p in range(max(positions, default=-1) + 1)
    ]
    return ServerSpeculation(
        drafts=drafts,
        draft_tokens=tokens,
        accepted_tokens=accepted,
        accepted_by_position=by_position or None,
        acceptance_rate=accepted / tokens if accepted is not None and tokens else None,
        acceptance_length=1.0 + accepted / drafts if accepted is not None and drafts else None,
        acceptance_rate_by_position=[a / drafts if drafts else None for a in by_position] if by_position else None,
    )


def point_server(samples: list[Sample], start_s: float, end_s: float) -> Server | None:
    """The server's view of [start_s, end_s]; None when nothing was scraped from a server."""
    scraped = [s for s in samples if "ok" in s]
    if not scraped:
        return None
    ok = [s for s in scraped if s["ok"]]
    inside = [s for s in ok if start_s <= s["t_s"] <= end_s]
    failed = [s for s in scraped if not s["ok"] and start_s <= s["t_s"] <= end_s]
    before, after = _bracket(ok, start_s, end_s)
    series = _between(ok, before, after)
    hits, queries = _increase(series, "prefix_cache_hits"), _increase(series, "prefix_cache_queries")
    ttft_mean, ttft_count = _hist_mean(series, "ttft")
    itl_mean, itl_count = _hist_mean(series, "itl")
    speculation = _speculation(series)
    server = Server(
        period_s=[start_s, end_s],
        scrapes=len(inside),
        failed_scrapes=len(failed),
        first_scrape_error=failed[0].get("error") if failed else None,
        bracket_s=[before["t_s"], after["t_s"]] if before and after else None,
        # when their answers came (the snapshot was taken between a scrape's send and its answer)
        bracket_received_s=[_received(before), _received(after)] if before and after else None,
        # False: no scrape at/before the start or at/after the end; counters cover less
        bracketed=bool(before and after and before["t_s"] <= start_s and after["t_s"] >= end_s),
        preemptions=_increase(series, "preemptions"),
        generated_tokens=_increase(series, "generated_tokens"),
        prefix_cache_hits=hits,
        prefix_cache_queries=queries,
        prefix_cache_hit_rate=hits / queries if hits is not None and queries else None,
        running=_gauge(inside, "running"),
        waiting=_gauge(inside, "waiting"),
        kv_usage=_gauge(inside, "kv_usage"),
        ttft_s_mean=ttft_mean,
        ttft_count=ttft_count,
        itl_s_mean=itl_mean,
        itl_count=itl_count,
    )
    # speculation and finished requests only where the server counts them: set, else unset (absent
    # from results.json)
    finished, computed = _increase(series, "requests_finished"), _increase(series, "prompt_tokens_computed")
    extra = {"speculation": speculation, "requests_finished": finished, "prompt_tokens_computed": computed}
    return server.model_copy(update={k: v for k, v in extra.items() if v is not None})


def replica_samples(samples: list[Sample], name: str) -> list[Sample]:
    """A fleet replica's scrapes (telemetry.sampler's ``replicas``) as scrape lines of its own, at
    the pass's t_s: ``point_server`` reads them as it reads the router's."""
    return [{"t_s": s["t_s"], **s["replicas"][name]} for s in samples if name in (s.get("replicas") or {})]


def routed_requests(samples: list[Sample], start_s: float, end_s: float) -> dict[str, float | None]:
    """The requests a fleet's router sent to each replica over [start_s, end_s] (its per-replica
    counter's increase, prom.ROUTED_PREFIX fields), by replica name; {} when it counts none."""
    ok = [s for s in samples if s.get("ok")]
    series = _between(ok, *_bracket(ok, start_s, end_s))
    keys = {k for s in series for k in s["values"] if k.startswith(ROUTED_PREFIX)}
    return {k[len(ROUTED_PREFIX) :]: _increase(series, k) for k in sorted(keys)}


def replica_servers(samples: list[Sample], start_s: float, end_s: float) -> dict[str, Server | None]:
    """Each fleet replica's own counters and gauges over [start_s, end_s], by name."""
    return {name: point_server(replica_samples(samples, name), start_s, end_s) for name in replica_names(samples)}


def replica_names(samples: list[Sample]) -> list[str]:
    """The replicas a run's scrapes named, in the order they were first scraped."""
    seen: dict[str, None] = {}
    for s in samples:
        for name in s.get("replicas") or {}:
            seen.setdefault(name)
    return list(seen)


def point_server_cpu(samples: list[Sample], start_s: float, end_s: float) -> ServerCpu | None:
    """The CPU the launched server's processes used over [start_s, end_s], between the readings
    that bracket it (as a counter: the scrapes' ``server_cpu``); None when none were read (an
    attached server). A tree whose total fell between two readings lost a process's seconds (it
    ended unreaped): the fall counts as nothing, never as negative CPU."""
    read = [s for s in samples if s.get("server_cpu")]
    before, after = _bracket(read, start_s, end_s)
    if before is None or after is None or after["t_s"] <= before["t_s"]:
        return None
    series = _between(read, before, after)
    cpu = [float(s["server_cpu"]["cpu_s"]) for s in series]
    used = sum(max(0.0, b - a) for a, b in zip(cpu, cpu[1:]))
    period = after["t_s"] - before["t_s"]
    return ServerCpu(
        period_s=[before["t_s"], after["t_s"]],
        cpu_s=used,
        cores_mean=used / period,
        processes=max(int(s["server_cpu"]["processes"]) for s in series),
        bracketed=before["t_s"] <= start_s and after["t_s"] >= end_s,
    )


def point_gpu(samples: list[Sample], header: Sample | None, start_s: float, end_s: float) -> Gpu:
    gpu_info = (header or {}).get("gpu") or {"available": False, "reason": "not sampled"}
    if not gpu_info.get("available"):
        return Gpu(available=False, reason=gpu_info.get("reason"))
    rows = [g for s in samples if start_s <= s["t_s"] <= end_s for g in (s.get("gpu") or [])]

    def col(key: str) -> list[float]:
        return [r[key] for r in rows if key in r]

    mem = col("mem_used_bytes")
    return Gpu(
        available=True,
        util_pct=_stats(col("util_pct")),
        power_w=_stats(col("power_w")),
        mem_used_bytes_max=max(mem) if mem else None,
    )


def window_server(samples: list[Sample], start_s: float, end_s: float) -> WindowServer | None:
    """Server gauges for one time-series window: the mean of scrapes inside it, else the scrape
    nearest its middle; preemptions counted between the scrapes at/before its edges. None when
    nothing was scraped from a server."""
    ok = [s for s in samples if s.get("ok")]
    if not ok:
        return None
    inside = [s for s in ok if start_s <= s["t_s"] < end_s]
    if not inside:
        mid = (start_s + end_s) / 2
        inside = [min(ok, key=lambda s: abs(s["t_s"] - mid))]
    util = [g["util_pct"] for s in inside for g in (s.get("gpu") or []) if "util_pct" in g]
    return WindowServer(
        server_running=_mean_of(inside, "running"),
        server_waiting=_mean_of(inside, "waiting"),
        server_kv_usage=_mean_of(inside, "kv_usage"),
        server_preemptions=_increase(_between(ok, _at_or_before(ok, start_s), _at_or_before(ok, end_s)), "preemptions"),
        gpu_util_pct=sum(util) / len(util) if util else None,
    )


def _mean_of(inside: list[Sample], field: str) -> float | None:
    values = [s["values"][field] for s in inside if field in s["values"]]
    return sum(values) / len(values) if values else None


def _at_or_before(ok: list[Sample], t: float) -> Sample | None:
    i = bisect_right([s["t_s"] for s in ok], t) - 1
    return ok[i] if i >= 0 else None


# A first chunk can reach the client a little after the server counted it: the same event loop
# writes the stream and answers the scrape, in either order. Within this of a bracketing scrape's
# answer, which side of the scrape a first chunk fell on is uncertain.
MATCH_MARGIN_S = 0.1


def matched_client_ttft(first_chunks: list[tuple[float, float]], server: Server | None) -> MatchedTtft | None:
    """The client's TTFT over the same requests the server's TTFT histogram counted over the point:
    every request whose first chunk arrived between the bracketing scrapes, whatever its outcome
    (``first_chunks`` = (first chunk time, TTFT) pairs). The headline client TTFT covers only
    successful requests started in the window, so under overload (cancelled stragglers) the two
    populations differ; this one is comparable (vLLM CPU: 10.604 s client vs 10.598 s server).

    A scrape's snapshot was taken between sending it and its answer: the answer's time is the
    nearer estimate (a busy server is slow to take the request, not to send the snapshot), so the
    bracket is the two scrapes' answers (``period_s``). ``uncertain`` counts the first chunks
    between a bracketing scrape's send and its answer + MATCH_MARGIN_S: the client's count may
    differ from the server's by at most these (seen on vLLM CPU: a batch's first tokens, 5 at
    once, reaching the client just after a scrape that counted them)."""
    if server is None or server.ttft_s_mean is None or not server.bracket_s:
        return None
    lo, hi = server.bracket_received_s or server.bracket_s  # runs before 0.2.1: sends
    sent_lo, sent_hi = server.bracket_s
    ttfts = [ttft for t, ttft in first_chunks if lo <= t <= hi]
    uncertain = sum(
        1 for t, _ in first_chunks if sent_lo <= t <= lo + MATCH_MARGIN_S or sent_hi <= t <= hi + MATCH_MARGIN_S
    )
    return MatchedTtft(
        mean=sum(ttfts) / len(ttfts) if ttfts else None,
        count=len(ttfts),
        period_s=[lo, hi],
        uncertain=uncertain,
    )
