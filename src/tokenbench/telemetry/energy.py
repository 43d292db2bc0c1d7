"""The GPUs' energy over a point's window, from the sampler's NVML readings (pure).

Each scrape line of samples.jsonl carries one row per GPU (telemetry.gpu): ``energy_mj``, NVML's
total energy counter (mJ since the driver loaded, Volta and later), and ``power_w``. Per GPU the
readings become a cumulative energy series in joules: the counter's increases (Prometheus
``increase()`` semantics: a value lower than the one before is a reset, counting from 0), or where
no GPU has the counter, the power readings integrated by the trapezoid rule (``power_integral``:
an estimate; NVML's power reading is itself an average over up to a second on recent GPUs).
The series is interpolated linearly at the window's edges, so the joules cover the window itself
when readings bracket it; otherwise the stretch the readings cover (``period_s`` says which).

Energy per output token = the mean power over the window (W = J/s) / the point's output tokens/s:
both are rates of the same steady state, as the cost per token is (cost.point_cost).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any

from tokenbench.results.cost import Energy, EnergySource

# One line of samples.jsonl (the header, or a scrape) as read back: JSON whose keys the sampler
# chose (prom.py's names), so any value (an edge: read key by key).
Sample = dict[str, Any]
GpuRow = dict[str, float]  # one GPU's readings in a scrape (telemetry.gpu.GPUSampler.read)
Series = list[tuple[float, float]]  # (t_s, joules since the first reading), in time order

# Each source's reading in a GPU row (telemetry.gpu), in order of preference.
_KEYS: dict[EnergySource, str] = {"nvml_total_energy": "energy_mj", "power_integral": "power_w"}
_SOURCES: tuple[EnergySource, ...] = ("nvml_total_energy", "power_integral")


def point_energy(
    samples: list[Sample],
    header: Sample | None,
    start_s: float,
    end_s: float,
    output_tokens_per_s: float | None,
) -> Energy:
    """Every GPU's energy over [start_s, end_s], summed; unavailable (with the reason) without a
    GPU or without two readings of each GPU there."""
    info = (header or {}).get("gpu") or {"available": False, "reason": "not sampled"}
    if not info.get("available"):
        return unavailable(f"no NVIDIA GPU (NVML: {info.get('reason') or 'not sampled'})")
    rows = _rows_by_gpu(_bracketing(samples, start_s, end_s))
    source = _source(rows)
    if source is None:
        return unavailable("fewer than 2 energy or power readings of each GPU around the window")
    covered = [_over(_cumulative(readings, source), start_s, end_s) for readings in rows.values()]
    spans = [c for c in covered if c is not None]
    if len(spans) < len(covered):
        return unavailable("the GPUs' readings do not overlap the window")
    joules = sum(j for _, _, j in spans)
    power = sum(j / (hi - lo) for lo, hi, j in spans)
    return Energy(
        available=True,
        reason=None,
        source=source,
        gpus=len(rows),
        period_s=[min(lo for lo, _, _ in spans), max(hi for _, hi, _ in spans)],
        joules=joules,
        mean_power_w=power,
        joules_per_output_token=power / output_tokens_per_s if output_tokens_per_s else None,
    )


def unavailable(reason: str) -> Energy:
    """No energy figures, and why: every figure None, never 0."""
    return Energy(
        available=False,
        reason=reason,
        source=None,
        gpus=None,
        period_s=None,
        joules=None,
        mean_power_w=None,
        joules_per_output_token=None,
    )


def _bracketing(samples: list[Sample], start_s: float, end_s: float) -> list[Sample]:
    """The scrapes from the last at or before start_s to the first at or after end_s."""
    lines = [s for s in samples if s.get("gpu")]
    times = [s["t_s"] for s in lines]
    i = max(bisect_right(times, start_s) - 1, 0)
    j = bisect_left(times, end_s)
    return lines[i : j + 1]


def _rows_by_gpu(lines: list[Sample]) -> dict[int, list[tuple[float, GpuRow]]]:
    rows: dict[int, list[tuple[float, GpuRow]]] = {}
    for line in lines:
        for row in line["gpu"]:
            rows.setdefault(row["index"], []).append((line["t_s"], row))
    return rows


def _source(rows: dict[int, list[tuple[float, GpuRow]]]) -> EnergySource | None:
    """The counter when every GPU has two readings of it, else the power when every GPU has two."""
    if not rows:
        return None
    for source in _SOURCES:
        key = _KEYS[source]
        if all(sum(1 for _, r in readings if r.get(key) is not None) >= 2 for readings in rows.values()):
            return source
    return None


def _cumulative(readings: list[tuple[float, GpuRow]], source: EnergySource) -> Series:
    """Joules since the first reading, at each reading."""
    key = _KEYS[source]
    points = [(t, float(r[key])) for t, r in readings if r.get(key) is not None]
    series: Series = [(points[0][0], 0.0)]
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if source == "nvml_total_energy":
            step = (v1 - v0 if v1 >= v0 else v1) / 1000.0  # lower than before: a reset, from 0
        else:
            step = (v0 + v1) / 2 * (t1 - t0)  # trapezoid: W x s
        series.append((t1, series[-1][1] + step))
    return series


def _over(series: Series, start_s: float, end_s: float) -> tuple[float, float, float] | None:
    """(from, to, joules) over [start_s, end_s] clipped to what the series covers; None when it
    covers no time of it."""
    lo, hi = max(start_s, series[0][0]), min(end_s, series[-1][0])
    if hi <= lo:
        return None
    return lo, hi, _at(series, hi) - _at(series, lo)


def _at(series: Series, t: float) -> float:
    """The cumulative energy at t, linear between readings (t within the series)."""
    times = [p[0] for p in series]
    k = bisect_left(times, t)
    if times[k] == t:
        return series[k][1]
    (t0, e0), (t1, e1) = series[k - 1], series[k]
    return e0 + (e1 - e0) * (t - t0) / (t1 - t0)
