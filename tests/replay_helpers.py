"""A small Mooncake trace the replay tests write (never downloaded), a run of it, and a replay of a
trace without a server (``replayed``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tokenbench.config import DatasetConfig, ReplayLoad, RunConfig, StopConfig, TargetConfig
from tokenbench.datasets.tokenizers import Tokenizer
from tokenbench.datasets.trace_requests import ContextGuard, TracePlan, TraceSelection
from tokenbench.datasets.traces import digest_of
from tokenbench.loadgen.source import TraceSource
from tokenbench.records import Request
from tokenbench.results import TraceFacts

# (timestamp ms, input_length, output_length, hash_ids) in 10-token blocks: rows 2 and 4 reuse
# row 1's two blocks; row 3 shares nothing.
ROWS = [
    (0, 20, 5, [1, 2]),
    (400, 25, 3, [1, 2, 3]),
    (1000, 10, 4, [4]),
    (1600, 30, 6, [1, 2, 5]),
]
BLOCK_SIZE = 10
# blocks 9, reused 4 (rows 2 and 4: ids 1, 2); tokens 85, reused 40
EXPECTED_REUSE = {"num_blocks": 9, "num_blocks_reused": 4, "num_tokens": 85, "num_tokens_reused": 40}


def write_trace(path: Path, rows=ROWS) -> Path:
    lines = [json.dumps({"timestamp": t, "input_length": i, "output_length": o, "hash_ids": h}) for t, i, o, h in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def replay_config(url: str, trace: Path, tmp_path: Path, load: ReplayLoad, **stop) -> RunConfig:
    return RunConfig(
        target=TargetConfig(url=url, api="chat"),
        loads=[load],
        stop=StopConfig(schedule_ends=True, drain_timeout_s=10, **stop),
        dataset=DatasetConfig(name="trace", path=trace, block_size=BLOCK_SIZE),
        live=False,
        out_dir=tmp_path / "run",
    )


@dataclass(frozen=True)
class Replayed:
    """A trace replayed without a server (TraceSource.items, inline): the requests it would send,
    in order, and the trace's facts over them (each row told ``sent``)."""

    requests: list[Request]
    source: TraceSource

    @property
    def facts(self) -> TraceFacts:
        tally = self.source.tally
        return self.source.trace.facts(
            digest_of(self.source.trace.reader).start().result(), tally.facts() if tally else None
        )

    @property
    def exact_lengths(self) -> bool:
        return self.source.trace.exact_lengths


def replayed(
    sel: TraceSelection,
    tokenizer: Tokenizer | None = None,
    system: str | None = None,
    seed: int = 0,
    token_ids: bool = False,
    guard: ContextGuard = ContextGuard(),
    images: bool = False,
    stop: StopConfig | None = None,
    load: ReplayLoad | None = None,
) -> Replayed:
    source = TraceSource(TracePlan(sel, system, seed, token_ids, guard, images), tokenizer)
    load = load or ReplayLoad(start_s=sel.start_s, end_s=sel.end_s)
    requests = []
    for item in source.items(load, seed, stop or StopConfig(schedule_ends=True)):
        source.sent(item.row)
        assert item.request is not None
        requests.append(item.request)
    return Replayed(requests, source)
