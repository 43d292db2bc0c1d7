"""The load generator: who gets which request, when requests start under open and closed loop,
and that every request created is one record."""

import asyncio

import pytest
from run_helpers import config, quiet, records_of

from tokenbench.config import DatasetConfig, RateLoad, StopConfig, UsersLoad
from tokenbench.datasets import build_requests, with_prefix
from tokenbench.loadgen import LiveStats, RequestSource
from tokenbench.records import Outcome, Request, RequestRecord
from tokenbench.run import run


def test_open_loop_rate_and_queue_delay(start_mock, tmp_path):
    url = start_mock(ttft_ms=20, itl_ms=5)
    loads = [
        RateLoad(rate_per_s=20, arrival="constant"),
        RateLoad(rate_per_s=20, arrival="constant", max_concurrency=1),
    ]
    result = run(config(url, tmp_path, loads, StopConfig(duration_s=1.0), output_tokens=10), quiet())
    free, capped = result.results["points"]
    assert free["requests"]["total"] == 20  # arrivals never wait on responses
    assert free["queue_s"]["p99"] < 0.02
    assert free["concurrency"]["peak"] >= 2
    # one slot, each request ~65 ms, arrivals every 50 ms: the backlog shows as queue delay
    assert capped["concurrency"]["peak"] == 1
    assert capped["queue_s"]["max"] > 0.1


def test_max_requests_stops_and_every_request_is_one_record(mock_server, tmp_path):
    url = mock_server(ttft_ms=1, itl_ms=1)
    result = run(config(url, tmp_path, [UsersLoad(users=5)], StopConfig(max_requests=23)), quiet())
    recs = records_of(result.run_dir)
    assert len(recs) == 23 and sorted(r["id"] for r in recs) == list(range(23))


def test_unique_prefix_differs_per_request_even_when_prompts_cycle():
    reqs, _ = build_requests(DatasetConfig(num_prompts=2, system_prompt="sys"), None, 0)
    source = RequestSource(reqs, unique_nonce="abcd")
    texts = [source.take()[1].messages[-1]["content"] for _ in range(4)]
    assert len(set(texts)) == 4 and texts[0].startswith("[abcd-0] ")
    assert with_prefix(reqs[0], "X").messages[0]["content"] == "sys"  # the system prompt stays shared


def _prompts(n: int) -> list[Request]:
    return [Request(prompt=f"p{i}", max_tokens=1) for i in range(n)]


def test_request_source_cycles_the_list_with_ids_unique_per_run():
    source = RequestSource(_prompts(3))
    taken = [source.take() for _ in range(7)]
    assert [i for i, _ in taken] == list(range(7))
    assert [r.prompt for _, r in taken] == ["p0", "p1", "p2", "p0", "p1", "p2", "p0"]
    with pytest.raises(ValueError, match="no requests"):
        RequestSource([])


def test_each_point_starts_where_its_load_and_seed_say_whatever_came_before():
    load, other = UsersLoad(users=4), UsersLoad(users=8)

    def first_prompts(source: RequestSource, load, seed: int) -> list[str]:
        source.start_point(load, seed)
        return [source.take()[1].prompt for _ in range(3)]

    fresh = RequestSource(_prompts(97))
    used = RequestSource(_prompts(97))
    for _ in range(11):  # an earlier point completed 11 requests
        used.take()
    assert first_prompts(fresh, load, 0) == first_prompts(used, load, 0)
    starts = {first_prompts(RequestSource(_prompts(97)), point, seed)[0] for point in (load, other) for seed in (0, 1)}
    assert len(starts) > 1  # loads and seeds pick different places in the list
    assert used.take()[0] == 14  # ids go on across points: 11, then 3 more


def test_live_stats_count_errors_and_keep_the_last_ttfts_bounded():
    stats = LiveStats()
    for i in range(250):
        record = RequestRecord(point=0, id=i, scheduled_s=0.0, sent_s=0.0, chunk_times_s=[0.5, 0.6])
        record.outcome = Outcome.OK if i % 5 else Outcome.HTTP_ERROR
        stats.record_done(record)
    assert (stats.done, stats.errors, stats.output_chunks) == (250, 50, 500)
    assert 100 <= len(stats.last_ttfts_s) <= 200 and stats.last_ttfts_s[-1] == pytest.approx(0.5)


# --- trace replay ---------------------------------------------------------------------------------


def test_a_replay_sends_each_row_at_its_trace_time_over_the_speed(start_mock, tmp_path):
    """Speed 2: the mock receives row k at trace_time_k / 2 after row 1 (within a few ms); each
    record names its row; max_tokens is the row's output length (the mock streams that many)."""
    import hashlib
    import json
    import urllib.request

    from replay_helpers import EXPECTED_REUSE, ROWS, replay_config, write_trace

    from tokenbench.config import ReplayLoad

    url = start_mock(ttft_ms=5, itl_ms=2)
    trace = write_trace(tmp_path / "trace.jsonl")
    result = run(replay_config(url, trace, tmp_path, ReplayLoad(speed=2)), quiet())
    records = sorted(records_of(result.run_dir), key=lambda r: r["trace_row"])
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        log = json.loads(resp.read())
    received = [log[r["response_id"]]["received_s"] for r in records]
    assert [r["trace_row"] for r in records] == [1, 2, 3, 4]
    for (t_ms, _, out, _), got, r in zip(ROWS, received, records):
        # 10 ms: row 1 is the point's first send and leaves 1-2.6 ms after its time where the
        # others leave 0.3-1.4 ms after theirs (the point's set-up runs first); a fresh clone's
        # serial tier once read row 2 at 194.4 ms after it, not 200
        assert got - received[0] == pytest.approx(t_ms / 1e3 / 2, abs=0.010)
        assert r["outcome"] == "ok" and len(r["chunk_times_s"]) == out == r["output_tokens"]
    point, dataset = result.results["points"][0], result.results["dataset"]
    assert point["load"]["kind"] == "replay" and point["load"]["speed"] == 2
    assert point["populations"]["distributions"].startswith("requests scheduled in the window")
    # 4 rows over 0.8 s span 3 gaps: the window adds one mean gap, so offered = 3 / 0.8
    assert point["offered_per_s"] == pytest.approx(3 / 0.8, rel=0.01)
    assert dataset["trace"]["sha256"] == hashlib.sha256(trace.read_bytes()).hexdigest()
    assert dataset["trace"]["format"] == "mooncake" and dataset["trace"]["num_rows_used"] == 4
    assert {k: dataset["trace"]["expected_reuse"][k] for k in EXPECTED_REUSE} == EXPECTED_REUSE


@pytest.mark.serial  # the first send's lag is bounded at 20 ms: CI's side-by-side tier read 24-44 ms
def test_a_replay_capped_at_one_in_flight_shows_its_lag_as_queue_delay(mock_server, tmp_path):
    """Rows 0.1 s apart, replies ~0.25 s: with one slot the sends fall behind the trace, and the
    lag is queue delay, never hidden; without a cap nothing waits."""
    from replay_helpers import replay_config, write_trace

    from tokenbench.config import ReplayLoad

    rows = [(t, 10, 20, [t]) for t in range(0, 1000, 100)]
    trace = write_trace(tmp_path / "trace.jsonl", rows)
    capped = run(
        replay_config(mock_server(ttft_ms=20, itl_ms=10), trace, tmp_path, ReplayLoad(max_concurrency=1)), quiet()
    )
    point = capped.results["points"][0]
    assert point["requests"]["total"] == 10 and point["concurrency"]["peak"] == 1
    assert point["queue_s"]["max"] > 0.5  # the 10th row waited for 9 replies of ~0.2 s
    records = sorted(records_of(capped.run_dir), key=lambda r: r["trace_row"])
    lags = [r["sent_s"] - r["scheduled_s"] for r in records]
    assert lags[0] < 0.02 and lags[-1] > lags[2] > 0.1  # the backlog grows row after row


def test_a_replay_stops_at_the_duration_and_the_window_selects_rows(mock_server, tmp_path):
    from replay_helpers import replay_config, write_trace

    from tokenbench.config import ReplayLoad

    trace = write_trace(tmp_path / "trace.jsonl")
    # trace time [0.3, 2) s: rows 2-4 (0.4, 1.0, 1.6 s), offsets from row 2; at speed 1 row 4 is at 1.2 s
    load = ReplayLoad(start_s=0.3, end_s=2.0)
    result = run(replay_config(mock_server(ttft_ms=1, itl_ms=1), trace, tmp_path, load, duration_s=1.0), quiet())
    assert sorted(r["trace_row"] for r in records_of(result.run_dir)) == [2, 3]  # row 4 is past 1 s
    # what was sent, not what the window holds: rows 2 and 3 (the duration cut row 4)
    assert result.results["dataset"]["trace"]["num_rows_used"] == 2
    assert result.results["points"][0]["trace"]["num_rows_sent"] == 2
    assert result.results["points"][0]["window"]["end_s"] - result.results["points"][0]["span"]["start_s"] == (
        pytest.approx(1.0)
    )


# --- a failing server: backoff and the circuit breaker ---------------------------------------------


class _FailingClient:
    """Every request fails at once with HTTP 400 (a server that refuses everything)."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self.sent = 0

    async def send(self, request: Request, record: RequestRecord) -> None:
        self.sent += 1
        record.sent_s = record.closed_s = self.clock.now()
        record.outcome, record.status, record.error = Outcome.HTTP_ERROR, 400, "HTTP 400: bad request"


async def _failing_point(load, stop):
    from tokenbench.loadgen import LoadGenerator
    from tokenbench.records import RunClock

    clock = RunClock.start()
    client, written = _FailingClient(clock), []
    gen = LoadGenerator(client, clock, written.append)
    run_ = await gen.run_point(0, load, stop, RequestSource(_prompts(3)), seed=0)
    return run_, written, client


async def test_a_user_whose_requests_fail_backs_off_doubling_its_wait():
    """One user, every request failing at once: three at once, then waits of 0.1, 0.2, 0.4 s (the
    next, 0.8 s later, would start past the 1 s deadline): 6 requests, not thousands."""
    run_, written, client = await _failing_point(UsersLoad(users=1), StopConfig(duration_s=1.0))
    starts = sorted(r.scheduled_s for r in written)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert len(written) == client.sent == 6
    assert gaps == pytest.approx([0, 0, 0.1, 0.2, 0.4], abs=0.03)
    assert run_.stopped_early is None  # 6 failures in a row: below the breaker's 20


async def test_the_breaker_stops_a_closed_loop_point_the_server_fails_at_its_twentieth_failure():
    run_, written, client = await _failing_point(UsersLoad(users=4), StopConfig(duration_s=10.0))
    assert client.sent == len(written) == 20  # each failure ends before the next request starts
    assert run_.stopped_early is not None and run_.stopped_early.by == "circuit_breaker"
    assert run_.load_end_s == run_.stopped_early.at_s < run_.start_s + 2  # not the 10 s deadline
    assert run_.end_s - run_.start_s < 2


async def test_the_breaker_stops_an_open_loop_point_the_server_fails():
    run_, written, client = await _failing_point(RateLoad(rate_per_s=100), StopConfig(duration_s=10.0))
    assert client.sent == 20 and run_.stopped_early is not None
    # an arrival issued as the breaker tripped is never sent: a never-sent record, no request
    assert all(r.outcome is Outcome.NOT_SENT for r in written if r.sent_s is None) and len(written) <= 22
    assert run_.end_s - run_.start_s < 2  # 20 arrivals at 100/s: ~0.2 s, not the 10 s planned


async def test_a_point_the_breaker_stops_in_its_warm_up_has_an_empty_window_where_the_load_stopped():
    stop = StopConfig(duration_s=10.0, warmup_s=2.0)
    run_, written, _ = await _failing_point(UsersLoad(users=4, ramp_up_s=0.2), stop)
    assert run_.stopped_early is not None and len(written) == 20
    assert run_.window_start_s == run_.load_end_s == run_.stopped_early.at_s  # never a negative window


class _OneSlowUserClient(_FailingClient):
    """User 0's requests take 0.5 s and succeed; every other user's fail at once."""

    async def send(self, request: Request, record: RequestRecord) -> None:
        if record.user != 0:
            return await super().send(request, record)
        self.sent += 1
        record.sent_s = self.clock.now()
        await asyncio.sleep(0.5)
        record.closed_s = record.end_s = self.clock.now()
        record.outcome, record.status = Outcome.OK, 200


async def test_the_breaker_lets_a_request_in_flight_finish_and_its_user_sends_no_more():
    """the compiled client: a closed-loop user sends inline; when the breaker trips (4 failing users reach 20
    failures at ~0.3 s) user 0's request in flight drains to its own end, not cancelled, and
    user 0 sends nothing after it; the users backing off stop at once."""
    from tokenbench.loadgen import LoadGenerator
    from tokenbench.records import RunClock

    clock = RunClock.start()
    client, written = _OneSlowUserClient(clock), []
    gen = LoadGenerator(client, clock, written.append)
    run_ = await gen.run_point(0, UsersLoad(users=5), StopConfig(duration_s=10.0), RequestSource(_prompts(3)), seed=0)
    assert run_.stopped_early is not None and run_.stopped_early.at_s < run_.start_s + 0.45
    assert client.sent == len(written) == 21
    slow = [r for r in written if r.user == 0]
    assert [r.outcome for r in slow] == [Outcome.OK]  # drained, not cancelled
    assert 0.45 < run_.end_s - run_.start_s < 1.5  # the point waited for it, and no longer
    assert gen.stats.in_flight == 0 and gen.stats.active_users == 0


class _BusyOnceClient:
    """The first send holds the event loop 150 ms (a busy client); every request ends at once."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self.sends = 0

    async def send(self, request: Request, record: RequestRecord) -> None:
        import time

        self.sends += 1
        if self.sends == 1:
            time.sleep(0.15)
        record.sent_s = record.closed_s = self.clock.now()
        record.outcome = Outcome.OK


async def test_a_user_that_wakes_late_for_its_ramp_time_shows_the_lag_as_queue_delay():
    """Two users ramped over 0.2 s: the second is due 0.1 s in, but the loop is busy until 0.15 s.
    Its first request is scheduled at its ramp time, so the 50 ms show as queue delay (they were
    hidden when a user's first request was scheduled when it woke)."""
    from tokenbench.loadgen import LoadGenerator
    from tokenbench.records import RunClock

    clock = RunClock.start()
    written: list[RequestRecord] = []
    gen = LoadGenerator(_BusyOnceClient(clock), clock, written.append)
    run_ = await gen.run_point(
        0,
        UsersLoad(users=2, ramp_up_s=0.2, think_time_s=0.1),
        StopConfig(duration_s=0.3),
        RequestSource(_prompts(3)),
        0,
    )
    second = next(r for r in written if r.user == 1)
    assert second.scheduled_s - run_.start_s == pytest.approx(0.1, abs=1e-6)
    assert second.sent_s - second.scheduled_s >= 0.045
