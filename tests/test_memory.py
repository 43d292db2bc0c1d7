"""Memory that stays flat (behaviour, asserted loosely; benchmarks/soak.py measures it exactly):
a chunk costs <= 16 bytes where records are held, and a run holds no record while its load runs
(records go to disk; a point's are read back when it ends)."""

from __future__ import annotations

import io
import threading
import time
import tracemalloc

import orjson
import pytest
from rich.console import Console

from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.records import Outcome, RequestRecord
from tokenbench.run import run
from tokenbench.rundir import parse_records
from tokenbench.telemetry.sampler import JsonlTail

# Serial (run alone, never beside other tests): bytes held per chunk over the load: beside
# neighbours half the chunks arrived, and the in-flight state's ~100 KB swing read as 4.0 bytes a
# chunk (the bound is < 4).
pytestmark = pytest.mark.serial


def test_records_read_back_cost_at_most_16_bytes_a_chunk():
    chunks_per_record, n = 512, 400
    lines = [
        orjson.dumps(
            RequestRecord(
                point=0,
                id=i,
                scheduled_s=float(i),
                sent_s=i + 0.01,
                chunk_times_s=[i + 0.05 + 0.01 * k for k in range(chunks_per_record)],
                end_s=i + 5.2,
                closed_s=i + 5.3,
                outcome=Outcome.OK,
                output_tokens=chunks_per_record,
            ).to_json()
        )
        + b"\n"
        for i in range(n)
    ]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        records = parse_records(lines)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(records) == n and len(records[7].chunk_times_s) == chunks_per_record
    per_chunk = held / (n * chunks_per_record)
    assert per_chunk <= 16, f"{per_chunk:.1f} bytes per chunk"


class _Chunks:
    """Chunks in a growing records.jsonl: only complete lines (the run may be mid-write)."""

    def __init__(self, path) -> None:
        self._tail = JsonlTail(path)
        self.count = 0

    def __call__(self) -> int:
        self.count += sum(len(orjson.loads(line)["chunk_times_s"]) for line in self._tail.new_lines() if line.strip())
        return self.count


def test_a_run_holds_no_per_chunk_memory_while_its_load_runs(mock_process, tmp_path):
    url = mock_process(ttft_ms=5, itl_ms=2, output_tokens=100)
    out = tmp_path / "run"
    duration = 8.0
    cfg = RunConfig(
        target=TargetConfig(url=url),
        loads=[UsersLoad(users=16)],
        stop=StopConfig(duration_s=duration, drain_timeout_s=5),
        dataset=DatasetConfig(input_tokens=4, output_tokens=100, num_prompts=4),
        live=False,
        out_dir=out,
    )
    samples: list[tuple[float, int, int]] = []
    done = threading.Event()

    chunks = _Chunks(out / "records.jsonl")

    def watch() -> None:
        t0 = time.perf_counter()
        while not done.wait(0.5):
            memory = tracemalloc.get_traced_memory()[0]  # first: counting allocates (transiently)
            samples.append((time.perf_counter() - t0, memory, chunks()))

    tracemalloc.start()
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run(cfg, Console(file=io.StringIO()))
    finally:
        done.set()
        watcher.join()
        tracemalloc.stop()
    assert result.results["points"][0]["requests"]["ok"] > 0
    load = [s for s in samples if 3.0 <= s[0] <= duration - 0.5]  # after start-up, before the summary
    early, late = load[: len(load) // 2], load[len(load) // 2 :]
    # What a run retains raises the floor of its memory; requests in flight only add peaks on top,
    # so the floors of the two halves are compared, over the chunks between the halves' starts.
    held = min(m for _, m, _ in late) - min(m for _, m, _ in early)
    between = late[0][2] - early[0][2]
    assert between >= 5000, samples
    per_chunk = held / between
    # Records kept in memory would cost >= 8 bytes a chunk (>= 32 as float lists).
    assert per_chunk < 4, f"{per_chunk:.1f} bytes per chunk held while the load ran: {samples}"
