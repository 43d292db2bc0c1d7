"""A run's files -> results.json: the one path, for a run as it goes and for ``tokenbench
recompute`` after a crash or an upgrade that fixed a metric.

Inputs, all in the run directory:
- ``config.json`` (manifest.RunManifest): the settings, the resolved target and server, the
  dataset, the run's clock and where telemetry went (written before the first request);
- ``records.jsonl``: one line per request, flushed as each ends;
- ``samples.jsonl``: the server's and the GPU's scrapes, and the run's timeline: a
  ``point_start`` event (manifest.PointStart) when a load point starts and a ``point`` event
  (manifest.PointEnd) with its span when it ends (written through the sampler, run/__init__.py).
A run computes each point from these very facts (its records read back from records.jsonl, its
span as the event it wrote), so a recompute of the same files gives the same results.json; only
``computed_by`` says which tool version computed it, and how.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from tokenbench import __version__
from tokenbench.config import LoadPoint, StagedLoad, StopConfig, open_loop
from tokenbench.config.slo import SLOConfig
from tokenbench.errors import BadInput
from tokenbench.loadgen.autostop import GATED, OVER_SATURATED, STEADY_WINDOWS, steady_state_of
from tokenbench.loadgen.schedule import describe
from tokenbench.metrics import (
    ChunkTally,
    PointSpan,
    Window,
    by_turn,
    series_edges,
    session_expected_reuse,
    summarize_point,
    timeseries,
)
from tokenbench.metrics.cost import point_cost
from tokenbench.metrics.errors import errors_seen
from tokenbench.metrics.fleet import fleet_stats
from tokenbench.metrics.groups import group_breakdowns
from tokenbench.metrics.prefix_cache import CacheTally, expected_reuse, prefix_cache
from tokenbench.metrics.programs import program_stats
from tokenbench.metrics.scaling import ScalingSpan, load_step_s, point_scaling, stage_steps_s
from tokenbench.metrics.speculation import server_timing_stats, speculation_stats
from tokenbench.metrics.stages import StageTally, stage_results
from tokenbench.metrics.stats import distribution
from tokenbench.records import RequestRecord
from tokenbench.results import (
    SCHEMA_VERSION,
    ComputedBy,
    Load,
    PointResult,
    RunResults,
    Server,
    Slo,
    Span,
    Target,
    TimeWindow,
)
from tokenbench.results.layout import CONFIG, RECORDS, RESULTS, SAMPLES, SPANS
from tokenbench.results.manifest import (
    EarlierRun,
    ManifestError,
    PointEnd,
    PointStart,
    RunManifest,
    earlier_spans,
    load_manifest,
)
from tokenbench.results.run import Distribution, ProgramStats, WindowClient
from tokenbench.results.scaling import Scaling
from tokenbench.results.stopping import AutoStop, OverSaturated, SteadyState
from tokenbench.rundir import RecordSlice, point_ranges, write_json
from tokenbench.spans.phases import GRACE_S, SpanIndex, http_phases, joined_phases, point_server_phases
from tokenbench.telemetry.client_health import point_client, window_client
from tokenbench.telemetry.energy import point_energy
from tokenbench.telemetry.sampler import SamplesFile
from tokenbench.telemetry.summary import (
    matched_client_ttft,
    point_gpu,
    point_server,
    point_server_cpu,
    replica_names,
    replica_servers,
    routed_requests,
    window_server,
)


class RecomputeError(BadInput):
    """A directory that cannot be recomputed; the message names what is missing."""


def computed_by(how: Literal["run", "recompute"]) -> ComputedBy:
    return ComputedBy(name="tokenbench", version=__version__, how=how)


def results_header(
    manifest: RunManifest, how: Literal["run", "recompute"], points: Sequence[PointResult] = ()
) -> RunResults:
    """results.json from config.json alone, with ``points`` (by default none: its header)."""
    target, config = manifest.resolved_target, manifest.config
    server = manifest.backend.to_json() if manifest.backend is not None else {}
    return RunResults(
        schema_version=SCHEMA_VERSION,
        tool=manifest.tool,
        computed_by=computed_by(how),
        target=Target.model_validate(
            {"url": target.url, "model": target.model, "api": target.api, "ignore_eos": config.target.ignore_eos}
            | server
            | ({"served_model": target.served_model} if target.served_model is not None else {})
        ),
        dataset=manifest.dataset_info,
        slo=Slo(**config.slo.model_dump()),
        clock=manifest.clock,
        telemetry=manifest.telemetry,
        workers=manifest.workers_facts,  # only a run of several workers
        points=list(points),
    )


def point_result(
    manifest: RunManifest,
    event: PointEnd,
    records: Iterable[RequestRecord],
    samples_file: SamplesFile,
    # Any: the client's own samples are samples.jsonl's lines as written (telemetry/ reads them)
    client_samples: Sequence[dict[str, Any]] | None = None,
    spans: SpanIndex | None = None,
) -> PointResult:
    """One point of results.json from its span (a ``point`` event) and its records, streamed once
    (e.g. a RecordSlice of records.jsonl): their chunk times are tallied a batch at a time and
    dropped, so a point of any length is summarized in memory that does not grow with its chunks
    beyond its ITL gaps (metrics.ChunkTally). ``client_samples``: the run's own ``client`` samples
    as it wrote them (maybe not on disk yet); by default samples.jsonl's. ``spans``: the server's
    spans (server_spans.jsonl), joined to the records for the server's phases."""
    config, load = manifest.config, event.load
    start_s, end_s = event.start_s, event.end_s
    window = Window(event.window_start_s, event.load_end_s)
    span = PointSpan(window, open_loop=open_loop(load), end_s=end_s)
    chunks = ChunkTally(span, series_edges(start_s, end_s, config.window_s), config.deadlines)
    cache = CacheTally(chunks.in_population)  # reads the server timings consume drops
    staged = (
        StageTally(load, start_s, event.load_end_s) if isinstance(load, StagedLoad) else None
    )  # what its stages read of chunks
    kept = chunks.consume(cache.observe(records if staged is None else staged.observe(records)))  # without chunk times
    metrics = summarize_point(kept, span, config.slo, chunks)
    samples, header = samples_file.scrapes(), samples_file.header()
    health = samples_file.events("client") if client_samples is None else client_samples
    user_spans = [(a, b) for a, b in event.user_spans]
    series = timeseries(
        kept,
        start_s,
        end_s,
        event.ramp_end_s,
        user_spans,
        config.window_s,
        tokens=chunks.series_tokens,
        target=load.level_at if isinstance(load, StagedLoad) else None,
    )
    server = point_server(samples, window.start_s, window.end_s)
    population = [r for r in kept if chunks.in_population(r)]
    # the workload's expected reuse: over the rows a replay point sent (its own trace facts; a run
    # before them: the dataset's), shared prefixes' (dataset facts), else sessions'
    workload_reuse = expected_reuse(manifest.dataset_info, event.trace)
    if workload_reuse is None and config.sessions is not None:
        workload_reuse = session_expected_reuse(population, kept)
    # --multi-turn: by_turn over the window population, and the load generator's counts over the
    # whole point (a point the process never finished has none)
    multi_turn = event.sessions is not None or config.sessions is not None
    price = config.cost  # a run given a price: each point's cost
    scaling = _scaling(event, kept, samples_file, config.slo)  # only a run that polled a scaler
    replica_s = scaling.replica_seconds if scaling is not None else None
    # routing: by adapter, class and tenant, and fairness (only when requests had groups)
    groups = group_breakdowns(population, metrics.rate_period_s or metrics.window_s, config.slo, config.mix)
    # Every part by name, the metrics as summarize_point made them. The parts only some points have
    # are None where a point has none: absent from its results.json (PointResult's OptionalParts).
    return PointResult(
        # which point: its index, its load with the run's stop settings, its span
        index=event.index,
        label=describe(load),
        load=_load(config.stop, load),
        span=Span(start_s=start_s, ramp_end_s=event.ramp_end_s, load_end_s=event.load_end_s, end_s=end_s),
        interrupted=event.interrupted,
        # its metrics over the window, from its records (PointMetrics: declared once, in results)
        **metrics.fields(),
        # the server and the GPU over the client's window; over the whole point beside, named so
        server=_with_matched_ttft(server, kept),
        server_whole_point=point_server(samples, start_s, end_s),
        gpu=point_gpu(samples, header, window.start_s, window.end_s),
        gpu_whole_point=point_gpu(samples, header, start_s, end_s),
        server_cpu=point_server_cpu(samples, window.start_s, window.end_s),
        timeseries=_windows(series, samples, health),
        by_turn=by_turn(population) if multi_turn else None,
        sessions=event.sessions,
        programs=_programs(event, population, kept, window, spans, manifest)
        if config.dataset.name == "programs"
        else None,
        # speculative decoding and the server's own timing, as the responses said (and its counters)
        speculation=speculation_stats(population, server.speculation if server is not None else None),
        server_timing=server_timing_stats(population),
        trace=event.trace,
        prefix_cache=prefix_cache(event.prefix_cache_reset, server, cache, workload_reuse),
        cost=point_cost(price, metrics.output_tokens_per_s, metrics.total_tokens_per_s, replica_s)
        if price is not None
        else None,
        energy=point_energy(samples, header, window.start_s, window.end_s, metrics.output_tokens_per_s),
        # None: a run before it was sampled
        client=point_client(health, window.start_s, window.end_s, _send_lags(load, kept, window)),
        workers_lost=event.workers_lost or None,  # only a point during which a worker died
        errors_seen=errors_seen(kept) or None,  # only a point with failed requests
        stopped_early=event.stopped_early,  # only a point the circuit breaker stopped
        by_adapter=groups.by_adapter,
        by_class=groups.by_class,
        by_tenant=groups.by_tenant,
        fairness=groups.fairness,
        fleet=fleet_stats(
            population,
            replica_names(samples),
            routed_requests(samples, window.start_s, window.end_s),
            replica_servers(samples, window.start_s, window.end_s),
            metrics.rate_period_s or metrics.window_s,
            config.slo,
            {k: s.instance for k, s in spans.by_request.items() if s.instance} if spans is not None else None,
        ),
        # autostop: every point's steady start; a point that judged itself: its stop (and evidence)
        steady_state=_steady_state(kept, event, config.window_s, _tolist(chunks.series_tokens), config.stop),
        auto_stop=_auto_stop(event),
        over_saturated=_over_saturated(event),
        http_phases=_http_phases(population),  # server spans: the client's HTTP phases
        server_phases=point_server_phases(
            event.index, population, kept, spans, manifest.clock.origin_unix_s, start_s, end_s
        )
        if spans is not None and manifest.clock is not None
        else None,
        # a staged point: stage by stage (metrics/stages.py)
        stages=stage_results(kept, load, start_s, config.slo, staged)
        if isinstance(load, StagedLoad) and staged is not None
        else None,
        scaling=scaling,  # autoscaling: the replica timeline, scale-ups' lags, replica-seconds
    )


def _scaling(
    event: PointEnd, records: Sequence[RequestRecord], samples_file: SamplesFile, slo: SLOConfig
) -> Scaling | None:
    """The point's scaling from the scaler's polls (None: the run polled none), its load step
    against the point before it (its ``point_start``)."""
    polls = samples_file.replica_polls()
    if not polls:
        return None
    previous = next((s.load for s in samples_file.point_starts() if s.index == event.index - 1), None)
    header = samples_file.header() or {}
    interval = header.get("interval_s")
    span = ScalingSpan(
        start_s=event.start_s,
        end_s=event.end_s,
        step_s=load_step_s(previous, event.load, event.start_s),
        slo=slo,
        interval_s=float(interval) if isinstance(interval, int | float) else None,
        stage_steps_s=stage_steps_s(event.load, event.start_s),
    )
    return point_scaling(polls, records, span)


def _programs(
    event: PointEnd,
    population: Sequence[RequestRecord],
    kept: Sequence[RequestRecord],
    window: Window,
    spans: SpanIndex | None,
    manifest: RunManifest,
) -> ProgramStats:
    """An agent-programs point: its sessions and their critical paths (metrics/programs.py), each
    call's server phases from its spans where joined."""
    phases = None
    if spans is not None and manifest.clock is not None:
        phases, _ = joined_phases(kept, spans, manifest.clock.origin_unix_s, event.end_s + GRACE_S)
    window_s = (window.start_s, window.end_s)
    return program_stats(population, kept, window_s, event.programs, phases, manifest.config.slo.session_s)


def _send_lags(load: LoadPoint, records: Sequence[RequestRecord], window: Window) -> list[float] | None:
    """An open-loop point's send lags: each request due in the window, how late its
    exchange began (``http_start_s - scheduled_s``); None for a closed-loop point and one whose
    sends wait for a slot (``--max-concurrency``: that wait is the server's, queue delay)."""
    if not open_loop(load) or getattr(load, "max_concurrency", None) is not None:
        return None
    return [
        r.phases.http_start_s - r.scheduled_s
        for r in records
        if r.phases is not None and r.phases.http_start_s is not None and window.start_s <= r.scheduled_s < window.end_s
    ]


def _steady_state(
    records: Sequence[RequestRecord],
    event: PointEnd,
    window_s: float,
    tokens: Sequence[float] | None,
    stop: StopConfig,
) -> SteadyState:
    """Where the point's figures stopped drifting (autostop.steady_state_of over the time series'
    windows after the ramp-up, up to the load's end), from its start."""
    start = steady_state_of(records, event.start_s, event.ramp_end_s, event.load_end_s, window_s, tokens)
    return SteadyState(
        reached=start is not None,
        start_s=None if start is None else start - event.start_s,
        windows=STEADY_WINDOWS,
        window_s=window_s,
        window_start=bool(stop.warmup_auto),
    )


def _tolist(values: Any) -> list[float] | None:
    return None if values is None else [float(v) for v in values]


def _auto_stop(event: PointEnd) -> AutoStop | None:
    """How a point that judged itself stopped (autostop.py), its time from the point's start."""
    facts = event.auto_stop
    if facts is None:
        return None
    target, precision = facts.precision_target, facts.precision
    precise = None
    if target is not None and precision is not None:
        precise = all(
            (p := precision.get(name)) is not None and p.relative is not None and p.relative <= target for name in GATED
        )
    return AutoStop(
        reason=facts.reason,
        at_s=facts.at_s - event.start_s,
        precision_target=target,
        precision=precision,
        precise=precise,
    )


def _over_saturated(event: PointEnd) -> OverSaturated | None:
    facts = event.auto_stop
    if facts is None or facts.reason != OVER_SATURATED or facts.backlog is None:
        return None
    return OverSaturated(at_s=facts.at_s - event.start_s, backlog=facts.backlog)


def _http_phases(records: Sequence[RequestRecord]) -> dict[str, Distribution] | None:
    """server spans: the population's HTTP phases (None: records from before they were stamped)."""
    phases = http_phases(records)
    return {name: distribution(v) for name, v in phases.items()} if phases["ttfb"] else None


def _windows(
    series: Sequence[WindowClient], samples: list[dict[str, Any]], health: Sequence[dict[str, Any]]
) -> list[TimeWindow]:
    """Each time-series window: the client's figures, the server's and the client's health beside
    (the scrapes and the client's samples as samples.jsonl has them: telemetry/ reads them)."""
    return [
        TimeWindow.of(w, window_server(samples, w.start_s, w.end_s), window_client(health, w.start_s, w.end_s))
        for w in series
    ]


def _load(stop: StopConfig, load: LoadPoint) -> Load:
    """A point's load with the run's stop settings."""
    fields = load.model_dump(mode="json")
    if isinstance(load, StagedLoad):  # a stage names its one level
        fields["stages"] = [{k: v for k, v in stage.items() if v is not None} for stage in fields["stages"]]
    return Load(
        **fields,
        warmup_s=stop.warmup_s,
        duration_s=stop.duration_s,
        max_requests=stop.max_requests,
    )


def _with_matched_ttft(server: Server | None, records: Sequence[RequestRecord]) -> Server | None:
    """The server's figures with the client's TTFT over the requests its histogram counted."""
    if server is None:
        return None
    first_chunks = [(r.chunk_times_s[0], r.ttft_s) for r in records if r.ttft_s is not None]
    return server.with_matched_ttft(matched_client_ttft(first_chunks, server))


def unfinished_point(start: PointStart, records: Iterable[RequestRecord], stop: StopConfig) -> PointEnd:
    """The span of a point the run never finished (killed): it ran at least until the last of
    its records ended; its load ended there or at its deadline, whichever came first."""
    end_s = max(
        (t for r in records for t in (r.closed_s, r.end_s, r.sent_s, r.scheduled_s) if t is not None),
        default=start.start_s,
    )
    end_s = max(end_s, start.start_s)
    deadline = start.start_s + stop.duration_s if stop.duration_s is not None else end_s
    return PointEnd.unfinished(start, load_end_s=min(end_s, deadline), end_s=end_s)


def recompute_run(run_dir: Path) -> RunResults:
    """Derive results.json from the run's files and write it (the previous one is kept as
    results.previous.json). Returns the results."""
    run_dir = Path(run_dir)
    manifest = _run_manifest(run_dir)
    samples = SamplesFile(run_dir / SAMPLES)
    records_path = run_dir / RECORDS
    by_point = {index: RecordSlice(records_path, ranges) for index, ranges in point_ranges(records_path).items()}
    spans = _Spans.of(run_dir, samples, manifest)
    clock = spans.manifest.clock
    server = SpanIndex.read(run_dir / SPANS, clock.origin_unix_s) if clock is not None else None
    results = results_header(spans.manifest, "recompute")
    for index in sorted(spans.indices() | set(by_point)):
        point_records = by_point.get(index, RecordSlice(records_path, []))
        event = spans.event(index, point_records)
        results = results.with_point(point_result(spans.manifest, event, point_records, samples, spans=server))
    planned = len(manifest.config.loads)
    results = results.finished(len(spans.ended) < planned or any(p.interrupted for p in results.points))
    previous = run_dir / RESULTS
    if previous.exists():
        shutil.copyfile(previous, run_dir / "results.previous.json")
    write_json(run_dir / RESULTS, results.to_json())
    return results


def _run_manifest(run_dir: Path) -> RunManifest:
    """config.json of a run that has its records; a RecomputeError names what is missing."""
    for name in (CONFIG, RECORDS):
        if not (run_dir / name).is_file():
            raise RecomputeError(
                f"{run_dir}: no {name}; recompute needs config.json, records.jsonl "
                f"and samples.jsonl from a tokenbench run"
            )
    try:
        return load_manifest(run_dir / CONFIG)
    except ManifestError as exc:
        raise RecomputeError(str(exc)) from None


class _Spans:
    """Where each point's span comes from: its ``point`` event; for a point the run never finished,
    its ``point_start`` event and its records; for a run from before 0.2.0, its old results.json
    (whose clock and telemetry then complete the manifest)."""

    def __init__(
        self, run_dir: Path, manifest: RunManifest, ended: dict[int, PointEnd], started: dict[int, PointStart]
    ):
        self.run_dir, self.manifest, self.ended, self.started = run_dir, manifest, ended, started
        self.earlier: dict[int, PointEnd] = {}

    @classmethod
    def of(cls, run_dir: Path, samples: SamplesFile, manifest: RunManifest) -> _Spans:
        ended = {e.index: e for e in samples.point_ends()}
        started = {e.index: e for e in samples.point_starts()}
        spans = cls(run_dir, manifest, ended, started)
        if not started and (run_dir / RESULTS).is_file():  # a run from before 0.2.0: its facts
            try:
                earlier = earlier_spans(run_dir / RESULTS, manifest.config.stop.warmup_s)
            except ManifestError as exc:
                raise RecomputeError(str(exc)) from None
            spans.earlier = earlier.spans
            spans.manifest = _completed(manifest, earlier)
        return spans

    def indices(self) -> set[int]:
        return set(self.ended) | set(self.started) | set(self.earlier)

    def event(self, index: int, records: Iterable[RequestRecord]) -> PointEnd:
        if index in self.ended:
            return self.ended[index]
        if index in self.started:
            return unfinished_point(self.started[index], records, self.manifest.config.stop)
        if index in self.earlier:
            return self.earlier[index]
        raise RecomputeError(
            f"{self.run_dir}: records of point {index} but no span for it in samples.jsonl "
            f"(nor in an earlier results.json)"
        )


def _completed(manifest: RunManifest, earlier: EarlierRun) -> RunManifest:
    """A manifest from before 0.2.0 with the clock and telemetry its results.json had."""
    return manifest.model_copy(
        update={"clock": manifest.clock or earlier.clock, "telemetry": manifest.telemetry or earlier.telemetry}
    )
