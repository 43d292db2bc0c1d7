"""`tokenbench experiment run`, top to bottom: expand the spec, then per server configuration:
launch it once, run its pending cells (each a normal run directory), stop it; aggregate trials.

State lives in ``experiment.json`` in the experiment directory, rewritten atomically after every
cell, so an interrupted experiment resumes where it stopped: cells marked ``ok`` are skipped, a
cell that was running is run again from scratch. A server that does not start, or a cell that
fails, is recorded with its error and the experiment goes on.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypedDict

from pydantic import ValidationError
from rich.console import Console

from tokenbench import __version__
from tokenbench.backends import BackendError, get_profile
from tokenbench.backends.server import ServerUnderTest, engine_profile, server_under_test
from tokenbench.capacity import search
from tokenbench.clients.stream import TargetUnreachable
from tokenbench.common import redact
from tokenbench.common.procs import free_port
from tokenbench.common.redact import mask
from tokenbench.config import BackendConfig, RunConfig
from tokenbench.experiments.aggregate import aggregate, capacity_rows
from tokenbench.experiments.auto_trials import verdicts
from tokenbench.experiments.prerequisites import check_prerequisites
from tokenbench.experiments.spec import (
    Cell,
    ExperimentError,
    ExperimentSpec,
    ServerPlan,
    expand,
    parse_spec,
    same_experiment,
    trial_cell,
)
from tokenbench.results import CellRow, Experiment, ServerRow, Tool, TrialsRow
from tokenbench.results.experiment import CellStatus
from tokenbench.results.layout import EXPERIMENT
from tokenbench.results.manifest import ATTACHED
from tokenbench.run import pooling_launch, resettable
from tokenbench.run import run as run_cell
from tokenbench.rundir import OutDirError, check_out_dir, write_json
from tokenbench.spans.launch import traced_launch
from tokenbench.spans.receiver import TRACES_PATH

STATE = EXPERIMENT


@dataclass
class ExperimentResult:
    dir: Path
    state: Experiment
    interrupted: bool


def run_experiment(spec: ExperimentSpec, out_dir: Path, console: Console) -> ExperimentResult:
    plans = expand(spec)
    # every server still to run can start here (venvs, engine_bin) before the first cell (and
    # before the directory is made), or none is run
    resuming = (out_dir / STATE).exists()
    if not resuming:
        check_prerequisites(plans)
    state = _load_state(out_dir, spec)
    if resuming:
        check_prerequisites([plan for plan in plans if any(not _done(state, c.id) for c in plan.cells)])
    planned = [c.id for plan in plans for c in plan.cells]
    try:
        for plan in plans:
            pending = [c for c in plan.cells if not _done(state, c.id)]
            if not pending:
                console.print(f"[dim]{plan.label}: all {len(plan.cells)} cells done, skipped[/]")
                continue
            if _run_server(plan, pending, out_dir, state, console):
                return _finish(out_dir, state, planned, console, interrupted=True)
        if spec.trials == "auto" and _more_trials(spec, plans, out_dir, state, console):
            return _finish(out_dir, state, planned, console, interrupted=True)
    except KeyboardInterrupt:
        return _finish(out_dir, state, planned, console, interrupted=True)
    return _finish(out_dir, state, planned, console, interrupted=False)


def _more_trials(
    spec: ExperimentSpec, plans: list[ServerPlan], out_dir: Path, state: Experiment, console: Console
) -> bool:
    """``trials: auto``: while some (configuration, variant) is not settled (auto_trials.py), run
    one more trial of each such, one server launch per configuration a round; the trials each one
    needed go to experiment.json's ``trials_needed``. True if interrupted."""
    auto = spec.auto_trials
    while True:
        state.aggregates = aggregate(out_dir, state)
        finished: dict[tuple[str, str], int] = {(p.label, v.label): 0 for p in plans for v in spec.variants}
        last: dict[tuple[str, str], int] = dict(finished)
        for cell in state.cells.values():
            group = (cell.server, cell.variant)
            if group in finished:
                last[group] = max(last[group], cell.trial)
                finished[group] += cell.status == "ok"
        judged = verdicts(state.aggregates, finished, auto)
        for group, row in judged.items():  # trials that failed count against the ceiling too
            if row is None and last[group] >= auto.max:
                judged[group] = TrialsRow(
                    server=group[0],
                    variant=group[1],
                    trials=finished[group],
                    stopped_by="ceiling",
                    metric=auto.metric,
                    worst_precision=None,
                )
        state.trials_needed = [row for row in judged.values() if row is not None]
        _save(out_dir, state)
        ran = False
        for plan in plans:
            cells = [
                trial_cell(spec, plan, v.label, last[(plan.label, v.label)] + 1)
                for v in spec.variants
                if judged[(plan.label, v.label)] is None and last[(plan.label, v.label)] < auto.max
            ]
            if not cells:
                continue
            ran = True
            console.print(f"[dim]{plan.label}: trials: auto: trial {cells[0].trial} ({auto.metric} not yet settled)[/]")
            if _run_server(plan, cells, out_dir, state, console):
                return True
        if not ran:
            for row in state.trials_needed:
                console.print(f"{row.server} · {row.variant}: {row.trials} trials ({row.stopped_by})")
            return False


def _done(state: Experiment, cell_id: str) -> bool:
    cell = state.cells.get(cell_id)
    return cell is not None and cell.status == "ok"


def _run_server(plan: ServerPlan, cells: list[Cell], out_dir: Path, state: Experiment, console: Console) -> bool:
    """Launch (or attach to) one server configuration and run its cells; True if interrupted.
    With --prefix-cache reset and a launched engine that has no reset control, the server is
    started afresh for every cell (its first point then starts cold; later points of a cell
    record not_supported)."""
    server_row = _server_row(state, plan)
    logs = out_dir / "servers"
    logs.mkdir(exist_ok=True)
    backend, cells = _traced(_backend(plan, cells), plan, cells, console)
    for group in _lifetimes(plan, cells):
        try:
            with server_under_test(
                backend,
                plan.url if plan.backend is None else None,
                logs / f"{plan.label}.log",
                lambda line: console.print(f"[bold]{plan.label}[/]: {line}"),
            ) as sut:
                facts = {"cold_start_s": sut.facts.cold_start_s, "engine_version": sut.facts.engine_version}
                state.set_server(server_row.model_copy(update={"status": "ok", "error": None, **facts}))
                _save(out_dir, state)
                for i, cell in enumerate(group):
                    # only the first cell meets a server no request has touched
                    if _run_one(cell, plan, sut if i == 0 else replace(sut, fresh=False), out_dir, state, console):
                        return True
        except (BackendError, FileNotFoundError) as exc:
            state.set_server(server_row.model_copy(update={"status": "failed", "error": str(exc)}))
            for cell in group:
                if not _done(state, cell.id):
                    _mark(state, cell, plan, "failed", f"server did not start: {exc}")
            console.print(f"[red]{plan.label}: {exc}[/]")
            _save(out_dir, state)
    return False


def _backend(plan: ServerPlan, cells: list[Cell]) -> BackendConfig | None:
    """What to launch (None: attach to the entry's URL, naming its profile when given)."""
    if plan.backend is not None:
        launch = pooling_launch(plan.backend, cells[0].config.target)  # embeddings
        profile = engine_profile(get_profile(launch.name), launch) if launch.name else None
        return resettable(profile, launch, cells[0].config.prefix_cache) if profile else launch
    if plan.server.name or plan.server.metrics_url:
        return BackendConfig(name=plan.server.name, metrics_url=plan.server.metrics_url)
    return None


def _traced(
    backend: BackendConfig | None, plan: ServerPlan, cells: list[Cell], console: Console
) -> tuple[BackendConfig | None, list[Cell]]:
    """--server-traces: one receiver port for the server configuration (its cells' runs
    each listen there in turn), and the launched engine pointed at it as ``tokenbench run`` points
    its own (spans.launch.traced_launch); an attached server: the console says where."""
    if not cells or not cells[0].config.server_traces:
        return backend, cells
    port = cells[0].config.server_traces_port or free_port()
    grpc_port = cells[0].config.server_traces_grpc_port
    while not grpc_port or grpc_port == port:
        grpc_port = free_port()
    endpoint = f"http://127.0.0.1:{port}{TRACES_PATH}"

    def say(line: str) -> None:
        console.print(f"[bold]{plan.label}[/]: {line}")

    backend = traced_launch(backend, endpoint, plan.backend is None, say, f"http://127.0.0.1:{grpc_port}")
    ports = {"server_traces_port": port, "server_traces_grpc_port": grpc_port}
    at_port = [replace(c, config=c.config.model_copy(update=ports)) for c in cells]
    return backend, at_port


def _lifetimes(plan: ServerPlan, cells: list[Cell]) -> list[list[Cell]]:
    """The cells each server start runs: all of them on one server, or one each when a prefix-cache
    reset is asked of a launched engine that cannot reset itself (a restart is its reset)."""
    name = plan.backend.name if plan.backend is not None else None
    no_control = name is not None and get_profile(name).reset_prefix_cache is None
    if no_control and cells[0].config.prefix_cache == "reset":
        return [[cell] for cell in cells]
    return [cells]


def _run_one(
    cell: Cell, plan: ServerPlan, sut: ServerUnderTest, out_dir: Path, state: Experiment, console: Console
) -> bool:
    run_dir = out_dir / "cells" / cell.id
    if run_dir.exists():  # a cell interrupted or failed earlier: start it again from nothing
        shutil.rmtree(run_dir)
    config = cell.config.model_copy(
        update={"target": cell.config.target.model_copy(update={"url": sut.url}), "out_dir": run_dir}
    )
    console.print(f"  cell {cell.id}")
    _mark(state, cell, plan, "running", None)
    _save(out_dir, state)
    t0 = time.perf_counter()
    try:
        interrupted = _measure(cell, config, sut, console)
    except KeyboardInterrupt:  # Ctrl-C outside a load point (set-up, between points)
        _mark(state, cell, plan, "interrupted", "Ctrl-C", wall_s=time.perf_counter() - t0)
        _save(out_dir, state)
        raise
    except (TargetUnreachable, BackendError, ValueError, OSError) as exc:
        _mark(state, cell, plan, "failed", f"{type(exc).__name__}: {exc}")
        console.print(f"  [red]cell {cell.id} failed: {exc}[/]")
        _save(out_dir, state)
        return False
    status: CellStatus = "interrupted" if interrupted else "ok"
    _mark(state, cell, plan, status, None, wall_s=time.perf_counter() - t0)
    _save(out_dir, state)
    return interrupted


def _measure(cell: Cell, config: RunConfig, sut: ServerUnderTest, console: Console) -> bool:
    """The cell's run: its loads, or a capacity search (capacity.json in its run directory);
    True if interrupted."""
    if cell.search is None:
        return run_cell(config, console, server=sut).interrupted
    result = search(config, cell.search.objectives(), cell.search.settings(), server=sut, console=console)
    console.print(f"  {cell.id}: {result.answer}")
    return result.stopped_by == "interrupted"


def _mark(
    state: Experiment, cell: Cell, plan: ServerPlan, status: CellStatus, error: str | None, **extra: float
) -> None:
    state.cells[cell.id] = CellRow(
        server=plan.label,
        variant=cell.variant,
        trial=cell.trial,
        status=status,
        error=error,
        run_dir=f"cells/{cell.id}",
        **extra,
    )


class _Upstream(TypedDict, total=False):
    """ServerRow's upstream, given only when set (experiment.json writes it only then)."""

    upstream: str


def _server_row(state: Experiment, plan: ServerPlan) -> ServerRow:
    row = state.server(plan.label)
    if row is None:
        upstream = _Upstream(upstream=plan.server.upstream) if plan.server.upstream else _Upstream()
        row = ServerRow(
            label=plan.label,
            backend=plan.server.name or ATTACHED,
            swept=plan.swept,
            status="pending",
            error=None,
            **upstream,
        )
        state.set_server(row)
    return row


def _load_state(out_dir: Path, spec: ExperimentSpec) -> Experiment:
    path = out_dir / STATE
    if not path.exists():
        try:
            check_out_dir(out_dir)  # new, writable, with room: before any server starts
        except OutDirError as exc:
            raise ExperimentError(str(exc)) from None
    spec_json = stored_spec(spec)
    if path.exists():
        try:
            state = Experiment.from_json(json.loads(path.read_text()))
        except (ValueError, ValidationError) as exc:
            raise ExperimentError(f"{path}: not an experiment state tokenbench can resume ({exc})") from None
        if not _resumes(state.spec, spec_json):
            raise ExperimentError(
                f"{out_dir} holds a different experiment ({state.name!r}, or the same one with "
                f"other settings); resume needs the same file, so pass another --out"
            )
        return state
    return Experiment(
        name=spec.name,
        description=spec.description,
        spec=spec_json,
        tool=Tool(name="tokenbench", version=__version__),
        created_unix_s=time.time(),
        servers=[],
        cells={},
        aggregates=[],
        complete=False,
    )


def stored_spec(spec: ExperimentSpec) -> dict[str, Any]:
    """The spec as experiment.json holds it: as validated (each setting the run models' value),
    every credential masked, a request header's value too (how a gateway key travels: registered
    here as each cell's run registers its own, so no line of this process shows it either)."""
    cells = [cell for plan in expand(spec) for cell in plan.cells]
    redact.register(*(v for cell in cells for v in redact.secrets_of(headers=cell.config.target.headers)))
    masked: dict[str, Any] = json.loads(json.dumps(mask(spec.model_dump(mode="json"))))
    return masked


def _resumes(stored: dict[str, Any], spec_json: dict[str, Any]) -> bool:
    """experiment.json's spec is this experiment's: as this version writes it, or read back to the
    same cells with the same settings (as an earlier version wrote it)."""
    if stored == spec_json:
        return True
    try:
        return same_experiment(parse_spec(stored), parse_spec(spec_json))
    except ExperimentError:
        return False


def _save(out_dir: Path, state: Experiment) -> None:
    write_json(out_dir / STATE, state.to_json())


def _finish(
    out_dir: Path, state: Experiment, planned: list[str], console: Console, interrupted: bool
) -> ExperimentResult:
    state.aggregates = aggregate(out_dir, state)
    if state.spec.get("search") is not None:
        state.capacity = capacity_rows(out_dir, state)
    state.complete = not interrupted and all(_done(state, cell_id) for cell_id in planned)
    _save(out_dir, state)
    from tokenbench.console.tables import experiment_table
    from tokenbench.report.sections.layers import layer_study
    from tokenbench.report.sections.speculation_speedup import SPECULATION_TAG, speculation_study

    console.print(experiment_table(state))
    if any(s.upstream for s in state.servers):  # a serving-layer study: each layer vs the engine alone
        for renderable in layer_study(out_dir):
            console.print(renderable)
    if any(SPECULATION_TAG in s.swept for s in state.servers):  # speculation vs the same engine without it
        for renderable in speculation_study(out_dir):
            console.print(renderable)
    from tokenbench.experiments.determinism import write_determinism

    # a determinism study (cells that kept their text, loads low, high, low): answers changed by the load
    for line in write_determinism([out_dir / row.run_dir for row in state.cells.values() if row.status == "ok"]):
        console.print(line, markup=False, highlight=False)
    ranked = sorted(state.capacity, key=lambda r: -(r.max_passing if r.max_passing is not None else -1))
    for row in ranked:  # a search experiment: each configuration's answer, highest capacity first
        console.print(f"[bold]{row.server} · {row.variant}[/]: {row.answer}")
    return ExperimentResult(out_dir, state, interrupted)
