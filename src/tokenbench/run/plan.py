"""`tokenbench run --dry-run`'s plan of the load: each point's schedule and stop from the settings,
the dataset's lengths as built, a replay's rows read from the trace as its schedule would send
them (loadgen's own schedule, no prompt built). run.dry_run resolves the target and builds the
dataset as a run does, then asks this module what the load would be; nothing here sends."""

from __future__ import annotations

from tokenbench.config import (
    DEFAULT_PRECISION,
    LoadPoint,
    RateLoad,
    ReplayLoad,
    RunConfig,
    StagedLoad,
    StopConfig,
    UsersLoad,
)
from tokenbench.console.plan import Lengths, PointPlan
from tokenbench.loadgen.programs import ProgramSource
from tokenbench.loadgen.schedule import describe
from tokenbench.loadgen.sessions import SessionSource
from tokenbench.loadgen.source import RequestSource, TraceSource
from tokenbench.results.layout import CONFIG, RECORDS, RESULTS, SAMPLES, SPANS

Source = RequestSource | SessionSource | TraceSource | ProgramSource


def point_plans(config: RunConfig, source: Source) -> tuple[PointPlan, ...]:
    """Each of the run's load points (before --trials repeats them) as it would run."""
    return tuple(_point(config, load, index, source) for index, load in enumerate(config.loads))


def _point(config: RunConfig, load: LoadPoint, index: int, source: Source) -> PointPlan:
    stop = config.stop
    if isinstance(load, ReplayLoad) and isinstance(source, TraceSource):
        return _replay(config, load, index, source)
    duration = stop.duration_s
    requests = stop.max_requests
    if isinstance(load, RateLoad) and not stop.duration_auto:  # at the arrivals' mean pace (Poisson varies)
        paced_s = requests / load.rate_per_s if requests is not None else None
        duration = min(d for d in (duration, paced_s) if d is not None) if duration or paced_s else None
        if duration is not None:
            requests = min(r for r in (requests, round(load.rate_per_s * duration)) if r is not None)
    if isinstance(load, StagedLoad):
        duration = load.duration_s
    if stop.duration_auto:
        duration = None
    return PointPlan(describe(load), _schedule(load), _stop(stop), duration, requests)


def _schedule(load: LoadPoint) -> str:
    if isinstance(load, UsersLoad):
        think = f", {load.think_time_s:g}s think time" if load.think_time_s else ""
        return (
            f"closed loop: {load.users} users spawned evenly over {load.ramp_up_s:g}s, each sending its next "
            f"request when its last one ends{think}"
        )
    cap = f", at most {load.max_concurrency} in flight" if getattr(load, "max_concurrency", None) else ""
    if isinstance(load, RateLoad):
        shape = f" (gamma shape {load.burstiness:g})" if load.arrival == "gamma" else ""
        return f"open loop: {load.rate_per_s:g} req/s, {load.arrival} arrivals{shape}{cap}"
    if isinstance(load, StagedLoad):
        unit = "req/s" if load.open_loop else "users"
        stages = "; ".join(
            f"{s.level:g} {unit} for {s.duration_s:g}s" + (f" (ramp {s.ramp_s:g}s)" if s.ramp_s else "")
            for s in load.stages
        )
        start = f"from {load.start_level:g} {unit}: " if load.start_level else ""
        return f"staged: {start}{stages}{cap}"
    assert isinstance(load, ReplayLoad)
    start = "start" if load.start_s is None else f"{load.start_s:g}s"
    end = "end" if load.end_s is None else f"{load.end_s:g}s"
    jitter = f", jitter {load.jitter_s:g}s" if load.jitter_s else ""
    return f"trace replay: rows in [{start}, {end}) of trace time at x{load.speed:g}{jitter}{cap}"


def _stop(stop: StopConfig) -> str:
    parts = []
    if stop.duration_auto:
        parts.append(
            f"auto: once the headline figures are within ±{stop.precision or DEFAULT_PRECISION:g} "
            f"(at most {stop.duration_s:g}s)"
        )
    elif stop.duration_s is not None:
        parts.append(f"after {stop.duration_s:g}s of load")
    if stop.max_requests is not None:
        parts.append(f"after {stop.max_requests} requests")
    if stop.schedule_ends and not parts:
        parts.append("the trace's last row in the window")
    warmup = "auto (from where steady state began)" if stop.warmup_auto else f"{stop.warmup_s:g}s"
    return f"{' or '.join(parts)}; warm-up {warmup}; in-flight requests get {stop.drain_timeout_s:g}s to finish"


def _replay(config: RunConfig, load: ReplayLoad, index: int, source: TraceSource) -> PointPlan:
    """The trace's rows this point would send, at the offsets its schedule gives them."""
    tally = source.trace.new_tally()
    sends = [send for _, send in source.schedule(load, config.seed + index, config.stop, tally)]
    last = max((s.offset_s for s in sends), default=0.0)
    return PointPlan(
        describe(load),
        _schedule(load),
        _stop(config.stop),
        last,
        len(sends),
        Lengths.of([s.row.input_tokens for s in sends]),
        Lengths.of([max(1, s.row.output_tokens) for s in sends]),
    )


def dataset_lengths(source: Source) -> tuple[Lengths | None, Lengths | None]:
    """The prompts' and replies' lengths (max_tokens) over the dataset as built; a trace's are
    per point, a program's per call as it runs (None)."""
    if isinstance(source, RequestSource):
        prompts = [r.expected_prompt_tokens for r in source.requests if r.expected_prompt_tokens is not None]
        outputs = [r.max_tokens for r in source.requests if r.max_tokens is not None]
        return Lengths.of(prompts), Lengths.of(outputs)
    if isinstance(source, SessionSource):
        turns = [t for c in source.items for t in c.turns]
        return Lengths.of([t.tokens for t in turns]), Lengths.of([t.max_tokens for t in turns])
    return None, None


def run_files(config: RunConfig) -> tuple[str, ...]:
    """The files a run writes in its directory (a launched server's log too: not with --url)."""
    files = [CONFIG, RECORDS, SAMPLES, RESULTS]
    if config.server_traces:
        files.append(SPANS)
    return tuple(files)
