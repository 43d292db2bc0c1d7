"""One global schedule, dealt: whatever the number of workers, the same arrivals at the same times
with the same prompts, users at their global ramp times, and every request id used once."""

from __future__ import annotations

import asyncio
import json
from array import array

import pytest

from tokenbench.config import LoadSweep, RateLoad, ReplayLoad, StagedLoad, StopConfig, UsersLoad
from tokenbench.datasets.trace_requests import TracePlan, TraceSelection
from tokenbench.loadgen import LoadGenerator, Part, PointRun
from tokenbench.loadgen.schedule import Share
from tokenbench.loadgen.source import RequestSource, TraceSource
from tokenbench.records import Outcome, Request, RequestRecord, RunClock

# Serial (run alone, never beside other tests): users' ramp times to within 10%.
pytestmark = pytest.mark.serial


class _Instant:
    """A client whose every request is sent at once and answered with one chunk."""

    def __init__(self, clock: RunClock) -> None:
        self.clock = clock

    async def send(self, request: Request, record: RequestRecord) -> None:
        record.sent_s = self.clock.now()
        record.chunk_times_s = array("d", [record.sent_s])
        record.end_s = record.closed_s = record.sent_s
        record.outcome = Outcome.OK
        record.output_text = request.as_prompt_text()
        await asyncio.sleep(0.01)


def _requests(n: int) -> list[Request]:
    return [Request(prompt=f"p{i}", max_tokens=1) for i in range(n)]


def _trace(path, n: int):
    """A Mooncake trace of ``n`` rows 13 ms apart, each a 2-block prompt of its own."""
    rows = [
        {"timestamp": i * 13, "input_length": 8, "output_length": 1, "hash_ids": [2 * i, 2 * i + 1]} for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return TracePlan(TraceSelection(path, block_size=4))


async def _run(
    load, stop: StopConfig, workers: int, requests: list[Request] | TracePlan
) -> tuple[list[RequestRecord], list[PointRun]]:
    """The point run by ``workers`` generators at once, each its share, from one start."""
    clock = RunClock.start()
    records: list[RequestRecord] = []
    start = clock.now() + 0.05
    runs = []
    for w in range(workers):
        share = Share(w, workers)
        if isinstance(requests, TracePlan):
            source = TraceSource(requests, None, lane=share)
        else:
            source = RequestSource(requests, lane=share)
            source.start_point(load, 7, share)
        gen = LoadGenerator(_Instant(clock), clock, records.append)  # type: ignore[arg-type]
        runs.append(gen.run_point(0, load, stop, source, 7, part=Part(share, start)))
    parts = await asyncio.gather(*runs)
    for run in parts:
        assert run.start_s == start
    return [r for r in records if r.ok], parts


def _staged(text: str) -> StagedLoad:
    (load,) = LoadSweep(stages=text).points()
    assert isinstance(load, StagedLoad)
    return load


def _schedule(records: list[RequestRecord], start: float) -> list[tuple[float, str]]:
    return sorted((round(r.scheduled_s - start, 9), r.output_text or "") for r in records)


@pytest.mark.parametrize(
    ("load", "stop", "trace"),
    [
        (RateLoad(rate_per_s=150, arrival="poisson"), StopConfig(duration_s=0.4), False),
        (RateLoad(rate_per_s=100, arrival="gamma", burstiness=0.5), StopConfig(max_requests=37), False),
        (ReplayLoad(speed=2.0), StopConfig(schedule_ends=True), True),
        # a staged point: arrivals over its rate curve, dealt as a rate's
        (_staged("rate=100:0.2s, rate=300:0.2s ramp=0.1s"), StopConfig(duration_s=0.4), False),
    ],
)
async def test_an_open_loop_schedule_is_the_same_whatever_the_workers(load, stop, trace, tmp_path):
    requests = _trace(tmp_path / "t.jsonl", 30) if trace else _requests(30)
    schedules = {}
    for n in (1, 2, 4):
        records, parts = await _run(load, stop, n, requests)
        schedules[n] = _schedule(records, parts[0].start_s)
        ids = [r.id for r in records]
        assert len(ids) == len(set(ids))  # every id once across workers
        assert sum(p.num_records for p in parts) == len(records)
    assert len(schedules[1]) > 20
    assert schedules[1] == schedules[2] == schedules[4]


async def test_users_are_dealt_and_keep_their_global_ramp_times():
    load = UsersLoad(users=6, ramp_up_s=0.3)
    # 1.5 s, not 0.45: a user whose wake the machine delays past the point's end rightly sends
    # nothing (user 5, due at 0.25 s, did so once among make check's five serial tests at a time)
    records, parts = await _run(load, StopConfig(duration_s=1.5), 4, _requests(10))
    start = parts[0].start_s
    firsts: dict[int, float] = {}
    for r in sorted(records, key=lambda r: r.scheduled_s):
        firsts.setdefault(r.user or 0, r.scheduled_s - start)
    assert sorted(firsts) == list(range(6))
    for user, first in firsts.items():
        assert first == pytest.approx(user * 0.05, abs=0.015)  # user i at i * ramp / users
    # worker w runs users w, w + 4: its share of the users
    spans = [len(p.user_spans) for p in parts]
    assert spans == [2, 2, 1, 1]


async def test_staged_users_are_dealt_added_at_the_step_up_and_retired_at_the_step_down():
    load = _staged("users=2:0.4s, users=6:0.4s, users=2:0.4s")
    records, parts = await _run(load, StopConfig(duration_s=load.duration_s), 4, _requests(10))
    start = parts[0].start_s
    firsts: dict[int, float] = {}
    for r in sorted(records, key=lambda r: r.scheduled_s):
        firsts.setdefault(r.user or 0, r.scheduled_s - start)
    assert firsts == pytest.approx({0: 0, 1: 0, 2: 0.4, 3: 0.4, 4: 0.4, 5: 0.4})  # on the schedule, not late
    assert {r.user for r in records if r.scheduled_s - start >= 0.8} == {0, 1}  # retired: nothing new
    assert [len(p.user_spans) for p in parts] == [2, 2, 1, 1]  # worker w runs users w, w + 4


def test_a_share_counts_its_items_of_a_budget():
    assert [Share(w, 4).of(10) for w in range(4)] == [3, 3, 2, 2]
    assert sum(Share(w, 3).of(7) or 0 for w in range(3)) == 7
    assert Share(1, 2).of(None) is None
    assert [i for i in range(9) if Share(2, 3).mine(i)] == [2, 5, 8]
    with pytest.raises(ValueError, match="worker 2 of 2"):
        Share(2, 2)


def test_a_workers_prompts_are_every_nth_from_the_points_start_and_its_ids_its_own():
    requests = _requests(10)
    whole = RequestSource(requests)
    load = RateLoad(rate_per_s=1)
    whole.start_point(load, 3)
    alone = [whole.take()[1].prompt for _ in range(8)]
    dealt: list[str | None] = [None] * 8
    for w in range(2):
        source = RequestSource(requests, lane=Share(w, 2))
        source.start_point(load, 3, Share(w, 2))
        for k in range(4):
            rid, request = source.take()
            assert rid == w + 2 * k
            dealt[w + 2 * k] = request.prompt
    assert dealt == alone
