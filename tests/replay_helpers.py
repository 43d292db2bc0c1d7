"""A small Mooncake trace the replay tests write (never downloaded) and a run of it."""

from __future__ import annotations

import json
from pathlib import Path

from tokenbench.config import DatasetConfig, ReplayLoad, RunConfig, StopConfig, TargetConfig

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
