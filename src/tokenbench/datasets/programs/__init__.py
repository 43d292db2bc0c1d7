"""Agent programs (``--dataset programs``): recorded agent sessions, each a graph of dependent
calls (model.py), read from the public formats, one reader a format, the format detected from the
file or named (``--program-format``). A directory reads every file in it, in name order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from tokenbench.datasets.programs import otel, tracelab, tracelab_csv, weka
from tokenbench.datasets.programs.model import Program
from tokenbench.errors import BadInput

# name -> reader module: ``FORMAT``, ``looks_like(first JSON value or CSV header)``, ``read(path)``
READERS: dict[str, ModuleType] = {
    weka.FORMAT: weka,
    tracelab.FORMAT: tracelab,
    tracelab_csv.FORMAT: tracelab_csv,
    otel.FORMAT: otel,
}


def formats() -> tuple[str, ...]:
    return tuple(READERS)


def read_programs(path: Path, fmt: str = "auto") -> list[Program]:
    """Every program in ``path`` (a file, or a directory of them), in order; ids made unique."""
    if not path.exists():
        raise BadInput(f"--dataset-path {path}: no such file or directory")
    files = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")) if path.is_dir() else [path]
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
    """What detection looks at: the file's first line as text, then as JSON, then the whole file as JSON."""
    with open(path, encoding="utf-8", errors="replace") as f:
        first = f.readline()
    heads: list[object] = [first.strip()]
    for load in (lambda: json.loads(first), lambda: json.loads(path.read_text(encoding="utf-8"))):
        try:
            heads.append(load())
        except (json.JSONDecodeError, UnicodeDecodeError):
            pass
    return heads


Reader = Callable[[Path], list[Program]]
