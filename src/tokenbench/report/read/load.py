"""Read run and experiment directories, in the order given, into one ``ReportData``.

Owns the mapping from input directories to report data; nothing here computes a metric from
records. A RUN directory has ``results.json`` (``run_dir.py``); an EXPERIMENT directory has
``experiment.json`` (its aggregates over trials) and one run directory per cell
(``experiment_dir.py``). Configuration labels are then made unique across the inputs, so two
runs of the same backend are not drawn as one line.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tokenbench.report.read.data import (
    CapacityEntry,
    ExperimentHeader,
    GroupRow,
    ImageRow,
    Part,
    PhaseRow,
    PointRow,
    ProgramRow,
    ReplicaRow,
    ReportData,
    RunHeader,
    RunSeries,
    ScalingRow,
    SessionRow,
    SessionTimeline,
    Slo,
    SlowRow,
    StageRow,
    TurnRow,
)
from tokenbench.report.read.experiment_dir import read_experiment_dir
from tokenbench.report.read.run_dir import read_run
from tokenbench.results.agreement import Agreement
from tokenbench.results.layout import AGREEMENT
from tokenbench.rundir.read import ReportInputError, is_experiment_dir, is_run_dir

__all__ = ["ReportInputError", "is_experiment_dir", "is_run_dir", "load_inputs"]


def load_inputs(dirs: list[Path]) -> ReportData:
    """Read each directory (run or experiment, in the order given) into one ReportData."""
    if not dirs:
        raise ReportInputError("give at least one run or experiment directory")
    parts = [_read(Path(d)) for d in dirs]
    labels = _unique_labels(parts)
    runs: list[RunHeader] = []
    experiments: list[ExperimentHeader] = []
    rows: list[PointRow] = []
    series: list[RunSeries] = []
    slos: list[Slo] = []
    turns: list[TurnRow] = []
    capacities: list[CapacityEntry] = []
    images: list[ImageRow] = []  # images
    groups: list[GroupRow] = []
    phases: list[PhaseRow] = []
    slowest: list[SlowRow] = []
    programs: list[ProgramRow] = []
    sessions: list[SessionRow] = []
    timelines: list[SessionTimeline] = []
    replicas: list[ReplicaRow] = []
    stages: list[StageRow] = []
    scaling: list[ScalingRow] = []  # autoscaling
    for part, relabel in zip(parts, labels):
        runs += [replace(h, config=relabel[h.config]) for h in part.runs]
        experiments += [_relabel_experiment(h, relabel) for h in part.experiments]
        rows += [replace(r, config=relabel[r.config]) for r in part.rows]
        series += [_relabel_series(s, relabel) for s in part.series]
        slos += [slo for slo in part.slos if slo not in slos]
        turns += [replace(t, config=relabel.get(t.config, t.config)) for t in part.turns]
        capacities += [replace(c, config=relabel.get(c.config, c.config)) for c in part.capacities]
        images += [replace(i, config=relabel.get(i.config, i.config)) for i in part.images]
        groups += [replace(g, config=relabel.get(g.config, g.config)) for g in part.groups]
        phases += [replace(p, config=relabel.get(p.config, p.config)) for p in part.phases]
        slowest += [replace(s, config=relabel.get(s.config, s.config)) for s in part.slowest]
        programs += [replace(p, config=relabel.get(p.config, p.config)) for p in part.programs]
        sessions += [replace(s, config=relabel.get(s.config, s.config)) for s in part.sessions]
        timelines += [replace(t, config=relabel.get(t.config, t.config)) for t in part.timelines]
        replicas += [replace(r, config=relabel.get(r.config, r.config)) for r in part.replicas]
        stages += [replace(t, config=relabel.get(t.config, t.config)) for t in part.stages]
        scaling += [replace(r, config=relabel.get(r.config, r.config)) for r in part.scaling]
    return ReportData(
        tuple(runs),
        tuple(experiments),
        tuple(rows),
        tuple(series),
        tuple(slos),
        tuple(turns),
        tuple(capacities),
        tuple(images),
        tuple(groups),
        tuple(phases),
        tuple(slowest),
        tuple(programs),
        tuple(sessions),
        tuple(timelines),
        tuple(replicas),
        tuple(stages),
        tuple(scaling),
        _agreements(dirs),
    )


def _agreements(dirs: list[Path]) -> tuple[Agreement, ...]:
    """The paired outputs written into the inputs (agreement.json: `tokenbench agree`'s in a run
    directory, a determinism study's in each cell of an experiment), in input order."""
    found = []
    for d in map(Path, dirs):
        found.append(d / AGREEMENT)
        if is_experiment_dir(d):
            found += sorted((d / "cells").glob(f"*/{AGREEMENT}"))
    return tuple(Agreement.model_validate_json(p.read_text()) for p in found if p.is_file())


def _read(d: Path) -> Part:
    if is_experiment_dir(d):
        return read_experiment_dir(d)
    if is_run_dir(d):
        return read_run(d)
    raise ReportInputError(f"{d}: neither a run directory (results.json) nor an experiment directory (experiment.json)")


def _unique_labels(parts: list[Part]) -> list[dict[str, str]]:
    """Per part, config label -> a label unique across all inputs. Two runs of the same backend
    would otherwise be drawn as one line; the source's name tells them apart."""
    owners: dict[str, list[int]] = {}
    for i, part in enumerate(parts):
        for c in part.configs():
            owners.setdefault(c, []).append(i)
    names = [p.name for p in parts]
    out: list[dict[str, str]] = []
    for i, part in enumerate(parts):
        mapping = {}
        for c in part.configs():
            if len(owners[c]) == 1:
                mapping[c] = c
            elif names.count(part.name) == 1:
                mapping[c] = f"{c} ({part.name})"
            else:
                mapping[c] = f"{c} (#{i + 1} {part.name})"
        out.append(mapping)
    return out


def _relabel_series(s: RunSeries, relabel: dict[str, str]) -> RunSeries:
    new = relabel.get(s.config, s.config)
    return replace(s, config=new, title=s.title.replace(s.config, new, 1))


def _relabel_experiment(h: ExperimentHeader, relabel: dict[str, str]) -> ExperimentHeader:
    servers = tuple(replace(s, config=relabel.get(s.config, s.config)) for s in h.servers)
    return replace(h, servers=servers)
