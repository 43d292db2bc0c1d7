"""Spans joined to records: each request's server phases on the run's clock, and a point's
distributions of them (pure; derive.py calls it for a run and for ``tokenbench recompute``).

The spans of a request are found by trace id (keys.py: the id names the point, worker and record)
and read by their engine's shape (shapes.py: vLLM's and TensorRT-LLM's ``gen_ai.latency.*``
attributes, SGLang's root span and scheduler slices, TGI's handler span): for vLLM, span
``llm_request`` from the request's arrival (vllm/v1/engine/output_processor.py ``do_tracing``,
seconds): ``gen_ai.latency.time_in_queue`` (scheduled - queued), ``time_in_model_prefill`` (first
token - scheduled), ``time_in_model_decode`` (last token - first token), ``time_to_first_token``
(first token - arrival), ``e2e`` (finish - arrival). A request with no span, or a phase its engine
does not time, has null server phases, never 0. The server's times are its wall clock;
``clock_offset`` places them on the run's clock.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenbench.metrics.stats import distribution
from tokenbench.records import RequestRecord
from tokenbench.results.run import ClockOffset, ServerPhases, SlowestPhases
from tokenbench.spans.keys import parse_trace_id, run_key
from tokenbench.spans.shapes import ServerSpan, SpanPart, combine, read_part

# Spans are awaited this long after a point ends (the runner); one received later is late
GRACE_S = 2.0
# The phases of a request, in results' order: client sent -> server arrival, the server's time
# before its queue (frontend: its TTFT less queue and prefill: vLLM's API server, tokenization,
# the hand-off to the engine core), queue, prefill and first token (from arrival), server first
# token -> client first chunk, the server's decode, and the client's TTFT less the server's.
PHASES = (
    "network",
    "frontend",
    "queue",
    "prefill",
    "server_ttft",
    "delivery",
    "decode",
    "client_minus_server_ttft",
)
HTTP_PHASES = ("pool_wait", "connect", "headers_to_sent", "ttfb", "headers_to_first_chunk")


def server_span(span: dict[str, Any]) -> ServerSpan:
    """One span line read alone (a request span of any engine's shape; a helper span: all null)."""
    return read_part(span)


@dataclass
class SpanIndex:
    """server_spans.jsonl read once: this run's request spans by (point, worker, id), the spans
    of other traces with when they came, and the receiver's counts."""

    by_request: dict[tuple[int, int | None, int], ServerSpan]
    foreign_received_s: list[float]
    receiver: dict[str, int | str | None] | None
    duplicates: int = 0
    partial: int = 0  # traces of ours with helper spans but no request span

    @classmethod
    def read(cls, path: Path, origin_unix_s: float) -> SpanIndex | None:
        """None when the run has no such file (no --server-traces)."""
        if not path.exists():
            return None
        return cls.of(_lines(path), origin_unix_s)

    @classmethod
    def of(cls, lines: Iterable[dict[str, Any]], origin_unix_s: float) -> SpanIndex:
        """Each request's trace: its spans' parts combined (shapes.combine: its request span, the
        one with the engine's latencies when a layer sends one too, filled in by helper spans);
        a trace whose request span never came is not joined (``partial`` counts them)."""
        run = run_key(origin_unix_s)
        index = cls({}, [], None)
        parts: dict[tuple[int, int | None, int], list[SpanPart]] = {}
        for line in lines:
            if "receiver" in line:
                index.receiver = line["receiver"]
                continue
            named = parse_trace_id(str(line.get("trace_id", "")), run)
            if named is None:
                index.foreign_received_s.append(float(line.get("received_s", 0.0)))
                continue
            point, id, worker = named
            parts.setdefault((point, worker, id), []).append(read_part(line))
        for key, found in parts.items():
            merged, extra = combine(found)
            index.duplicates += extra
            if merged is None:
                index.partial += 1
            else:
                index.by_request[key] = merged
        return index


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    """server_spans.jsonl's lines; one a kill -9 tore mid-write (the receiver is a thread of the
    run) is left out: what was flushed before it still recomputes."""
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


@dataclass(frozen=True, slots=True)
class RequestPhases:
    """One joined request's phases, seconds (times on the run's clock)."""

    arrival_s: float
    network_s: float | None
    frontend_s: float | None
    queue_s: float | None
    prefill_s: float | None
    server_ttft_s: float | None
    server_first_token_s: float | None
    delivery_s: float | None
    decode_s: float | None
    server_finish_s: float | None
    client_minus_server_ttft_s: float | None

    def phase(self, name: str) -> float | None:
        value: float | None = getattr(self, f"{name}_s")
        return value


def _sent_floor(record: RequestRecord) -> float | None:
    """The earliest the server can have seen the request: its headers written (else sent)."""
    phases = record.phases
    return phases.headers_sent_s if phases is not None and phases.headers_sent_s is not None else record.sent_s


def clock_offset(pairs: Sequence[tuple[RequestRecord, ServerSpan]], origin_unix_s: float) -> ClockOffset:
    """The offset from the join itself (same host: the server's wall clock and the run's share a
    clock, so 0 is expected and checked): each joined request bounds it from both sides. 0 is kept
    when the bounds allow it; else the nearest bound (or the middle when they cross), stated."""
    lows, highs = [], []
    for record, span in pairs:
        arrival = span.start_unix_s - origin_unix_s
        floor = _sent_floor(record)
        if floor is not None:
            lows.append(floor - arrival)
        if span.ttft_s is not None and record.chunk_times_s:
            highs.append(record.chunk_times_s[0] - (arrival + span.ttft_s))
    low, high = (max(lows) if lows else None), (min(highs) if highs else None)
    base = "server wall clock - the run's origin_unix_s (same host: one clock)"
    if low is None and high is None:
        return ClockOffset(offset_s=0.0, low_s=None, high_s=None, method=base + "; no joined request bounds it")
    lo, hi = (low if low is not None else float("-inf")), (high if high is not None else float("inf"))
    if lo > hi:
        mid = (lo + hi) / 2
        return ClockOffset(
            offset_s=mid, low_s=low, high_s=high, method=base + "; the join's bounds cross: their middle"
        )
    if lo <= 0.0 <= hi:
        return ClockOffset(offset_s=0.0, low_s=low, high_s=high, method=base + "; 0 lies within the join's bounds")
    nearest = lo if lo > 0.0 else hi
    return ClockOffset(offset_s=nearest, low_s=low, high_s=high, method=base + "; moved to the join's nearest bound")


def request_phases(record: RequestRecord, span: ServerSpan, origin_unix_s: float, offset_s: float) -> RequestPhases:
    arrival = span.start_unix_s - origin_unix_s + offset_s
    first_token = arrival + span.ttft_s if span.ttft_s is not None else None
    first_chunk = record.chunk_times_s[0] if record.chunk_times_s else None
    client_ttft = record.ttft_s
    return RequestPhases(
        arrival_s=arrival,
        network_s=arrival - record.sent_s if record.sent_s is not None else None,
        frontend_s=span.frontend_s,
        queue_s=span.queue_s,
        prefill_s=span.prefill_s,
        server_ttft_s=span.ttft_s,
        server_first_token_s=first_token,
        delivery_s=first_chunk - first_token if first_chunk is not None and first_token is not None else None,
        decode_s=span.decode_s,
        server_finish_s=arrival + span.e2e_s if span.e2e_s is not None else None,
        client_minus_server_ttft_s=client_ttft - span.ttft_s
        if client_ttft is not None and span.ttft_s is not None
        else None,
    )


def _key(record: RequestRecord) -> tuple[int, int | None, int]:
    return (record.point, record.worker, record.id)


def joined_phases(
    records: Iterable[RequestRecord], spans: SpanIndex, origin_unix_s: float, due_s: float
) -> tuple[dict[tuple[int, int | None, int], RequestPhases], ClockOffset]:
    """Each ok record's phases by (point, worker, id) (a span received after ``due_s`` is late: not joined)."""
    pairs = []
    for r in records:
        span = spans.by_request.get(_key(r))
        if r.ok and span is not None and span.received_s <= due_s:
            pairs.append((r, span))
    clock = clock_offset(pairs, origin_unix_s)
    return {_key(r): request_phases(r, s, origin_unix_s, clock.offset_s) for r, s in pairs}, clock


def http_phases(records: Iterable[RequestRecord]) -> dict[str, list[float]]:
    """The client's HTTP phases of the records that got a response, seconds."""
    out: dict[str, list[float]] = {name: [] for name in HTTP_PHASES}
    for r in records:
        phases = r.phases
        if phases is None or phases.response_headers_s is None or r.sent_s is None:
            continue
        if phases.pool_wait_s is not None:
            out["pool_wait"].append(phases.pool_wait_s)
        if phases.connect_s is not None:
            out["connect"].append(phases.connect_s)
        if phases.headers_sent_s is not None:
            out["headers_to_sent"].append(r.sent_s - phases.headers_sent_s)
        out["ttfb"].append(phases.response_headers_s - r.sent_s)
        if r.chunk_times_s:
            out["headers_to_first_chunk"].append(r.chunk_times_s[0] - phases.response_headers_s)
    return out


def point_server_phases(
    point: int,
    population: Sequence[RequestRecord],
    everyone: Sequence[RequestRecord],
    spans: SpanIndex,
    origin_unix_s: float,
    start_s: float,
    end_s: float,
) -> ServerPhases:
    """A point's server phases: joined over its window ``population``; spans counted over
    ``everyone`` (all its records)."""
    due = end_s + GRACE_S
    keys = {_key(r): r for r in everyone}
    mine = {k: s for k, s in spans.by_request.items() if k[0] == point}
    late = sum(1 for s in mine.values() if s.received_s > due)
    unknown = sum(1 for k in mine if k not in keys) + sum(1 for t in spans.foreign_received_s if start_s <= t <= due)
    failed = sum(1 for k, s in mine.items() if k in keys and not keys[k].ok and s.received_s <= due)
    attrs: dict[str, int] = {}
    for s in mine.values():
        for name in s.unknown:
            attrs[name] = attrs.get(name, 0) + 1
    phases, clock = joined_phases(population, spans, origin_unix_s, due)
    ok = [r for r in population if r.ok]
    values = {name: [v for p in phases.values() if (v := p.phase(name)) is not None] for name in PHASES}
    return ServerPhases(
        requests=len(ok),
        joined=len(phases),
        joined_share=len(phases) / len(ok) if ok else None,
        spans=len(mine),
        failed_with_span=failed,
        late_spans=late,
        unknown_spans=unknown,
        unknown_attributes=attrs,
        receiver=spans.receiver,
        clock=clock,
        phases={name: distribution(v) for name, v in values.items()},
        slowest=_slowest(ok, phases),
    )


def _slowest(
    ok: Sequence[RequestRecord], phases: dict[tuple[int, int | None, int], RequestPhases]
) -> SlowestPhases | None:
    joined = sorted((r for r in ok if _key(r) in phases and r.ttft_s is not None), key=lambda r: r.ttft_s or 0.0)
    if not joined:
        return None
    n = max(1, len(joined) // 100)
    tail = joined[-n:]
    mean: dict[str, float | None] = {}
    for name in PHASES:
        vals = [v for r in tail if (v := phases[_key(r)].phase(name)) is not None]
        mean[name] = sum(vals) / len(vals) if vals else None
    return SlowestPhases(requests=n, ttft_from_s=tail[0].ttft_s, mean_s=mean)


@dataclass(frozen=True, slots=True)
class SlowRequest:
    """One of a run's slowest requests by client TTFT, with its phases (None: no span joined)."""

    record: RequestRecord
    phases: RequestPhases | None


def slowest_requests(
    points: Iterable[tuple[Iterable[RequestRecord], float]], spans: SpanIndex, origin_unix_s: float, n: int
) -> list[SlowRequest]:
    """The ``n`` ok requests with the largest client TTFT over ``points`` (each point's records
    and when its spans were due: its end + GRACE_S), slowest first, each joined as the results
    join it (``joined_phases``, per point: its own clock offset). Only the ``n`` are kept."""
    heap: list[tuple[float, int, SlowRequest]] = []
    seq = 0
    for records, due_s in points:
        ok = [r for r in records if r.ok and r.ttft_s is not None]
        phases, _ = joined_phases(ok, spans, origin_unix_s, due_s)
        for r in ok:
            seq += 1
            item = (r.ttft_s or 0.0, seq, SlowRequest(r, phases.get(_key(r))))
            if len(heap) < n:
                heapq.heappush(heap, item)
            elif item[0] > heap[0][0]:
                heapq.heapreplace(heap, item)
    return [s for _, _, s in sorted(heap, key=lambda item: (-item[0], item[1]))]
