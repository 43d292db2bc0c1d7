"""Trials -> headline metrics as mean with a 95% confidence interval (pure but for reading files).

The metrics are the catalogue's ``aggregates`` view (``catalogue.METRICS``), under their keys.

The interval is Student's t: mean ± t(0.975, n-1) · s / √n over the trials' values; with one
trial it is None (unknown), never 0. A metric a trial does not have (None) is left out of that
metric's n.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..catalogue import shown_in
from ..results import mean_ci95


def aggregate(experiment_dir: Path, state: dict) -> list[dict]:
    """One row per (server configuration, variant, load point) over its successful trials."""
    servers = {s["label"]: s for s in state.get("servers", [])}
    groups: dict[tuple[str, str], list[dict]] = {}
    for cell in state.get("cells", {}).values():
        if cell.get("status") != "ok":
            continue
        results_path = experiment_dir / cell["run_dir"] / "results.json"
        if not results_path.exists():
            continue
        groups.setdefault((cell["server"], cell["variant"]), []).append(json.loads(results_path.read_text()))
    rows = []
    for (label, variant), trials in groups.items():
        by_point: dict[int, list[dict]] = {}
        for results in trials:
            for point in results.get("points", []):
                by_point.setdefault(point["index"], []).append(point)
        server = servers.get(label, {})
        for index in sorted(by_point):
            points = by_point[index]
            rows.append(
                {
                    "server": label,
                    "backend": server.get("backend"),
                    "swept": server.get("swept", {}),
                    "variant": variant,
                    "point": index,
                    "label": points[0]["label"],
                    "load": points[0]["load"],
                    "metrics": {m.key: mean_ci95(m.get(p) for p in points) for m in shown_in("aggregates")},
                }
            )
    return rows
