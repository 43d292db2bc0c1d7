"""Agent programs (``--dataset programs``): recorded agent sessions, each a graph of dependent
calls (model.py), read from the public formats, one reader a format, the format detected from the
file or named (``--program-format``). A directory reads every file in it, in name order (its
README and other ``.md``/``.txt`` notes left out).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML is not a dependency)

from tokenbench.config import DatasetConfig
from tokenbench.datasets.programs import aiperf_dag, aiperf_graph, dynamo, otel, tracelab, tracelab_csv, weka
from tokenbench.datasets.programs.model import ANCHORS, Program, critical_path_s
from tokenbench.errors import BadInput
from tokenbench.results import DatasetFacts, ProgramFacts

# name -> reader module: ``FORMAT``, ``looks_like(first JSON value or CSV header)``, ``read(path)``
READERS: dict[str, ModuleType] = {
    r.FORMAT: r for r in (weka, aiperf_dag, aiperf_graph, dynamo, tracelab, tracelab_csv, otel)
}
YAML_SUFFIXES = (".yaml", ".yml")


def formats() -> tuple[str, ...]:
    return tuple(READERS)


def read_programs(path: Path, fmt: str = "auto") -> list[Program]:
    """Every program in ``path`` (a file, or a directory of them), in order; ids made unique."""
    if not path.exists():
        raise BadInput(f"--dataset-path {path}: no such file or directory")
    files = sorted(p for p in path.iterdir() if _data_file(p)) if path.is_dir() else [path]
    programs: list[Program] = []
    for f in files:
        reader = READERS.get(fmt) if fmt != "auto" else detect(f)
        if reader is None:
            known = ", ".join(READERS)
            raise BadInput(f"--program-format {fmt!r}: one of auto, {known}")
        programs += reader.read(f)
    if not programs:
        raise BadInput(f"--dataset-path {path}: no agent session in it")
    seen: dict[str, int] = {}
    out = []
    for p in programs:
        n = seen.get(p.id, 0)
        seen[p.id] = n + 1
        out.append(p if n == 0 else Program(f"{p.id}#{n}", p.calls, p.start_s, p.format))
    return out


NOT_DATA = (".md", ".txt", ".rst")  # a directory's README and notes


def _data_file(p: Path) -> bool:
    return p.is_file() and not p.name.startswith(".") and p.suffix.lower() not in NOT_DATA


def detect(path: Path) -> ModuleType:
    """The reader whose ``looks_like`` accepts the file's first JSON value (a whole JSON file, or
    its first line), or its first line as text (a CSV header)."""
    head = _head(path)
    for reader in READERS.values():
        if any(reader.looks_like(h) for h in head):
            return reader
    raise BadInput(
        f"--dataset-path {path}: not an agent-trace format tokenbench reads ({', '.join(READERS)}); "
        "name one with --program-format"
    )


def _head(path: Path) -> list[object]:
    """What detection looks at: the file's first line as text, then as JSON, then the whole file as
    JSON (as YAML, for a .yaml or .yml file)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        first = f.readline()
    heads: list[object] = [first.strip()]
    loads: list[Callable[[], object]] = [
        lambda: json.loads(first),
        lambda: json.loads(path.read_text(encoding="utf-8")),
    ]
    if path.suffix.lower() in YAML_SUFFIXES:
        loads.append(lambda: yaml.safe_load(path.read_text(encoding="utf-8")))
    for load in loads:
        try:
            heads.append(load())
        except (json.JSONDecodeError, UnicodeDecodeError, yaml.YAMLError):
            pass
    return heads


def program_info(cfg: DatasetConfig, programs: list[Program], tokenizer: str | None) -> DatasetFacts:
    """What results.json says of the programs read (config.json's dataset_info)."""
    calls = [c for p in programs for c in p.calls]
    timed = [p for p in programs if all(c.recorded.api_s is not None for c in p.calls)]
    recorded = [
        critical_path_s(
            p, {c.id: (0.0, c.recorded.api_s or 0.0, c.recorded.api_s or 0.0) for c in p.calls}, cfg.program_time_scale
        )
        for p in timed
    ]
    return DatasetFacts(
        name=cfg.name,
        num_requests=len(calls),
        exact_lengths=tokenizer is not None,
        tokenizer=tokenizer,
        system_prompt=False,
        unique_prefix=False,
        source=str(cfg.path),
        programs=ProgramFacts(
            formats=sorted({p.format for p in programs}),
            programs=len(programs),
            calls=len(calls),
            subagent_calls=sum(1 for c in calls if c.depth > 0),
            edges={a: sum(1 for c in calls for e in c.parents if e.anchor == a) for a in ANCHORS},
            output=cfg.program_output,
            time_scale=cfg.program_time_scale,
            recorded_session_s=sum(recorded) / len(recorded) if recorded and len(timed) == len(programs) else None,
        ),
    )
