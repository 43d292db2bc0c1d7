"""Trials -> headline metrics as mean with a 95% confidence interval (pure but for reading files).

The interval is Student's t: mean ± t(0.975, n-1) · s / √n over the trials' values; with one
trial it is None (unknown), never 0. A metric a trial does not have (None) is left out of that
metric's n.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path

from scipy import stats

from ..records import UNFINISHED


def _get(path: str) -> Callable[[dict], float | None]:
    keys = path.split(".")

    def read(point: dict) -> float | None:
        value = point
        for key in keys:
            if not isinstance(value, dict):
                return None
            value = value.get(key)
        return value if isinstance(value, (int, float)) else None

    return read


# Outcomes the run imposed, not the server: censored, so left out of error_rate's denominator,
# as they are left out of good_fraction's (metrics.py).
_UNFINISHED = tuple(o.value for o in UNFINISHED)


def _error_rate(point: dict) -> float | None:
    """Failed requests over requests that ended, in the point's population (``requests_in_window``;
    the whole point for results written before it existed). Cancelled and never-sent requests
    did not end: they are counted apart (``requests.by_outcome``), in neither numerator nor
    denominator, the same rule as ``good_fraction``."""
    req = point.get("requests_in_window") or point.get("requests") or {}
    by = req.get("by_outcome") or {}
    ended = (req.get("total") or 0) - sum(by.get(o, 0) for o in _UNFINISHED)
    return (ended - req.get("ok", 0)) / ended if ended else None


HEADLINE: dict[str, Callable[[dict], float | None]] = {
    "output_tokens_per_s": _get("output_tokens_per_s"),
    "requests_per_s": _get("requests_per_s"),
    "offered_per_s": _get("offered_per_s"),
    "ttft_s_mean": _get("ttft_s.mean"),
    "ttft_s_p50": _get("ttft_s.p50"),
    "ttft_s_p99": _get("ttft_s.p99"),
    "tpot_s_mean": _get("tpot_s.mean"),
    "itl_s_mean": _get("itl_s.mean"),
    "e2e_s_mean": _get("e2e_s.mean"),
    "queue_s_mean": _get("queue_s.mean"),
    "goodput_per_s": _get("goodput_per_s"),
    "good_fraction": _get("good_fraction"),
    "error_rate": _error_rate,
    "server_preemptions": _get("server.preemptions"),
    "server_ttft_s_mean": _get("server.ttft_s_mean"),
    "server_kv_usage_max": _get("server.kv_usage.max"),
}


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
                    "metrics": {name: mean_ci95(fn(p) for p in points) for name, fn in HEADLINE.items()},
                }
            )
    return rows
