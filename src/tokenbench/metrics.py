"""Records -> metrics. Pure functions: no clock, no I/O, no printing. Formulas: METRICS.md.

Window: a point's measurement window runs from the end of ramp-up + warm-up to the end of the load.
Requests *started* (sent) in the window form the latency distributions (successful ones) and the
request counts; tokens that *arrived* in the window form the throughput; ramp-up is excluded.
A request's output tokens are spread evenly over its content chunks to place them in time (a chunk
may carry several tokens).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from .config import SLOConfig
from .records import Outcome, RequestRecord

PERCENTILES = (50, 90, 95, 99, 99.9)


@dataclass(frozen=True)
class Distribution:
    count: int
    mean: float | None
    std: float | None
    min: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    p999: float | None
    max: float | None

    def to_json(self) -> dict:
        return asdict(self)


def distribution(values: Iterable[float]) -> Distribution:
    arr = np.fromiter(values, dtype=float)
    if arr.size == 0:
        return Distribution(0, *([None] * 9))
    p = np.percentile(arr, PERCENTILES)
    return Distribution(
        count=int(arr.size),
        mean=float(arr.mean()),
        std=float(arr.std()),
        min=float(arr.min()),
        p50=float(p[0]),
        p90=float(p[1]),
        p95=float(p[2]),
        p99=float(p[3]),
        p999=float(p[4]),
        max=float(arr.max()),
    )


@dataclass(frozen=True)
class Window:
    start_s: float
    end_s: float

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s

    def contains(self, t: float) -> bool:
        return self.start_s <= t < self.end_s


def started_s(r: RequestRecord) -> float:
    return r.sent_s if r.sent_s is not None else r.scheduled_s


def tokens_per_chunk(r: RequestRecord) -> float:
    if not r.chunk_times_s:
        return 0.0
    return (r.output_tokens or len(r.chunk_times_s)) / len(r.chunk_times_s)


def output_tokens_in(records: Iterable[RequestRecord], window: Window) -> float:
    """Output tokens whose chunk arrived inside ``window`` (partial output of failures included)."""
    total = 0.0
    for r in records:
        if not r.chunk_times_s:
            continue
        times = r.chunk_times_s
        if window.start_s <= times[0] and times[-1] < window.end_s:
            n = len(times)
        else:
            n = sum(1 for t in times if window.start_s <= t < window.end_s)
        total += n * tokens_per_chunk(r)
    return total


def inter_chunk_gaps(records: Iterable[RequestRecord]) -> Iterable[float]:
    for r in records:
        times = r.chunk_times_s
        for i in range(1, len(times)):
            yield times[i] - times[i - 1]


def meets_slo(r: RequestRecord, slo: SLOConfig) -> bool:
    if r.outcome is not Outcome.OK:
        return False
    checks = ((slo.ttft_s, r.ttft_s), (slo.tpot_s, r.tpot_s), (slo.e2e_s, r.e2e_s))
    for limit, value in checks:
        # A TPOT of a 1-token reply is undefined: it cannot violate the TPOT objective.
        if limit is not None and value is not None and value > limit:
            return False
    return True


def concurrency(records: Sequence[RequestRecord], window: Window) -> tuple[float | None, int]:
    """Mean in-flight requests over the window (sum of in-flight time / window) and the peak."""
    if window.length_s <= 0:
        return None, 0
    busy = 0.0
    events: list[tuple[float, int]] = []
    for r in records:
        if r.sent_s is None:
            continue
        end = r.closed_s if r.closed_s is not None else r.sent_s
        lo, hi = max(r.sent_s, window.start_s), min(end, window.end_s)
        if hi > lo:
            busy += hi - lo
        events.append((r.sent_s, 1))
        events.append((end, -1))
    events.sort()
    level = peak = 0
    for t, step in events:
        level += step
        if window.start_s <= t < window.end_s:
            peak = max(peak, level)
    return busy / window.length_s, peak


def count_outcomes(records: Iterable[RequestRecord]) -> dict:
    by_outcome: dict[str, int] = {}
    for r in records:
        by_outcome[r.outcome.value] = by_outcome.get(r.outcome.value, 0) + 1
    total = sum(by_outcome.values())
    return {"total": total, "ok": by_outcome.get("ok", 0), "by_outcome": by_outcome}


def token_counts(records: Iterable[RequestRecord]) -> dict:
    """Where output token counts came from, and how the server and client counts disagree."""
    sources: dict[str, int] = {}
    diffs: list[int] = []
    for r in records:
        if r.output_tokens_source is not None:
            sources[r.output_tokens_source.value] = sources.get(r.output_tokens_source.value, 0) + 1
        if r.server_output_tokens is not None and r.client_output_tokens is not None:
            diffs.append(r.client_output_tokens - r.server_output_tokens)
    compared = len(diffs)
    return {
        "output_tokens_source": sources,
        "server_vs_client": {
            "compared": compared,
            "mismatched": sum(1 for d in diffs if d != 0),
            "mean_client_minus_server": float(np.mean(diffs)) if compared else None,
        },
    }


def summarize_point(
    records: Sequence[RequestRecord], window: Window, slo: SLOConfig
) -> dict:
    """The aggregate metrics of one load point (the keys of results.json's ``points[]``)."""
    in_window = [r for r in records if window.contains(started_s(r))]
    ok = [r for r in in_window if r.outcome is Outcome.OK]
    length = window.length_s
    rate = (lambda x: x / length) if length > 0 else (lambda x: None)
    out_tokens = output_tokens_in(records, window)
    # Prompt tokens of successful requests started in the window (a rejected request's prompt
    # was not necessarily processed).
    prompt_tokens = sum(r.prompt_tokens or 0 for r in ok)
    completed = sum(1 for r in records if r.outcome is Outcome.OK and r.end_s is not None and window.contains(r.end_s))
    good = sum(1 for r in in_window if meets_slo(r, slo)) if slo.any else None
    mean_conc, peak_conc = concurrency(records, window)
    out_rate = rate(out_tokens)
    prompt_rate = rate(prompt_tokens)
    return {
        "window_s": length,
        "window": {"start_s": window.start_s, "end_s": window.end_s},
        "requests": count_outcomes(records),
        "requests_in_window": count_outcomes(in_window),
        "ttft_s": distribution(r.ttft_s for r in ok if r.ttft_s is not None).to_json(),
        "tpot_s": distribution(r.tpot_s for r in ok if r.tpot_s is not None).to_json(),
        "itl_s": distribution(inter_chunk_gaps(ok)).to_json(),
        "e2e_s": distribution(r.e2e_s for r in ok if r.e2e_s is not None).to_json(),
        "queue_s": distribution(r.queue_s for r in in_window if r.queue_s is not None).to_json(),
        "normalized_latency_s": distribution(
            r.e2e_s / r.output_tokens for r in ok if r.e2e_s is not None and r.output_tokens
        ).to_json(),
        "output_tokens": out_tokens,
        "output_tokens_per_s": out_rate,
        "total_tokens_per_s": (out_rate + prompt_rate) if out_rate is not None and prompt_rate is not None else None,
        "requests_per_s": rate(completed),
        "goodput_per_s": rate(good) if good is not None else None,
        "good_fraction": (good / len(in_window)) if good is not None and in_window else None,
        "concurrency": {"mean": mean_conc, "peak": peak_conc},
        "tokens": token_counts(in_window),
    }


def timeseries(
    records: Sequence[RequestRecord],
    span_start_s: float,
    span_end_s: float,
    ramp_end_s: float,
    user_spans: Sequence[tuple[float, float]],
    window_s: float,
) -> list[dict]:
    """Fixed windows over the whole point, ramp included and marked."""
    rows = []
    t = span_start_s
    while t < span_end_s:
        w = Window(t, min(t + window_s, span_end_s))
        first_in = [r for r in records if r.outcome is Outcome.OK and r.chunk_times_s and w.contains(r.chunk_times_s[0])]
        ttfts = [r.ttft_s for r in first_in if r.ttft_s is not None]
        mean_conc, _ = concurrency(records, w)
        out = output_tokens_in(records, w)
        rows.append(
            {
                "start_s": w.start_s,
                "end_s": w.end_s,
                "ramp": w.start_s < ramp_end_s,
                "active_users": sum(1 for a, b in user_spans if a <= w.end_s and b >= w.end_s)
                if user_spans
                else None,
                "in_flight": mean_conc,
                "requests_per_s": sum(
                    1 for r in records if r.outcome is Outcome.OK and r.end_s is not None and w.contains(r.end_s)
                )
                / w.length_s,
                "output_tokens_per_s": out / w.length_s,
                "ttft_s_mean": float(np.mean(ttfts)) if ttfts else None,
                "ttft_s_p90": float(np.percentile(ttfts, 90)) if ttfts else None,
                # failures that ended in this window; requests cancelled because the run
                # stopped are counted apart (they are not the server's failures)
                "errors": sum(
                    1
                    for r in records
                    if r.outcome not in (Outcome.OK, Outcome.CANCELLED)
                    and r.closed_s is not None and w.contains(r.closed_s)
                ),
                "cancelled": sum(
                    1
                    for r in records
                    if r.outcome is Outcome.CANCELLED and r.closed_s is not None and w.contains(r.closed_s)
                ),
            }
        )
        t += window_s
    return rows
