"""`tokenbench history DIR... --out OUT`: many runs and experiments as one Parquet table
(table.py) and a trend page with change points (page.py, changepoints.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenbench.history.changepoints import ChangePoint, change_points
from tokenbench.history.page import Change, changes, render
from tokenbench.history.table import KEY_COLUMNS, gather, write_parquet

__all__ = ["KEY_COLUMNS", "Change", "ChangePoint", "History", "change_points", "changes", "history"]


@dataclass(frozen=True)
class History:
    table: Path
    page: Path
    rows: int
    runs: int
    changes: list[Change]


def history(dirs: list[Path], out: Path) -> History:
    """Gather ``dirs`` into OUT/history.parquet and draw OUT/history.html."""
    rows = gather(dirs)
    out.mkdir(parents=True, exist_ok=True)
    table = write_parquet(rows, out / "history.parquet")
    page = out / "history.html"
    page.write_text(render(rows, [str(d) for d in dirs]))
    return History(table, page, len(rows), len({r["source"] for r in rows}), changes(rows))
