"""A run directory (its results.json) -> what the report shows of it: a header, one row per load
(its points at that load are its trials: --trials N, or a load listed twice; one point: no CI),
its time series, with server spans its slowest requests (records.jsonl joined to
server_spans.jsonl by spans.phases, the results' own join), and an agent-programs run's sessions
(programs.py). The helpers here (spans, dataset text, SLO, load value)
serve the experiment reader too, whose cells are run directories."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from tokenbench.metrics.catalogue import SLO_DISTRIBUTIONS, Metric, shown_in
from tokenbench.report.read.data import (
    CapacityEntry,
    GroupRow,
    ImageRow,
    Part,
    PhaseRow,
    PointRow,
    PointSpan,
    ReplicaRow,
    RunHeader,
    RunSeries,
    ScalingRow,
    Slo,
    SlowRow,
    StageRow,
    TurnRow,
)
from tokenbench.report.read.programs import point_labels, program_rows, session_rows
from tokenbench.results import DatasetFacts, Load, PointResult, RunResults, mean_ci95
from tokenbench.results.capacity import CapacityResult
from tokenbench.results.imported import Imported
from tokenbench.results.layout import CAPACITY, RECORDS, SPANS
from tokenbench.results.trials import trial_groups
from tokenbench.rundir import RecordSlice, point_ranges
from tokenbench.rundir.read import ReportInputError, read_json, read_results
from tokenbench.spans.phases import GRACE_S, PHASES, SpanIndex, slowest_requests


def load_value(load: Load) -> float | None:
    """The point's load as one number: users, or offered requests per second."""
    value = load.users if load.kind == "users" else load.rate_per_s
    return None if value is None else float(value)


def point_value(metric: Metric, point: PointResult, imported: Imported | None) -> float | None:
    """The figure a point shows: tokenbench's own, or, for a run imported from a source of
    aggregates only (no requests: tokenbench's are absent), the tool's own (results.json
    ``imported``); None where neither has it."""
    if imported is not None and imported.aggregate_only:
        return imported.figure(point.index, metric.key)
    return metric.get(point)


def dataset_text(
    name: str | None, source: str | None, system_prompt: bool, unique_prefix: bool, exact_lengths: bool | None
) -> str:
    """'sharegpt, from FILE, with system prompt, unique prefixes, approximate lengths'."""
    bits = [str(name or "?")]
    if source:
        bits.append(f"from {source}")
    if system_prompt:
        bits.append("with system prompt")
    if unique_prefix:
        bits.append("unique prefixes")
    if exact_lengths is False:
        bits.append("approximate lengths")
    return ", ".join(bits)


def facts_text(dataset: DatasetFacts | None) -> str:
    if dataset is None:
        return "–"
    d = dataset
    return dataset_text(d.name, d.source, d.system_prompt, d.unique_prefix, d.exact_lengths)


def slo_of(results: RunResults) -> Slo:
    return {d.key: getattr(results.slo, d.key) for d in SLO_DISTRIBUTIONS}


def point_spans(results: RunResults) -> tuple[PointSpan, ...]:
    return tuple(
        PointSpan(
            index=p.index,
            label=p.label,
            load_kind=p.load.kind,
            start_s=p.span.start_s,
            ramp_end_s=p.span.ramp_end_s,
            measure_start_s=p.window.start_s,
            load_end_s=p.span.load_end_s,
            end_s=p.span.end_s,
            windows=tuple(p.timeseries),
        )
        for p in results.points
    )


def _header(path: Path, results: RunResults, config: str) -> RunHeader:
    target = results.target
    return RunHeader(
        path=path,
        name=path.name,
        config=config,
        backend=target.backend,
        engine=target.engine,
        engine_version=target.engine_version,
        cold_start_s=target.cold_start_s,
        model=target.model,
        api=target.api,
        dataset=facts_text(results.dataset),
        slo=slo_of(results),
        interrupted=bool(results.interrupted),
        num_points=len(results.points),
        url=target.url,
        imported=results.imported,
    )


def _outcomes(points: list[PointResult]) -> dict[str, int]:
    summed: dict[str, int] = {}
    for p in points:
        for outcome, n in p.requests.by_outcome.items():
            summed[outcome] = summed.get(outcome, 0) + n
    return summed


def read_run(path: Path) -> Part:
    """A run directory: one row per load, its points the trials (one point: one trial)."""
    results = read_results(path)
    # an imported run is named by the tool that measured it
    config = results.target.backend or (results.imported.tool if results.imported else "run")
    rows = [
        PointRow(
            source=path.name,
            config=config,
            backend=results.target.backend,
            swept={},
            variant=None,
            point=trials[0].index,
            label=trials[0].label,
            load_kind=trials[0].load.kind,
            load_value=load_value(trials[0].load),
            metrics={
                m.key: mean_ci95([point_value(m, p, results.imported) for p in trials]) for m in shown_in("aggregates")
            },
            outcomes=_outcomes(trials),
            num_trials=len(trials),
            errors_seen=tuple(e for p in trials for e in (p.errors_seen or ())),
            stopped_early=next((p.stopped_early for p in trials if p.stopped_early is not None), None),
            api=results.target.api,
        )
        for trials in trial_groups(results.points)
    ]
    series = [RunSeries(title=config, config=config, trial=None, run_dir=path, points=point_spans(results))]
    part = Part(path.name, [_header(path, results, config)], [], rows, series, [slo_of(results)])
    part.turns = turn_rows(results, config)
    part.groups = group_rows(results, config)
    part.replicas = replica_rows(results, config)  # fleets
    part.capacities = read_capacity(path, config)
    part.images = image_rows(results, config)  # images
    part.phases = phase_rows(results, config)  # server spans: server spans
    part.slowest = slow_rows(path, results, config)
    part.programs = program_rows(results, config)  # agent programs: only a programs run's points
    part.sessions, part.timelines = session_rows(path, results, config)
    part.stages = stage_rows(results, config)  # staged points
    part.scaling = scaling_rows(results, config)  # autoscaling: only a run that polled a scaler
    return part


def stage_rows(results: RunResults, config: str) -> list[StageRow]:
    """The staged points, stage by stage (none without one)."""
    labels = point_labels(results)
    return [StageRow(config, labels[p.index], tuple(p.stages)) for p in results.points if p.stages]


def scaling_rows(results: RunResults, config: str) -> list[ScalingRow]:
    """The points with a replica timeline (none unless the run polled a scaler)."""
    return [ScalingRow(config, p.label, float(p.span.start_s), p.scaling) for p in results.points if p.scaling]


def phase_rows(results: RunResults, config: str) -> list[PhaseRow]:
    """The points joined to server spans (none without --server-traces)."""
    rows = []
    for p in results.points:
        s = p.server_phases
        if s is None:
            continue
        p50 = {name: _float(d.p50) for name, d in s.phases.items()}
        slowest = {name: _float(v) for name, v in s.slowest.mean_s.items()} if s.slowest is not None else {}
        n = s.slowest.requests if s.slowest is not None else 0
        share = _float(s.joined_share)
        mean = {name: _float(d.mean) for name, d in s.phases.items()}
        client = _float(p.queue_s.mean)
        rows.append(
            PhaseRow(config, p.label, s.requests, share, p50, slowest, n, float(s.clock.offset_s), mean, client)
        )
    return rows


SLOWEST_REQUESTS = 10  # the report's table of a run's slowest requests by TTFT


def slow_rows(path: Path, results: RunResults, config: str, n: int = SLOWEST_REQUESTS) -> list[SlowRow]:
    """The run's ``n`` slowest requests by client TTFT with their server phases: records.jsonl
    joined to server_spans.jsonl by the results' own join (spans.phases), each point's spans due
    at its end + the grace, as derive.py has them. None without server spans (no --server-traces).
    Read point by point; only the ``n`` are kept."""
    spans_file = path / SPANS
    records_file = path / RECORDS
    if results.clock is None or not spans_file.is_file() or not records_file.is_file():
        return []
    if all(p.server_phases is None for p in results.points):
        return []
    origin = float(results.clock.origin_unix_s)
    spans = SpanIndex.read(spans_file, origin)
    if spans is None:
        return []
    ranges = point_ranges(records_file)
    labels = {p.index: p.label for p in results.points}
    points = [
        (RecordSlice(records_file, ranges.get(p.index, [])), float(p.span.end_s) + GRACE_S)
        for p in results.points
        if p.server_phases is not None
    ]
    return [
        SlowRow(
            config,
            labels.get(s.record.point, str(s.record.point)),
            s.record.worker,
            s.record.id,
            float(s.record.ttft_s or 0.0),
            {name: s.phases.phase(name) if s.phases is not None else None for name in PHASES},
        )
        for s in slowest_requests(points, spans, origin, n)
    ]


def read_capacity(path: Path, config: str) -> list[CapacityEntry]:
    """The run's capacity search (capacity.json beside results.json), if it was one."""
    file = path / CAPACITY
    if not file.is_file():
        return []
    try:
        result = CapacityResult.model_validate(read_json(file))
    except ValidationError as exc:
        raise ReportInputError(f"{file}: not a capacity.json tokenbench can read ({exc})") from None
    return [CapacityEntry(config, result)]


def image_rows(results: RunResults, config: str) -> list[ImageRow]:
    """The points that sent images (none for a text run)."""
    return [
        ImageRow(
            config,
            p.label,
            p.images.requests,
            p.images.images_per_request,
            p.images.pixels_per_image,
            p.images.images_per_s,
            p.images.prompt_tokens.mean,
            p.ttft_s.mean,
        )
        for p in results.points
        if p.images is not None
    ]


def turn_rows(results: RunResults, config: str) -> list[TurnRow]:
    """A multi-turn run's points by turn index (none for other runs)."""
    return [
        TurnRow(config, p.label, t.turn_index, t.count, t.ttft_s.mean, t.ttft_s.p90, t.prompt_tokens.mean)
        for p in results.points
        for t in p.by_turn or []
    ]


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def replica_rows(results: RunResults, config: str) -> list[ReplicaRow]:
    """A fleet run's points by replica (none for a single server's)."""
    rows = []
    for p in results.points:
        fleet = p.fleet
        for r in fleet.replicas if fleet is not None else []:
            g, server = r.requests, r.server
            rows.append(
                ReplicaRow(
                    config,
                    p.label,
                    r.replica,
                    g.requests if g is not None else None,
                    _float(r.routed_requests),
                    _float(g.ttft_s.p50) if g is not None else None,
                    _float(g.ttft_s.p90) if g is not None else None,
                    _float(g.e2e_s.p90) if g is not None else None,
                    _float(g.output_tokens_per_s) if g is not None else None,
                    _float(g.good_fraction) if g is not None else None,
                    _float(server.running.mean) if server is not None and server.running is not None else None,
                    _float(server.kv_usage.mean) if server is not None and server.kv_usage is not None else None,
                    _float(r.prefix_cache_hit_rate),
                    _float(server.generated_tokens) if server is not None else None,
                    _float(fleet.imbalance_max_over_mean) if fleet is not None else None,
                    fleet.imbalance_over if fleet is not None else None,
                )
            )
    return rows


def group_rows(results: RunResults, config: str) -> list[GroupRow]:
    """A run's points by adapter, class and tenant (routing; none for other runs)."""
    rows = []
    for p in results.points:
        jain = p.fairness.jain_index if p.fairness is not None else None
        for kind, groups in (("adapter", p.by_adapter), ("class", p.by_class), ("tenant", p.by_tenant)):
            for name, g in (groups or {}).items():
                rows.append(
                    GroupRow(
                        config,
                        p.label,
                        kind,
                        name,
                        g.requests,
                        _float(g.share),
                        _float(g.ttft_s.p50),
                        _float(g.ttft_s.p90),
                        _float(g.tpot_s.p50),
                        _float(g.e2e_s.p90),
                        _float(g.output_tokens_per_s),
                        _float(g.good_fraction),
                        _float(jain) if kind == "tenant" else None,
                    )
                )
    return rows
