"""A point's speculation and server timing from its records' parts, against hand-worked answers."""

from __future__ import annotations

import pytest

from tokenbench.metrics.speculation import server_timing_stats, speculation_stats
from tokenbench.records import Outcome, RequestRecord, ServerTiming, Speculation
from tokenbench.results import ServerSpeculation
from tokenbench.telemetry.prom import MetricNames, normalize, parse
from tokenbench.telemetry.summary import point_server


def _record(i: int, spec: Speculation | None = None, timing: ServerTiming | None = None, ok: bool = True):
    return RequestRecord(
        point=0,
        id=i,
        scheduled_s=0.0,
        sent_s=1.0,
        chunk_times_s=[1.5, 1.6],
        end_s=1.6,
        outcome=Outcome.OK if ok else Outcome.STREAM_ERROR,
        speculation=spec,
        server_timing=timing,
    )


def _steps(accepted: list[int], k: int) -> Speculation:
    """vLLM's figures of a request whose steps accepted ``accepted``, each drafting ``k`` (detailed)."""
    hist = [0] * (k + 1)
    for a in accepted:
        hist[a] += 1
    n = sum(accepted)
    return Speculation(
        spec_steps=len(accepted),
        spec_draft_tokens=k * len(accepted),
        spec_accepted_tokens=n,
        spec_acceptance_length=1 + n / len(accepted),
        spec_acceptance_rate=n / (k * len(accepted)),
        spec_tokens=k,
        spec_accepted_histogram=tuple(hist),
        spec_step_accepted=tuple(accepted),
        spec_step_drafted=(k,) * len(accepted),
        spec_from="vllm",
    )


def test_token_and_request_weighted_acceptance_differ_as_the_lengths_weigh():
    # a long reply accepting everything, a short one nothing: tokens weigh the long one
    long, short = _steps([3] * 9, 3), _steps([0], 3)
    failed = _steps([1], 3)  # a failed request's figures are not counted
    stats = speculation_stats([_record(0, long), _record(1, short), _record(2, failed, ok=False), _record(3)], None)
    assert stats is not None and stats.requests == 2 and stats.source == "vllm"
    assert (stats.steps, stats.draft_tokens, stats.accepted_tokens) == (10, 30, 27)
    assert stats.acceptance_rate_token_weighted == pytest.approx(27 / 30)
    assert stats.acceptance_rate_request_weighted == pytest.approx((1.0 + 0.0) / 2)
    assert stats.acceptance_length_step_weighted == pytest.approx(1 + 27 / 10)
    assert stats.acceptance_length_request_weighted == pytest.approx((4.0 + 1.0) / 2)
    assert stats.acceptance_rate.count == 2 and stats.acceptance_rate.max == 1.0
    assert [(p.position, p.accepted, p.drafted, p.rate) for p in stats.by_position or []] == [
        (0, 9, 10, 0.9),
        (1, 9, 10, 0.9),
        (2, 9, 10, 0.9),
    ]


def test_positions_from_a_histogram_and_unknown_drafts():
    summary = Speculation(
        spec_steps=4, spec_draft_tokens=8, spec_accepted_tokens=3, spec_tokens=2, spec_accepted_histogram=(2, 1, 1)
    )
    assert summary.by_position() == ([2, 1], [4, 4])
    # an n-gram step proposed fewer than k: the drafts by position are not known
    fewer = Speculation(
        spec_steps=4, spec_draft_tokens=6, spec_accepted_tokens=3, spec_tokens=2, spec_accepted_histogram=(2, 1, 1)
    )
    assert fewer.by_position() == ([2, 1], None)
    stats = speculation_stats([_record(0, summary), _record(1, fewer)], None)
    assert stats is not None and stats.by_position is not None
    assert [(p.accepted, p.drafted, p.rate) for p in stats.by_position] == [(4, None, None), (2, None, None)]
    # llama.cpp: drafts and accepted only, no steps: a rate, no length, no positions
    llama = Speculation(spec_draft_tokens=10, spec_accepted_tokens=4, spec_acceptance_rate=0.4, spec_from="llamacpp")
    stats = speculation_stats([_record(0, llama)], None)
    assert stats is not None and stats.acceptance_rate_token_weighted == pytest.approx(0.4)
    assert stats.steps is None and stats.acceptance_length_step_weighted is None and stats.by_position is None


def test_no_speculation_is_no_part():
    assert speculation_stats([_record(0)], None) is None
    assert server_timing_stats([_record(0)]) is None


def test_the_server_timing_and_the_ttft_outside_it():
    timing = ServerTiming(
        reported_queue_s=0.01, reported_prefill_s=0.39, reported_ttft_s=0.4, reported_timing_from="vllm"
    )
    stats = server_timing_stats([_record(0, timing=timing), _record(1, timing=timing)])
    assert stats is not None and stats.requests == 2 and stats.source == "vllm"
    assert stats.queue_s.p50 == pytest.approx(0.01) and stats.ttft_s.p50 == pytest.approx(0.4)
    assert stats.ttft_outside_server_s.p50 == pytest.approx(0.5 - 0.4)  # the client's TTFT is 0.5
    assert stats.decode_s.count == 0


SCRAPE = """# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {tokens}
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="0"}} {p0}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="1"}} {p1}
"""


def test_the_servers_speculation_counters_over_a_point():
    from tokenbench.backends.vllm import METRICS

    def scrape(t: float, **values: float) -> dict[str, object]:
        return {"t_s": t, "ok": True, "values": normalize(parse(SCRAPE.format(**values)), METRICS)}

    samples = [
        scrape(0.0, drafts=10, tokens=20, accepted=12, p0=8, p1=4),
        scrape(5.0, drafts=30, tokens=60, accepted=42, p0=26, p1=16),
    ]
    server = point_server(samples, 0.0, 5.0)
    assert server is not None and server.speculation == ServerSpeculation(
        drafts=20,
        draft_tokens=40,
        accepted_tokens=30,
        accepted_by_position=[18, 12],
        acceptance_rate=30 / 40,
        acceptance_length=1 + 30 / 20,
        acceptance_rate_by_position=[18 / 20, 12 / 20],
    )
    # a server without the counters: no speculation key at all
    plain = point_server([{"t_s": 0.0, "ok": True, "values": {}}, {"t_s": 5.0, "ok": True, "values": {}}], 0.0, 5.0)
    assert plain is not None and "speculation" not in plain.model_dump(exclude_unset=True)
    assert MetricNames().spec_drafts == ()
