"""What a run writes of itself beside its records, made from the run's live objects: config.json
(``RunManifest``: the settings and every resolved fact results are derived from) and each point's
span (``PointStart`` and ``PointEnd``, the ``point_start`` and ``point`` events of samples.jsonl),
so ``tokenbench recompute`` derives results.json exactly as the run did."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tokenbench import __version__
from tokenbench.backends.cache_control import CacheReset
from tokenbench.config import RunConfig
from tokenbench.config.target import ResolvedTarget
from tokenbench.loadgen import PointRun
from tokenbench.records import RunClock
from tokenbench.results import Clock, DatasetFacts, ProgramCounts, SessionCounts, StoppedEarly, Telemetry, Tool
from tokenbench.results.client import WorkerLoss
from tokenbench.results.manifest import PointEnd, PointStart, PrefixCacheReset, RunManifest, ServerFacts, TargetFacts
from tokenbench.results.served_model import ServedModel
from tokenbench.telemetry.sampler import Sampler


def config_json(
    config: RunConfig,
    target: ResolvedTarget,
    backend: ServerFacts,
    info: DatasetFacts,
    clock: RunClock,
    sampler: Sampler,
    served: ServedModel | None = None,
) -> RunManifest:
    """config.json: the settings and every resolved fact results.json is derived from (with the
    records and samples): the target (and which model it serves), the server, the dataset, the clock, where telemetry went."""
    return RunManifest(
        config=config,
        resolved_target=TargetFacts.of(target, served),
        backend=backend,
        dataset_info=info,
        tool=Tool(name="tokenbench", version=__version__),
        clock=Clock(
            origin_monotonic_s=clock.origin_monotonic_s,
            origin_unix_s=clock.origin_unix_s,
            unit="seconds since origin, time.perf_counter()",
        ),
        telemetry=Telemetry(samples=sampler.out.name, metrics_url=sampler.metrics_url, interval_s=sampler.interval_s),
    )


def start_facts(run: PointRun, reset: CacheReset) -> PointStart:
    """A point's ``point_start`` event, with the prefix-cache reset done before it."""
    return PointStart(
        index=run.index,
        load=run.load,
        start_s=run.start_s,
        ramp_end_s=run.ramp_end_s,
        window_start_s=run.window_start_s,
        prefix_cache_reset=_reset(reset),
    )


def point_facts(run: PointRun, reset: CacheReset, lost: Sequence[WorkerLoss] = ()) -> PointEnd:
    """A finished point's span as written to samples.jsonl (the ``point`` event): with the
    point's records, all its results need (derive.point_result). ``lost``: the workers that died
    during it (none: no such key)."""
    span = {
        "load_end_s": run.load_end_s,
        "end_s": run.end_s,
        "user_spans": list(run.user_spans),
        "interrupted": run.interrupted,
        "num_records": run.num_records,
        "last_arrival_s": run.last_arrival_s,
    }
    # keys only a --multi-turn point, or one during which a worker died, has (only keys given are written)
    if run.sessions is not None:
        span["sessions"] = SessionCounts(**dataclasses.asdict(run.sessions))
    if run.programs is not None:  # agent programs: the point's sessions
        span["programs"] = ProgramCounts(**dataclasses.asdict(run.programs))
    if run.trace is not None:  # a replay: its use of the trace's rows
        span["trace"] = run.trace.facts()
    if lost:
        span["workers_lost"] = list(lost)
    if run.stopped_early is not None:
        span["stopped_early"] = StoppedEarly(**dataclasses.asdict(run.stopped_early))
    if run.stopping is not None:  # autostop: a point that judged itself (autostop.py)
        span["auto_stop"] = run.stopping
    started = {name: value for name, value in start_facts(run, reset) if name != "kind"}
    return PointEnd.model_validate({**started, **span})


def _reset(reset: CacheReset) -> PrefixCacheReset:
    return PrefixCacheReset(status=reset.status, detail=reset.detail)
