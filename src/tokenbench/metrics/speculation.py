"""Speculative decoding and the server's own timing over a point, from what each response said
(records' Speculation and ServerTiming parts; METRICS.md "Speculative decoding"). Pure.

Population: the point's window population, successful requests that carried the figures (the
server reports them on a reply's last chunk: a failed or cut stream has none).

Acceptance, each named by its weight (results.SpeculationStats):

    acceptance_rate_token_weighted   = sum accepted / sum drafted     (a long reply weighs more)
    acceptance_rate_request_weighted = mean over requests of accepted / drafted
    acceptance_length_step_weighted  = 1 + sum accepted / sum steps   (tokens a verify step gives)
    acceptance_length_request_weighted = mean over requests of 1 + accepted / steps
    by_position[i].rate              = sum accepted at i / sum drafted at i

A request's own acceptance length is the server's when it gives one (vLLM's mean_acceptance_length),
else 1 + accepted / steps; without steps (llama.cpp) there is none. Draft tokens by position come
from a request's steps in order, else from its histogram when every step proposed the full draft
length (records.Speculation.by_position); a request without them leaves the positions' drafts, and
so their rates, unknown (None), while their accepted counts still add up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from tokenbench.metrics.stats import distribution
from tokenbench.records import Outcome, RequestRecord, Speculation
from tokenbench.results import PositionAcceptance, ServerSpeculation, ServerTimingStats, SpeculationStats


def _source(values: list[str | None]) -> str | None:
    """The engine shape most requests were read from."""
    named = Counter(v for v in values if v is not None)
    return named.most_common(1)[0][0] if named else None


def _total(values: list[int | None]) -> int | None:
    """The sum, when every request gave one."""
    return sum(v for v in values if v is not None) if values and all(v is not None for v in values) else None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _length(s: Speculation) -> float | None:
    if s.spec_acceptance_length is not None:
        return s.spec_acceptance_length
    if s.spec_steps and s.spec_accepted_tokens is not None:
        return 1.0 + s.spec_accepted_tokens / s.spec_steps
    return None


def _rate(s: Speculation) -> float | None:
    if s.spec_draft_tokens and s.spec_accepted_tokens is not None:
        return s.spec_accepted_tokens / s.spec_draft_tokens
    return None


def _by_position(specs: Sequence[Speculation]) -> list[PositionAcceptance] | None:
    accepted: list[int] = []
    drafted: list[int] = []
    drafts_known = True
    any_known = False
    for s in specs:
        counts = s.by_position()
        if counts is None:
            continue
        any_known = True
        got, proposed = counts
        if len(got) > len(accepted):
            accepted += [0] * (len(got) - len(accepted))
            drafted += [0] * (len(got) - len(drafted))
        for i, n in enumerate(got):
            accepted[i] += n
        if proposed is None:
            drafts_known = False
        else:
            for i, n in enumerate(proposed):
                drafted[i] += n
    if not any_known:
        return None
    return [
        PositionAcceptance(
            position=i,
            accepted=accepted[i],
            drafted=drafted[i] if drafts_known else None,
            rate=accepted[i] / drafted[i] if drafts_known and drafted[i] else None,
        )
        for i in range(len(accepted))
    ]


def speculation_stats(population: Sequence[RequestRecord], server: ServerSpeculation | None) -> SpeculationStats | None:
    """A point's speculation (module doc); None when no request reported any and the server's
    counters say none."""
    specs = [r.speculation for r in population if r.outcome is Outcome.OK and r.speculation is not None]
    if not specs and server is None:
        return None
    accepted = _total([s.spec_accepted_tokens for s in specs])
    drafted = _total([s.spec_draft_tokens for s in specs])
    steps = _total([s.spec_steps for s in specs])
    rates = [r for r in map(_rate, specs) if r is not None]
    lengths = [x for x in map(_length, specs) if x is not None]
    return SpeculationStats(
        requests=len(specs),
        source=_source([s.spec_from for s in specs]),
        steps=steps,
        draft_tokens=drafted,
        accepted_tokens=accepted,
        acceptance_rate_token_weighted=accepted / drafted if accepted is not None and drafted else None,
        acceptance_rate_request_weighted=_mean(rates),
        acceptance_rate=distribution(rates),
        acceptance_length_step_weighted=1.0 + accepted / steps if accepted is not None and steps else None,
        acceptance_length_request_weighted=_mean(lengths),
        by_position=_by_position(specs),
        server=server,
    )


def server_timing_stats(population: Sequence[RequestRecord]) -> ServerTimingStats | None:
    """The server's own timing over a point's successful requests that carried it (None: none did)."""
    rows = [r for r in population if r.outcome is Outcome.OK and r.server_timing is not None]
    if not rows:
        return None
    timings = [r.server_timing for r in rows if r.server_timing is not None]
    outside = [x for x in (r.ttft_outside_server_s for r in rows) if x is not None]
    return ServerTimingStats(
        requests=len(rows),
        source=_source([t.reported_timing_from for t in timings]),
        queue_s=distribution(t.reported_queue_s for t in timings if t.reported_queue_s is not None),
        prefill_s=distribution(t.reported_prefill_s for t in timings if t.reported_prefill_s is not None),
        ttft_s=distribution(t.reported_ttft_s for t in timings if t.reported_ttft_s is not None),
        ttft_outside_server_s=distribution(outside),
        decode_s=distribution(t.reported_decode_s for t in timings if t.reported_decode_s is not None),
        itl_s=distribution(t.reported_itl_s for t in timings if t.reported_itl_s is not None),
    )
