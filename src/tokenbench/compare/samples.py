"""What a gate tests, read from run and experiment directories: each configuration's trials at
each load (``Cell``), and for a cell of one trial the values its single figure summarizes: the
per-request values of a distribution (records.jsonl, the same population as results.json's:
successful requests sent in the window, open loop: scheduled in it) or the time series' windows
of a rate (each window inside the measurement window is one batch mean). An agent-programs
point's session latency is its measured sessions' (metrics.programs.sessions over the point's
records: completed, started in the window), and its session rate the measured sessions started in
each time-series window per second of it (batch means, as a rate's).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tokenbench.metrics.catalogue import SESSION, Metric
from tokenbench.metrics.programs import SessionPath, sessions
from tokenbench.records import Outcome, RequestRecord
from tokenbench.report.read.run_dir import load_value, point_value
from tokenbench.results import PointResult, TimeWindow
from tokenbench.results.imported import Imported
from tokenbench.results.layout import RECORDS, RESULTS
from tokenbench.results.trials import trial_groups
from tokenbench.rundir import RecordSlice, point_ranges
from tokenbench.rundir.read import is_experiment_dir, is_run_dir, read_experiment, read_results

LoadKey = tuple[str, float | str]


def _tpot_speed(r: RequestRecord) -> float | None:
    tpot = r.tpot_s
    return None if tpot is None or tpot <= 0 else 1.0 / tpot


# A distribution's per-request value (its results.json key -> the record's), and whether only
# successful requests count (queue delay counts every request sent).
REQUEST_VALUES: dict[str, tuple[Callable[[RequestRecord], float | None], bool]] = {
    "ttft_s": (lambda r: r.ttft_s, True),
    "ttfo_s": (lambda r: r.ttfo_s, True),
    "tpot_s": (lambda r: r.tpot_s, True),
    "e2e_s": (lambda r: r.e2e_s, True),
    "decode_speed_tokens_per_s": (_tpot_speed, True),
    "queue_s": (lambda r: r.queue_s, False),
}
# Rates the time series has per window (results.json's window keys).
WINDOW_RATES = frozenset({"output_tokens_per_s", "requests_per_s"})
SESSION_RATE = "sessions_per_s"  # agent programs: measured sessions started per second of a window


def _unit(metric: Metric) -> str:
    """What one of a metric's values is."""
    if metric.key in WINDOW_RATES or metric.key == SESSION_RATE:
        return "windows"
    return "sessions" if metric.distribution is SESSION else "requests"


@dataclass(frozen=True)
class Trial:
    run_dir: Path
    point: PointResult
    imported: Imported | None = None  # a run imported from another tool's file (results.json imported)

    @property
    def aggregate_only(self) -> bool:
        """Imported from a source of aggregates only: the tool's figures, no per-request values."""
        return self.imported is not None and self.imported.aggregate_only

    def value(self, metric: Metric) -> float | None:
        """The figure the gate compares: tokenbench's, or an aggregate-only import's tool figure."""
        return point_value(metric, self.point, self.imported)


@dataclass
class Cell:
    """One configuration at one load of one input, with its trials."""

    source: str
    config: str
    key: LoadKey
    label: str
    trials: list[Trial] = field(default_factory=list)


def read_cells(d: Path) -> list[Cell]:
    """A run directory's loads (its points at one load are trials), or an experiment's
    (configuration, load) cells over its finished trials."""
    d = Path(d)
    if is_experiment_dir(d):
        return _experiment_cells(d)
    if is_run_dir(d):
        results = read_results(d)
        config = results.target.backend or "run"
        return [
            Cell(d.name, config, _key(group[0]), group[0].label, [Trial(d, p, results.imported) for p in group])
            for group in trial_groups(results.points)
        ]
    from tokenbench.errors import BadInput

    raise BadInput(f"{d}: not a run directory (results.json) or an experiment directory (experiment.json)")


def _key(p: PointResult) -> LoadKey:
    value = load_value(p.load)
    return (p.load.kind, value if value is not None else p.label)


def _experiment_cells(d: Path) -> list[Cell]:
    exp = read_experiment(d)
    many_variants = len({c.variant for c in exp.cells.values()}) > 1
    cells: dict[tuple[str, str], Cell] = {}
    for cell in exp.cells.values():
        run_dir = d / cell.run_dir
        if cell.status != "ok" or not (run_dir / RESULTS).is_file():
            continue
        results = read_results(run_dir)
        config = f"{cell.server} · {cell.variant}" if many_variants else cell.server
        for p in results.points:
            c = cells.setdefault((config, p.load.model_dump_json()), Cell(exp.name or d.name, config, _key(p), p.label))
            c.trials.append(Trial(run_dir, p))
    return list(cells.values())


class Samples:
    """Per-request and per-window values, read once per (run directory, point, metric)."""

    def __init__(self) -> None:
        self._ranges: dict[Path, dict[int, list[tuple[int, int]]]] = {}
        self._values: dict[tuple[Path, int, str], np.ndarray | None] = {}

    def of(self, metric: Metric, trials: list[Trial]) -> tuple[np.ndarray, str] | None:
        """The values pooled over the trials and what they are ("requests", "windows"); None
        when this metric has none (or a trial's records are gone, or it never had any: an
        aggregate-only import)."""
        parts: list[np.ndarray] = []
        for t in trials:
            if t.aggregate_only:
                return None
            values = self._one(metric, t)
            if values is None:
                return None
            parts.append(values)
        return (np.concatenate(parts) if parts else np.empty(0)), _unit(metric)

    def _one(self, metric: Metric, t: Trial) -> np.ndarray | None:
        key = (t.run_dir, t.point.index, metric.key)
        if key not in self._values:
            self._values[key] = self._read(metric, t)
        return self._values[key]

    def _records(self, t: Trial) -> RecordSlice | None:
        """The point's records (none: an empty slice); None when records.jsonl is gone."""
        path = t.run_dir / RECORDS
        if not path.is_file():
            return None
        if t.run_dir not in self._ranges:
            self._ranges[t.run_dir] = point_ranges(path)
        return RecordSlice(path, self._ranges[t.run_dir].get(t.point.index, []))

    def _read(self, metric: Metric, t: Trial) -> np.ndarray | None:
        p = t.point
        if metric.key in WINDOW_RATES:
            return np.array([float(getattr(x, metric.key)) for x in _windows(p)])
        if metric.key == SESSION_RATE or metric.distribution is SESSION:
            return self._sessions(metric, t)
        dist = metric.distribution
        if dist is None or dist.key not in REQUEST_VALUES:
            return None
        get, ok_only = REQUEST_VALUES[dist.key]
        records = self._records(t)
        if records is None:
            return None
        open_loop = p.load.open_loop
        lo, hi = p.window.start_s, p.window.end_s
        out: list[float] = []
        for r in records:
            if ok_only and r.outcome is not Outcome.OK:
                continue
            when = r.scheduled_s if open_loop or r.sent_s is None else r.sent_s
            if not lo <= when < hi:
                continue
            v = get(r)
            if v is not None and math.isfinite(v):
                out.append(v)
        return np.array(out, dtype=np.float64)

    def _sessions(self, metric: Metric, t: Trial) -> np.ndarray | None:
        """A programs point's measured sessions: their latencies, or their starts per window."""
        if t.point.programs is None:
            return None
        records = self._records(t)
        if records is None:
            return None
        lo, hi = float(t.point.window.start_s), float(t.point.window.end_s)
        measured = [s for s in sessions(records) if _completed(s) and lo <= s.start_s < hi]
        if metric.key == SESSION_RATE:
            return np.array(
                [
                    sum(1 for s in measured if x.start_s <= s.start_s < x.end_s) / (x.end_s - x.start_s)
                    for x in _windows(t.point)
                    if x.end_s > x.start_s
                ]
            )
        return np.array([s.latency_s for s in measured if s.latency_s is not None], dtype=np.float64)


def _completed(s: SessionPath) -> bool:
    return s.ok and s.latency_s is not None


def _windows(p: PointResult) -> list[TimeWindow]:
    """The point's time-series windows inside its measurement window."""
    w = p.window
    return [x for x in p.timeseries if not x.ramp and x.start_s >= w.start_s and x.end_s <= w.end_s]
