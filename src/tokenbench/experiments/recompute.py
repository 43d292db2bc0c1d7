"""``tokenbench recompute`` of an experiment directory: every cell's results.json again from its
records (``derive.recompute_run``, the path a run takes), then the aggregates over trials
(``aggregate``, the path an experiment takes). Cells killed while they ran become ``interrupted``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tokenbench.experiments.aggregate import aggregate
from tokenbench.experiments.runner import STATE
from tokenbench.results import Experiment
from tokenbench.results.layout import CONFIG, RECORDS
from tokenbench.rundir import write_json
from tokenbench.rundir.derive import computed_by, recompute_run


def recompute_experiment(experiment_dir: Path) -> dict[str, Any]:  # experiment.json as written (JSON)
    """Recompute every cell that has records, then the experiment's aggregates."""
    experiment_dir = Path(experiment_dir)
    state_path = experiment_dir / STATE
    # experiment.json as plain JSON, rewritten in place: every key, known to this version or not, is kept
    state: dict[str, Any] = json.loads(state_path.read_text())
    for cell in state.get("cells", {}).values():
        cell_dir = experiment_dir / cell["run_dir"]
        if (cell_dir / RECORDS).is_file() and (cell_dir / CONFIG).is_file():
            results = recompute_run(cell_dir)
            if cell.get("status") == "running":  # killed while it ran: what it measured is kept
                cell["status"] = "interrupted"
                cell["error"] = "the experiment was killed during this cell; recomputed from its records"
            elif cell.get("status") == "ok" and results.interrupted:
                cell["status"] = "interrupted"
    rows = aggregate(experiment_dir, Experiment.from_json(state))
    state["aggregates"] = [row.model_dump(mode="json", exclude_unset=True) for row in rows]
    state["computed_by"] = computed_by("recompute").model_dump(mode="json")
    shutil.copyfile(state_path, experiment_dir / "experiment.previous.json")
    write_json(state_path, state)
    return state
