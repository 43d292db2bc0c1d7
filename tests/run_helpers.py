"""Helpers for the tests that run tokenbench in this process against the mock: a small config,
a console that prints nowhere, the records a run wrote."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from tokenbench.config import DatasetConfig, RunConfig, TargetConfig


def quiet() -> Console:
    return Console(file=io.StringIO())


def config(url, tmp_path, loads, stop, api="chat", **kw) -> RunConfig:
    return RunConfig(
        target=TargetConfig(url=url, api=api, read_timeout_s=kw.pop("read_timeout_s", 120.0)),
        loads=loads,
        stop=stop,
        dataset=DatasetConfig(input_tokens=8, output_tokens=kw.pop("output_tokens", 20), num_prompts=10),
        live=False,
        out_dir=tmp_path / "run",
        **kw,
    )


def records_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
