"""Determinism under load (the ``determinism`` preset's study): do greedy answers change with the
load? A cell that kept its text (keep_text) and whose loads go low, high..., low again (its first
and last load the same, at least three points) is compared point by point with its own first
point: each high point against it (how many answers the load changed) and the last, the same low
load again, against it (the noise floor: what changes with no change of load). Each comparison
is metrics/agreement.py's, twin by twin on the prompt hash; the cell's agreement.json holds them
(the report's paired-outputs section shows it), and the experiment prints one line per cell.
"""

from __future__ import annotations

from pathlib import Path

from tokenbench.metrics.agreement import by_point, point_agreement
from tokenbench.results.agreement import Agreement
from tokenbench.results.layout import AGREEMENT
from tokenbench.rundir import read_records, write_json
from tokenbench.rundir.read import is_run_dir, read_results


def determinism_agreement(run_dir: Path) -> Agreement | None:
    """A low-high-low cell's comparisons with its first point (None: not such a cell, or no text kept)."""
    if not is_run_dir(run_dir):
        return None
    points = read_results(run_dir).points
    if len(points) < 3 or points[0].load != points[-1].load:
        return None
    records = by_point(r for r in read_records(run_dir) if r.prompt_hash is not None)
    if not records:
        return None
    base = points[0]
    compared = []
    for i, p in enumerate(points[1:], start=1):
        last = i == len(points) - 1
        label = f"{base.label} vs {p.label}" + (" (again: the noise floor)" if last else "")
        compared.append(point_agreement(records.get(0, []), records.get(i, []), 0, i, label))
    return Agreement(a=str(run_dir), b=str(run_dir), points=compared)


def write_determinism(cells: list[Path]) -> list[str]:
    """Each low-high-low cell's agreement.json, and one line each: answers changed with the load
    and at the same low load again."""
    lines = []
    for d in cells:
        agreement = determinism_agreement(d)
        if agreement is None:
            continue
        write_json(d / AGREEMENT, agreement.model_dump(mode="json"))
        *loaded, floor = agreement.points
        changed = ", ".join(f"{p.changed} of {p.pairs} at {p.label.split(' vs ')[1]}" for p in loaded)
        lines.append(
            f"determinism: {d.name}: answers changed with load: {changed}; "
            f"noise floor (the low load again): {floor.changed} of {floor.pairs}"
        )
    return lines
