"""The truth suite: every headline number against what the scripted mock actually did.

The mock (``tokenbench mock``) logs when it received each request, when it admitted it to a
generation slot (``--max-streams`` caps them, the rest wait FIFO) and when it wrote each chunk, on
the machine's monotonic clock, which is the run's clock shifted by its origin. So each test knows
the truth exactly, and asserts what results.json says against it, with stated tolerances:
rates within 3% when the server keeps up (the schedule is exact), 10% above capacity (the
backlog estimate), latencies within 5 ms (client-side read and parse time).

Mock service time in every test: TTFT 50 ms + 19 x 20 ms = 0.43 s for 20 tokens.

The conversation APIs (chat, Anthropic's Messages, OpenAI's Responses) are held to the same
bounds: the mock scripts each one's events on the same schedule, so a latency, a rate or a token
count that differs between them is the client's error, and a fault is typed the same whatever
API carried it.
"""

from __future__ import annotations

import io
import json
import urllib.request

import pytest
from rich.console import Console

from tokenbench.config import BackendConfig, DatasetConfig, RateLoad, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.config.slo import SLOConfig
from tokenbench.run import run

TTFT_S, ITL_S, TOKENS = 0.050, 0.020, 20
SERVICE_S = TTFT_S + (TOKENS - 1) * ITL_S
MOCK = {"ttft_ms": TTFT_S * 1e3, "itl_ms": ITL_S * 1e3}


CONVERSATION_APIS = ["chat", "messages", "responses"]


def measure(url, tmp_path, load, stop, slo=SLOConfig(ttft_s=10.0), api="chat"):
    cfg = RunConfig(
        target=TargetConfig(url=url, api=api),
        loads=[load],
        stop=stop,
        slo=slo,
        dataset=DatasetConfig(input_tokens=8, output_tokens=TOKENS, num_prompts=10),
        backend=BackendConfig(name="vllm", metrics_interval_s=0.1),  # the mock speaks vLLM's names
        live=False,
        out_dir=tmp_path / "run",
    )
    result = run(cfg, Console(file=io.StringIO()))
    point = result.results["points"][0]
    origin = result.results["clock"]["origin_monotonic_s"]
    records = [json.loads(line) for line in (result.run_dir / "records.jsonl").read_text().splitlines()]
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        log = json.loads(resp.read())
    # the mock's log on the run's time axis, keyed like the records (the reply id)
    moments = ("received_s", "admitted_s", "finished_s")
    deliveries = {
        rid: {
            **d,
            **{k: d[k] - origin for k in moments if d[k] is not None},
            "chunk_times_s": [t - origin for t in d["chunk_times_s"]],
        }
        for rid, d in log.items()
    }
    return point, records, deliveries


def consistent(point):
    """What must hold at any point: goodput within requests/s, good within ended."""
    assert point["goodput_per_s"] <= point["requests_per_s"] + 1e-9
    assert 0 <= point["good_fraction"] <= 1


@pytest.mark.parametrize("api", CONVERSATION_APIS)
def test_open_loop_below_capacity_equals_the_offered_load(start_mock, tmp_path, api):
    """5 req/s constant for 4 s (20 arrivals), no cap: 5.0 req/s and 100 tok/s exactly, though no
    request ends in the first 0.43 s and eight still stream after the last arrival. On every
    conversation API: TTFT and E2E within 5 ms of the mock's writes, ITL within 2 ms of its
    20 ms, each reply's 20 tokens counted from the server's usage."""
    url = start_mock(**MOCK)
    point, records, log = measure(
        url, tmp_path, RateLoad(rate_per_s=5, arrival="constant"), StopConfig(duration_s=4, drain_timeout_s=10), api=api
    )
    consistent(point)
    assert len(log) == 20 and point["offered_per_s"] == pytest.approx(5.0)
    assert point["requests_per_s"] == pytest.approx(5.0, rel=0.03)
    assert point["output_tokens_per_s"] == pytest.approx(5.0 * TOKENS, rel=0.03)
    assert point["goodput_per_s"] == pytest.approx(point["requests_per_s"])
    # latencies: the client's TTFT/E2E against the mock's first/last write of the same reply
    ttft = [log[r["response_id"]]["chunk_times_s"][0] - log[r["response_id"]]["received_s"] for r in records]
    assert point["ttft_s"]["mean"] == pytest.approx(sum(ttft) / len(ttft), abs=0.005)
    e2e = [log[r["response_id"]]["chunk_times_s"][-1] - log[r["response_id"]]["received_s"] for r in records]
    assert point["e2e_s"]["p50"] == pytest.approx(sorted(e2e)[10], abs=0.005)
    assert point["queue_s"]["max"] < 0.05  # no slot to wait for: only the client loop's own lag
    assert point["itl_s"]["mean"] == pytest.approx(ITL_S, abs=0.002)
    assert point["tpot_s"]["mean"] == pytest.approx(ITL_S, abs=0.002)
    for r in records:  # one chunk per token, and the count is the server's usage, not the client's
        assert r["outcome"] == "ok" and r["end_marker"] and len(r["chunk_times_s"]) == TOKENS
        assert r["output_tokens"] == TOKENS and r["output_tokens_source"] == "server"
        assert r["prompt_tokens"] > 0
    # mean in flight = arrival rate x E2E (Little's law over the window)
    assert point["concurrency"]["mean"] == pytest.approx(5.0 * SERVICE_S, rel=0.1)


def test_open_loop_above_capacity_gives_the_servers_rate_and_its_queue(start_mock, tmp_path):
    """5 req/s into one generation slot (2.33 req/s): the backlog drains within the point; the
    rate is the server's, TTFT carries the server-side wait the mock logged."""
    url = start_mock(max_streams=1, **MOCK)
    point, records, log = measure(
        url, tmp_path, RateLoad(rate_per_s=5, arrival="constant"), StopConfig(duration_s=4, drain_timeout_s=30)
    )
    consistent(point)
    assert point["requests_in_window"]["by_outcome"] == {"ok": 20}
    served = sorted(log.values(), key=lambda d: d["admitted_s"])
    truth_rate = (len(served) - 1) / (served[-1]["admitted_s"] - served[0]["admitted_s"])
    assert truth_rate == pytest.approx(1 / SERVICE_S, rel=0.03)
    assert point["requests_per_s"] == pytest.approx(truth_rate, rel=0.10)
    assert point["output_tokens_per_s"] == pytest.approx(truth_rate * TOKENS, rel=0.10)
    waits = [d["wait_s"] for d in log.values()]
    ttft = [log[r["response_id"]]["chunk_times_s"][0] - log[r["response_id"]]["received_s"] for r in records]
    assert max(waits) > 3.0  # the last waited for the 19 before it
    assert point["ttft_s"]["mean"] == pytest.approx(sum(ttft) / len(ttft), abs=0.01)
    assert point["ttft_s"]["max"] == pytest.approx(max(ttft), abs=0.01)
    assert point["server"]["running"]["mean"] == pytest.approx(1.0, abs=0.05)
    assert point["server"]["waiting"]["max"] >= 5


def test_closed_loop_with_ramp_counts_the_steady_window(start_mock, tmp_path):
    """4 users spawned over 1 s, 4 s in all: over the 3 s window 4 requests are always in flight,
    requests/s = 4 / E2E; the server's running gauge over the same window is 4 (over the whole
    point, ramp and drain included, it is lower)."""
    url = start_mock(**MOCK)
    point, records, log = measure(
        url, tmp_path, UsersLoad(users=4, ramp_up_s=1.0), StopConfig(duration_s=4, drain_timeout_s=10)
    )
    consistent(point)
    start, end = point["window"]["start_s"], point["window"]["end_s"]
    assert end - start == pytest.approx(3.0, abs=0.01)
    # truth: each reply's life at the mock (received .. last write), by its share in the window
    share = sum(
        max(0.0, min(d["chunk_times_s"][-1], end) - max(d["received_s"], start))
        / (d["chunk_times_s"][-1] - d["received_s"])
        for d in log.values()
    )
    assert point["requests_per_s"] == pytest.approx(share / 3.0, rel=0.03)
    assert point["requests_per_s"] == pytest.approx(4 / point["e2e_s"]["mean"], rel=0.03)
    tokens = sum(1 for d in log.values() for t in d["chunk_times_s"] if start <= t < end)
    assert point["output_tokens_per_s"] == pytest.approx(tokens / 3.0, rel=0.03)
    assert point["concurrency"]["mean"] == pytest.approx(4.0, abs=0.1)
    assert point["server"]["running"]["mean"] == pytest.approx(4.0, abs=0.2)
    assert point["server_whole_point"]["running"]["mean"] < point["server"]["running"]["mean"] - 0.3


def test_low_rate_window_ends_at_the_deadline(start_mock, tmp_path):
    """1 req/s for 5 s: 1.00 req/s, not 5 / 4.43 s (the last reply ended 0.57 s before the deadline)."""
    url = start_mock(**MOCK)
    point, _, log = measure(
        url, tmp_path, RateLoad(rate_per_s=1, arrival="constant"), StopConfig(duration_s=5, drain_timeout_s=10)
    )
    consistent(point)
    assert len(log) == 5 and point["window_s"] == pytest.approx(5.0, abs=0.01)
    assert point["requests_per_s"] == pytest.approx(1.0, rel=0.01)
    assert point["output_tokens_per_s"] == pytest.approx(TOKENS, rel=0.01)


def test_concurrency_cap_under_overload_keeps_every_wait(start_mock, tmp_path):
    """10 req/s, --max-concurrency 1, 2 s of arrivals, 1.5 s drain: 8 served, 1 cancelled in
    flight, 11 never sent. Every one of the 20 is in the queue-delay distribution: the sent ones
    with the wait the mock's log gives, the never-sent with a lower bound (censored)."""
    url = start_mock(**MOCK)
    point, records, log = measure(
        url,
        tmp_path,
        RateLoad(rate_per_s=10, arrival="constant", max_concurrency=1),
        StopConfig(duration_s=2, drain_timeout_s=1.5),
        slo=SLOConfig(ttft_s=0.5),
    )
    by = point["requests_in_window"]["by_outcome"]
    assert sum(by.values()) == 20 and by["ok"] == len([d for d in log.values() if d["finished_s"]])
    assert by.get("not_sent", 0) >= 10 and point["queue_s_censored"] == by["not_sent"]
    assert point["queue_s"]["count"] == 20
    sent_waits = [log[r["response_id"]]["received_s"] - r["scheduled_s"] for r in records if r["response_id"]]
    assert point["queue_s"]["max"] >= max(sent_waits) - 0.005
    unsent_bounds = [r["closed_s"] - r["scheduled_s"] for r in records if r["outcome"] == "not_sent"]
    assert min(unsent_bounds) > 1.49  # each waited at least to the end of the point (the last arrival: 1.9 s)
    # the rate is the server's over the point (it was busy to the end): 1 / 0.43 s
    # The server was busy to the end of the point, so the period runs to it; its work is what
    # the mock finished and wrote (the request cancelled in flight wrote most of its tokens).
    period = point["span"]["end_s"] - point["window"]["start_s"]
    assert point["rate_period_s"] == pytest.approx(period)
    finished = [d for d in log.values() if d["finished_s"] is not None]
    assert point["requests_per_s"] == pytest.approx(len(finished) / period, rel=0.01)
    written = sum(len(d["chunk_times_s"]) for d in log.values())
    assert point["output_tokens_per_s"] == pytest.approx(written / period, rel=0.03)
    assert point["output_tokens_per_s"] == pytest.approx(TOKENS / SERVICE_S, rel=0.10)  # one stream's pace
    # goodput judges the user's wait: only the first requests got a token within 0.5 s of arriving
    assert point["goodput_per_s"] < point["requests_per_s"] / 3


# How each fault ends a request, whatever API carried it.
FAULT_OUTCOMES = {
    "http_500": "http_error",
    "disconnect": "stream_error",
    "error_event": "stream_error",
    "no_content": "no_output",
    "abort": "stream_error",
}


@pytest.mark.parametrize("api", CONVERSATION_APIS)
@pytest.mark.parametrize("fault", list(FAULT_OUTCOMES))
def test_each_fault_counts_as_a_failure_in_every_headline_number(start_mock, tmp_path, fault, api):
    """Every second request fails: requests/s and goodput are half the offered rate, the good
    fraction is 1/2, the latency distributions hold the successful half only, and the output
    rate counts what the mock wrote (partial replies of failures included). Each API's fault
    (an error body, a dropped stream, its error or failed event, a reply without content) is
    typed as chat's is."""
    url = start_mock(fault=fault, fault_every=2, fault_after_chunks=5, **MOCK)
    point, records, log = measure(
        url, tmp_path, RateLoad(rate_per_s=5, arrival="constant"), StopConfig(duration_s=2, drain_timeout_s=10), api=api
    )
    failures = [r for r in records if r["outcome"] != "ok"]
    assert len(failures) == 5 and {r["outcome"] for r in failures} == {FAULT_OUTCOMES[fault]}
    assert all(r["error"] for r in failures)
    consistent(point)
    assert point["requests_in_window"]["total"] == 10 and point["requests_in_window"]["ok"] == 5
    assert point["requests_per_s"] == pytest.approx(2.5, rel=0.03)
    assert point["goodput_per_s"] == pytest.approx(2.5, rel=0.03) and point["good_fraction"] == 0.5
    assert point["ttft_s"]["count"] == point["e2e_s"]["count"] == 5
    assert point["e2e_s"]["min"] == pytest.approx(SERVICE_S, abs=0.005)
    # a failed reply delivered its first 5 chunks (the mock may write more after an error event,
    # which the client rightly stops reading)
    delivered = sum(min(len(d["chunk_times_s"]), 5) if d["fault"] else len(d["chunk_times_s"]) for d in log.values())
    assert point["output_tokens_per_s"] == pytest.approx(delivered / 2.0, rel=0.03)
