"""The run directory: config.json, records.jsonl (appended and flushed as requests finish),
results.json (rewritten after each point, so a crash keeps every finished point)."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from ..records import RequestRecord

import orjson  # records are written on the client's hot path, one line per finished request


def default_run_dir(root: Path = Path("runs")) -> Path:
    return root / datetime.now().strftime("%Y%m%d-%H%M%S")


class RunWriter:
    def __init__(self, out_dir: Path, keep_text: bool = False) -> None:
        self.dir = Path(out_dir)
        if self.dir.exists() and any(self.dir.iterdir()):
            raise FileExistsError(f"--out {self.dir} already holds files; pick a new directory")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._keep_text = keep_text
        self._records = open(self.dir / "records.jsonl", "a", encoding="utf-8")
        self.num_records = 0

    def write_config(self, config: dict[str, Any]) -> None:
        write_json(self.dir / "config.json", config)

    def write_record(self, record: RequestRecord) -> None:
        self._records.write(orjson.dumps(record.to_json(self._keep_text)).decode() + "\n")
        self._records.flush()
        self.num_records += 1

    def write_results(self, results: dict[str, Any]) -> None:
        write_json(self.dir / "results.json", results)

    def close(self) -> None:
        self._records.close()


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically: readers (and a resumed experiment) never see half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # readers never see half a file


def read_records(run_dir: Path) -> list[RequestRecord]:
    path = Path(run_dir) / "records.jsonl"
    return [RequestRecord.from_json(json.loads(line)) for line in path.open() if line.strip()]
