"""Whether the runs compared served the same model: one warning line for each run whose model
name differs from the first's, or that claims the same name with another identity (the fields
/v1/models or llama.cpp's /props gave on both sides: root, parent, max_model_len, owned_by,
model_path, n_ctx) or another fingerprint (results.json ``target.served_model``). A run that
recorded none (older, without --fingerprint, an API without chat) is compared on what it has."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenbench.results.served_model import ServedModel
from tokenbench.rundir.read import is_run_dir, read_results


@dataclass(frozen=True)
class Served:
    """One run's claim: the name requests sent, and what the server said of it."""

    source: str
    name: str | None
    model: ServedModel | None


def served_of(d: Path) -> Served | None:
    """A run directory's served model (None: an experiment directory, not compared here)."""
    if not is_run_dir(d):
        return None
    target = read_results(d).target
    return Served(str(d), target.model, target.served_model)


def model_warnings(runs: list[Served]) -> list[str]:
    """One line for each run that did not serve what the first one did."""
    if len(runs) < 2:
        return []
    base, lines = runs[0], []
    for other in runs[1:]:
        line = _differs(base, other)
        if line is not None:
            lines.append(f"model: {line}")
    return lines


def _differs(a: Served, b: Served) -> str | None:
    if a.name != b.name:
        return f"{a.source} requested {a.name!r}, {b.source} {b.name!r}: different models"
    if a.model is None or b.model is None:
        return None
    ida, idb = a.model.identity(), b.model.identity()
    changed = [k for k in ida.keys() & idb.keys() if ida[k] != idb[k]]
    if changed:
        what = ", ".join(f"{k} {ida[k]!r} vs {idb[k]!r}" for k in sorted(changed))
        return f"{a.source} and {b.source} both serve {a.name!r} but the servers differ: {what}"
    fa, fb = a.model.fingerprint, b.model.fingerprint
    if fa is not None and fb is not None and fa != fb:
        return (
            f"{a.source} and {b.source} both serve {a.name!r} but its greedy answers differ (fingerprint "
            f"{fa[:12]} vs {fb[:12]}): other weights, engine or numerics"
        )
    return None
