"""Trials -> headline metrics as mean with a 95% confidence interval (pure but for reading files).

The metrics are the catalogue's ``aggregates`` view (``catalogue.METRICS``), under their keys.

The interval is Student's t: mean ± t(0.975, n-1) · s / √n over the trials' values; with one
trial it is None (unknown), never 0. A metric a trial does not have (None) is left out of that
metric's n.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

from scipy import stats

from ..catalogue import shown_in


def mean_ci95(values: Iterable[float | None]) -> dict:
    xs = [float(v) for v in values if v is not None and math.isfinite(v)]
    n = len(xs)
    if n == 0:
        return {"mean": None, "ci95": None, "n": 0, "values": []}
    mean = sum(xs) / n
    if n < 2:
        return {"mean": mean, "ci95": None, "n": n, "values": xs}
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return {"mean": mean, "ci95": half, "n": n, "values": xs}


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
