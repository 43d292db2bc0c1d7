"""Where a point's requests come from: a trace's rows on a replay's schedule (TraceSource), built
ahead by a thread within a bound, cut by the stop settings, shared between workers, with ids unique
per run, and the tally of what was sent."""

import asyncio
import json

import pytest
from replay_helpers import BLOCK_SIZE, write_trace

from tokenbench.config import ReplayLoad, StopConfig
from tokenbench.datasets.trace_requests import TracePlan, TraceSelection
from tokenbench.errors import BadInput
from tokenbench.loadgen import source as source_module
from tokenbench.loadgen.schedule import Share
from tokenbench.loadgen.source import TraceSource

STOP = StopConfig(schedule_ends=True)


def _source(path, lane=Share()):
    return TraceSource(TracePlan(TraceSelection(path, block_size=BLOCK_SIZE)), None, lane=lane)


def _mooncake(path, n, bad_at=None):
    with path.open("w") as f:
        for i in range(n):
            row = {"timestamp": i * 10, "input_length": 10, "output_length": 2, "hash_ids": [i]}
            if i == bad_at:
                row["input_length"] = -1
            f.write(json.dumps(row) + "\n")
    return path


async def _drain(source, load, stop=STOP, share=Share()):
    items = []
    async for item in source.sends(load, 0, stop, share):
        items.append(item)
        source.sent(item.row)
    return items


def test_the_rows_come_in_order_with_their_offsets_and_ids_go_on_per_lane(tmp_path):
    trace = write_trace(tmp_path / "t.jsonl")
    source = _source(trace, lane=Share(1, 3))
    items = asyncio.run(_drain(source, ReplayLoad(speed=2.0)))
    assert [(i.row.row, i.offset_s) for i in items] == [(1, 0.0), (2, 0.2), (3, 0.5), (4, 0.8)]
    assert [source.issue(i.request)[0] for i in items] == [1, 4, 7, 10]  # lane 1 of 3
    assert items[1].request.trace_row == 2 and items[1].request.max_tokens == 3
    assert source.tally.issued == 4 and source.tally.expected_reuse().num_tokens_reused == 40


def test_max_requests_and_duration_cut_the_schedule_and_the_tally_counts_what_was_sent(tmp_path):
    trace = write_trace(tmp_path / "t.jsonl")
    source = _source(trace)
    assert len(asyncio.run(_drain(source, ReplayLoad(), StopConfig(max_requests=2)))) == 2
    assert source.tally.issued == 2 and source.tally.expected_reuse().num_tokens_reused == 20
    # offsets 0, 0.4, 1.0, 1.6 s: a 1 s duration keeps the first two (1.0 is past it)
    assert [i.row.row for i in asyncio.run(_drain(source, ReplayLoad(), StopConfig(duration_s=1.0)))] == [1, 2]


def test_a_worker_builds_only_its_share_and_passes_the_others_rows(tmp_path):
    trace = write_trace(tmp_path / "t.jsonl")
    items = asyncio.run(_drain(_source(trace), ReplayLoad(), share=Share(1, 2)))
    assert [(i.row.row, i.request is not None) for i in items] == [(1, False), (2, True), (3, False), (4, True)]


def test_the_thread_keeps_at_most_the_lookahead_built_before_they_are_read(tmp_path, monkeypatch):
    monkeypatch.setattr(source_module, "LOOKAHEAD", 5)
    source = _source(_mooncake(tmp_path / "m.jsonl", 200))
    built = []
    real = source.trace.request
    monkeypatch.setattr(source.trace, "request", lambda row: built.append(row.row) or real(row))

    async def first_then_wait():
        gen = source.sends(ReplayLoad(), 0, STOP)
        first = await gen.__anext__()
        await asyncio.sleep(0.3)  # the thread fills what it may
        ahead = len(built)
        await gen.aclose()
        return first, ahead

    first, ahead = asyncio.run(first_then_wait())
    assert first.row.row == 1 and 1 < ahead <= 1 + 5 + 1  # the one read, the bound, one waiting for room


def test_a_malformed_row_met_mid_replay_stops_it_naming_the_line(tmp_path):
    source = _source(_mooncake(tmp_path / "m.jsonl", 50, bad_at=30))
    with pytest.raises(BadInput, match=r"m\.jsonl:31: 'input_length' is negative"):
        asyncio.run(_drain(source, ReplayLoad()))


def test_a_point_is_primed_once_its_first_row_is_built_or_its_schedule_cannot_start(tmp_path):
    trace = write_trace(tmp_path / "t.jsonl")
    source = _source(trace)

    async def primed(load):
        source.ready(load, 0, STOP)
        await asyncio.wait_for(source.primed(), 5)
        return [i.row.row async for i in source.sends(load, 0, STOP)]

    assert asyncio.run(primed(ReplayLoad())) == [1, 2, 3, 4]
    with pytest.raises(BadInput, match="no trace rows in the replay window"):  # primed all the same
        asyncio.run(primed(ReplayLoad(start_s=100.0)))
