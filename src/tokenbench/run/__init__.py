"""`tokenbench run`, top to bottom: target -> dataset -> load points -> records -> metrics -> files.

Each load point runs with everything else equal; results.json is rewritten after every point and
records are flushed as they finish, so an interrupted run keeps everything it measured. Records
are not kept in memory: when a point ends its records are read back from records.jsonl and its
span (logged in samples.jsonl) and the config.json written at the start give its results through
derive.point_result, the path `tokenbench recompute` takes, so memory stays flat over a long run.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from rich.console import Console

from tokenbench.backends import EMBEDDED, get_profile
from tokenbench.backends.base import Profile
from tokenbench.backends.cache_control import NOT_REQUESTED, CacheReset, reset_prefix_cache
from tokenbench.backends.server import ServerUnderTest, engine_profile, server_under_test
from tokenbench.clients import wire_for
from tokenbench.clients.served_model import served_model
from tokenbench.clients.stream import ModelListing, TargetUnreachable, make_session, probe, served_max_model_len
from tokenbench.clients.structured import structured_dialect
from tokenbench.common import redact
from tokenbench.common.procs import Interrupts
from tokenbench.config import (
    CONVERSATION_APIS,
    SYNTHETIC_OUTPUT_TOKENS,
    BackendConfig,
    DatasetConfig,
    LoadPoint,
    PrefixCacheMode,
    RunConfig,
    StagedLoad,
    TargetConfig,
    UsersLoad,
)
from tokenbench.config.mix import mixed_conversations, mixed_requests
from tokenbench.config.target import ResolvedTarget
from tokenbench.console.live import LiveView
from tokenbench.console.plan import RunPlan
from tokenbench.console.tables import stages_table, summary_table, trials_table, workload_text
from tokenbench.console.terminal import console as wide_console
from tokenbench.datasets import build_requests, check_path, trace_info, trace_plan
from tokenbench.datasets.images import check_api as check_image_api
from tokenbench.datasets.pooling import pooling_requests
from tokenbench.datasets.programs import program_info, read_programs
from tokenbench.datasets.sessions import build_conversations, estimate_tokens
from tokenbench.datasets.tokenizers import Tokenizer
from tokenbench.datasets.trace_requests import CHAT_TEMPLATE_TOKENS, ContextGuard, trace_line
from tokenbench.errors import BadInput
from tokenbench.loadgen import PointRun
from tokenbench.loadgen.programs import ProgramSource, program_source
from tokenbench.loadgen.schedule import describe, replay_window
from tokenbench.loadgen.sessions import SessionSource
from tokenbench.loadgen.source import RequestSource, TraceSource
from tokenbench.loadgen.stats import LiveStats
from tokenbench.records import Request, RunClock
from tokenbench.report.sections.failures import failed_points, failure_lines
from tokenbench.results import DatasetFacts, PointResult, RunResults
from tokenbench.results.layout import SAMPLES, SERVER_LOG
from tokenbench.results.manifest import ServerFacts
from tokenbench.results.served_model import ServedModel
from tokenbench.run.facts import config_json, point_facts, start_facts
from tokenbench.run.plan import dataset_lengths, point_plans, run_files
from tokenbench.rundir import RunWriter, default_run_dir, fresh_out_dir, remove_failed_start
from tokenbench.rundir.derive import point_result, results_header
from tokenbench.spans.launch import point_spans, traced_launch
from tokenbench.spans.receiver import SpanReceiver
from tokenbench.telemetry.sampler import Sampler
from tokenbench.workers.core import choose_tokenizer
from tokenbench.workers.pool import AllWorkersLost, WorkerPool
from tokenbench.workers.wiring import worker_pool, workers_facts

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None  # type: ignore[assignment]  # optional: asyncio's own loop then


@dataclass
class RunResult:
    run_dir: Path
    results: dict[str, Any]  # results.json as written (RunResults.to_json)
    interrupted: bool
    # the labels of the points the server failed (results.failures' rule): the run exits non-zero
    failed: tuple[str, ...] = ()


OPENAI_APIS = ("chat", "completions")  # the APIs that give usage on every chunk where the engine does
# the APIs whose /v1/models lists what requests may name
LISTED_MODEL_APIS = (*OPENAI_APIS, "messages", "responses")

# The next load point given the results so far (None: the run is done). A fixed list of points
# is one plan; a capacity search (capacity.plan) chooses each point from the previous ones.
Plan = Callable[[RunResults], LoadPoint | None]


def fixed_plan(loads: list[LoadPoint]) -> Plan:
    """``loads`` one after another (``config.loads``: the run's own list), ending after a point the
    circuit breaker stopped (the server failed everything: its next points would only flood it).
    A capacity search's plan reads such a point as a failed probe instead (capacity.plan)."""

    def plan(results: RunResults) -> LoadPoint | None:
        done = results.points
        if len(done) >= len(loads) or (done and done[-1].stopped_early is not None):
            return None
        return loads[len(done)]

    return plan


def repeated(loads: list[LoadPoint], trials: int) -> list[LoadPoint]:
    """Each load ``trials`` times in a row (--trials): 4, 8 users x 3 -> 4, 4, 4, 8, 8, 8. Each
    repeat is a point of its own (its own seeds for arrivals: seed + index)."""
    return [load for load in loads for _ in range(trials)]


def run(
    config: RunConfig,
    console: Console | None = None,
    server: ServerUnderTest | None = None,
    plan: Plan | None = None,
) -> RunResult:
    """Benchmark ``config``'s target: ``server``, a server the caller holds (experiments launch
    one per server configuration and run several cells against it), else --url or the backend
    launched for the run's duration. The points are ``plan``'s (default: ``config.loads``)."""
    console = console or wide_console(stderr=True)
    Interrupts.ensure()
    redact.register(*redact.secrets_of(headers=config.target.headers), config.target.api_key())
    check_path(config.dataset)  # before anything is made: a dataset file that is not there
    # before anything starts: a bad --out fails here, with no request sent
    out = Path(config.out_dir or default_run_dir())
    # a start that fails removes what it wrote there (no mess: --out may be given again)
    fresh, made = fresh_out_dir(out), not out.exists()
    writer = RunWriter(out, keep_text=config.keep_text)
    clock = RunClock.start()
    measured = False
    # server spans: the receiver of the server's spans, before the server starts (it is told where)
    receiver = (
        SpanReceiver(writer.dir, clock.now, config.server_traces_port, grpc_port=config.server_traces_grpc_port)
        if config.server_traces
        else None
    )
    try:
        launch = _launch(config) if server is None else None  # a server the caller holds is never launched here
        if receiver is not None:
            endpoint = receiver.start()
            if server is None:  # a server the caller holds was pointed at the port by the caller (experiments)
                attached = config.target.url is not None
                launch = traced_launch(launch, endpoint, attached, console.print, receiver.grpc_endpoint)
        held = (
            contextlib.nullcontext(server)
            if server is not None
            else server_under_test(launch, config.target.url, writer.dir / SERVER_LOG, console.print)
        )
        with held as sut:
            with _sampler(config, sut, writer.dir, clock) as sampler:
                runner = uvloop.run if uvloop is not None else asyncio.run
                bench = _Bench(
                    config, writer, clock, sampler, plan or fixed_plan(repeated(config.loads, config.trials)), receiver
                )
                result = runner(_run_points(bench, sut, console))
                measured = True
                return result
    finally:
        if receiver is not None:
            receiver.stop()
        measured = measured or writer.has_records()
        writer.close()
        if fresh and not measured:
            remove_failed_start(out, made)


def dry_run(config: RunConfig) -> RunPlan:
    """What ``run`` would do, resolved as it resolves it before its first request: the server
    reached and its model checked (``resolve_target``), the dataset read and built, each point's
    schedule; then it stops, with no request of the load sent and no run directory made. An
    attached server only (--url): a dry run launches nothing."""
    if config.target.url is None:
        raise BadInput("--dry-run checks a running server and launches none: add --url (the server to plan for)")
    check_path(config.dataset)
    with server_under_test(config.backend, config.target.url, Path(SERVER_LOG)) as sut:  # attached: no log
        runner = uvloop.run if uvloop is not None else asyncio.run
        return runner(_planned(config, sut))


async def _planned(config: RunConfig, sut: ServerUnderTest) -> RunPlan:
    clock = RunClock.start()
    async with make_session(config.target, clock.now) as session:
        target, listing = await resolve_target(session, config.target, sut)
        wire = wire_for(target.api)
        checks = [f"GET {sut.url}{wire.probe_path}: answered"]
        named = "--model, listed by the server" if config.target.model else "the first the server lists"
        checks.append(f"model: {target.model} ({named})")
        if config.sessions is not None or config.dataset.name == "trace":
            max_len = served_max_model_len(listing, target.model)
            checks.append(f"context: {max_len} tokens (/v1/models)" if max_len else "context: not stated by the server")
        else:
            max_len = None
        source, info = _built(config, _Target(session, target, sut.profile), max_len)
    checks.append(f"prompt lengths: {info.tokenizer or 'estimated (no tokenizer, no /tokenize)'}")
    checks.append(f"metrics: {sut.metrics_url or 'none scraped (no --backend profile or --metrics-url)'}")
    prompts, outputs = dataset_lengths(source)
    return RunPlan(
        target=f"{target.url}, model {target.model}, --api {target.api}",
        checks=tuple(checks),
        dataset=(
            f"{info.name} ({info.trace.format}, {info.source}): the rows each point sends, below"
            if info.trace
            else f"{info.name}: {info.num_requests} prompts built"
        ),
        prompt_tokens=prompts,
        output_tokens=outputs,
        points=point_plans(config, source),
        trials=config.trials,
        out_dir=str(config.out_dir) if config.out_dir else f"{default_run_dir().parent}/<the time it starts>",
        files=run_files(config),
    )


def _launch(config: RunConfig) -> BackendConfig | None:
    """The backend to launch (None with --url): --backend, or with neither the embedded llama.cpp
    server with the default GGUF (--model a .gguf), with the profile's own defaults."""
    if config.target.url is not None:
        return config.backend
    backend = config.backend or BackendConfig(name=EMBEDDED)
    backend = backend.model_copy(update={"model": backend.model or config.target.model})
    backend = pooling_launch(backend, config.target)
    # a serving layer's knobs are its upstream engine's: the engine's own launch defaults apply
    profile = engine_profile(get_profile(backend.name or EMBEDDED), backend)
    backend = profile.prepare(backend, _max_users(config)) if profile.prepare else backend
    return resettable(profile, backend, config.prefix_cache)


def pooling_launch(backend: BackendConfig, target: TargetConfig) -> BackendConfig:
    """An embedding server for a pooling API, unless --no-embedding said."""
    if not target.pooling or backend.knobs.embedding is not None:
        return backend
    return backend.model_copy(update={"knobs": backend.knobs.model_copy(update={"embedding": True})})


def resettable(profile: Profile, backend: BackendConfig, mode: PrefixCacheMode) -> BackendConfig:
    """With --prefix-cache reset, the launch the engine's reset needs to be complete."""
    return profile.reset_launch(backend) if mode == "reset" and profile.reset_launch else backend


def _decided(settings: TargetConfig, profile: Profile | None) -> dict[str, Any]:
    """What the engine decides of the settings: the API (the profile's first by default), usage
    on every chunk where the engine gives it (Profile.continuous_usage) unless --continuous-usage
    said, the fields --response-format goes in, and those asking for its report of each reply."""
    api = settings.api or (profile.default_api if profile else "chat")
    if settings.api is not None and profile is not None and api not in profile.apis:
        raise BadInput(f"--api {api}: {profile.title} serves {', '.join(profile.apis)}")
    eos = profile.ignore_eos_apis if profile else None
    if settings.ignore_eos and profile is not None and eos is not None and api not in eos:
        raise BadInput(
            f"--ignore-eos: {profile.title}'s --api {api} route drops it (its replies end at EOS, so their "
            f"lengths are not the dataset's); use --api {' or '.join(eos)}, or drop --ignore-eos"
        )
    usage = settings.continuous_usage
    if usage is None:
        usage = bool(profile and profile.continuous_usage and settings.api in (None, *OPENAI_APIS))
    dialect = structured_dialect(settings, api, profile.structured if profile else None)
    report = dict(profile.report_fields) if profile else {}
    return {"api": api, "continuous_usage": usage, "structured_dialect": dialect, "report_fields": report}


def _sampler(config: RunConfig, sut: ServerUnderTest, run_dir: Path, clock: RunClock) -> Sampler:
    """Scrapes the server's /metrics (when its profile or --metrics-url says where), a fleet's
    replicas' beside, and the GPU, and polls its scaler (--scaler-url, or what the launch answers
    at: ServerUnderTest.scaler)."""
    replicas = [(r.name, r.metrics_url) for r in sut.replicas if r.metrics_url]
    engine = next((r.backend for r in sut.replicas if r.backend), None)
    return Sampler(
        run_dir / SAMPLES,
        clock.origin_monotonic_s,
        sut.metrics_url,
        sut.profile.name if sut.profile else None,
        (config.backend or BackendConfig()).metrics_interval_s,
        sut.profile.metrics if sut.profile else None,
        replicas,
        get_profile(engine).metrics if engine else None,
        scaler=sut.scaler,
        server_pids=sut.pids,
    )


def _concurrency_hint(load: LoadPoint) -> int:
    """Connections to open before a point: its users, or its concurrency cap (open loop)."""
    if isinstance(load, UsersLoad | StagedLoad) and load.users is not None:
        return min(load.users or 1, 1024)
    return min(getattr(load, "max_concurrency", None) or 1, 1024)


def _max_users(config: RunConfig) -> int:
    users = [getattr(p, "users", 0) or getattr(p, "max_concurrency", 0) or 0 for p in config.loads]
    return min(max(users + [4]), 64)


@dataclass(frozen=True)
class _Bench:
    """What the whole run shares: its settings, its directory, its clock and its sampler."""

    config: RunConfig
    writer: RunWriter
    clock: RunClock
    sampler: Sampler
    plan: Plan
    receiver: SpanReceiver | None = None  # --server-traces


async def _run_points(bench: _Bench, sut: ServerUnderTest, console: Console) -> RunResult:
    """The load points one after another against the target, through the run's pool of workers
    (one on this loop unless --workers or --ray); results.json rewritten after each."""
    async with make_session(bench.config.target, bench.clock.now) as session:
        target, listing = await resolve_target(session, bench.config.target, sut)
        wire = wire_for(target.api)
        # a session's history limit, a trace's context guard: when the server states its context
        wants_len = bench.config.sessions is not None or bench.config.dataset.name == "trace"
        max_len = served_max_model_len(listing, target.model) if wants_len else None
        # which model it serves (and its fingerprint's probes), before any load: in no point
        served = await served_model(session, target, wire, listing, bench.config.fingerprint)
        reached = _Target(session, target, sut.profile, served)
        source = _source(bench, reached, sut.facts, max_len)
        stats = LiveStats()
        io = (bench.writer.write_records, bench.sampler.event, console.print)
        async with worker_pool(bench.config, target, source, bench.clock, bench.writer.dir, io, stats) as pool:
            driver = _Driver(bench, reached, stats, pool)
            _note_workers(bench, pool)  # how the load runs, and the workers' clock offsets
            results = await _points(bench, driver, console)
        _note_workers(bench, pool)  # the offsets checked at the end, into results' header too
        if isinstance(source, TraceSource):  # what the replay sent, and the file's digest
            _note_trace(bench, source, results.points, console)
        results = results_header(bench.writer.manifest(), "run", results.points)
    results = results.finished(driver.interrupted)
    bench.writer.write_results(results)
    console.print(summary_table(results, _workload(bench.config)))
    if (trials := trials_table(results)) is not None:
        console.print(trials)
    if (stages := stages_table(results)) is not None:  # a staged point, stage by stage
        console.print(stages)
    for line in failure_lines(results.points):  # what the server said, never markup
        console.print(line, markup=False, highlight=False, style="red" if line.startswith("FAILED") else None)
    if not pool.alive():
        raise AllWorkersLost("every worker was lost: " + "; ".join(f"{h.describe}: {h.lost}" for h in pool.handles))
    failed = tuple(f.label for f in failed_points(results.points))
    return RunResult(bench.writer.dir, results.to_json(), driver.interrupted, failed)


def _workload(config: RunConfig) -> str:
    """The console summary's workload: the dataset and the lengths asked for (synthetic: its
    input and output tokens; another dataset: its own lengths unless --output-tokens)."""
    d = config.dataset
    synthetic = d.name == "synthetic"
    output = d.output_tokens if d.output_tokens is not None or not synthetic else SYNTHETIC_OUTPUT_TOKENS
    text = workload_text(d.name, d.input_tokens if synthetic else None, output)
    if config.target.pooling:  # pooling APIs: inputs, no output
        inputs = d.input_tokens if synthetic else "the dataset's"
        text = f"{d.name}: {config.target.batch_size or 1} inputs of {inputs} tokens a request ({config.target.api})"
    return text


def _note_workers(bench: _Bench, pool: WorkerPool) -> None:
    """config.json's ``workers_facts`` (how the load ran, each worker's clock) for a scale-out
    (--workers, --ray); a run from its own process has none, as before there were workers."""
    if bench.config.workers.distributed:
        bench.writer.write_config(bench.writer.manifest().with_workers(workers_facts(bench.config, pool)))


async def _points(bench: _Bench, driver: _Driver, console: Console) -> RunResults:
    """The plan's points one after another; results.json rewritten after each."""
    results = results_header(bench.writer.manifest(), "run")
    await bench.sampler.wait_past(bench.clock.now())  # a baseline scrape before the first point
    loop = asyncio.get_running_loop()
    with (
        Interrupts.during(lambda: _soon(loop, driver.interrupt)),
        LiveView(driver.stats, bench.clock.now, console, enabled=bench.config.live),
    ):
        while (load := bench.plan(results)) is not None:
            results = results.with_point(await driver.run_point(len(results.points), load))
            bench.writer.write_results(results)
            if results.points[-1].interrupted or not driver.pool.alive():
                break
    return results


def _soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    """``callback`` on the run's loop, from a signal handler."""
    loop.call_soon_threadsafe(callback)


@dataclass(frozen=True)
class _Target:
    """The target as the run reaches it: its session, the resolved target, and its engine's
    controls (prefix-cache reset, token-id prompts; None: a server tokenbench knows nothing of)."""

    session: aiohttp.ClientSession
    config: ResolvedTarget
    profile: Profile | None = None
    served: ServedModel | None = None  # which model it serves, as far as it tells


@dataclass(frozen=True)
class _Driver:
    """Runs one load point after another over the run's pool of workers."""

    bench: _Bench
    target: _Target
    stats: LiveStats
    pool: WorkerPool

    def interrupt(self) -> None:
        self.pool.interrupt()

    @property
    def interrupted(self) -> bool:
        return self.pool.interrupted

    async def run_point(self, index: int, load: LoadPoint) -> PointResult:
        """One point: its records go to disk as they end, then are read back for its results."""
        config, writer, sampler = self.bench.config, self.bench.writer, self.bench.sampler
        self.stats.label = describe(load)
        first = writer.records_offset()
        reset = await self._prefix_cache(config.prefix_cache, fresh=index == 0 and self.target.config.fresh)

        # the reset in both events: a point the run never finished is derived from its start
        def started(run: PointRun) -> None:
            sampler.event(start_facts(run, reset))

        seeds, hint = (config.seed, config.seed + index), _concurrency_hint(load)
        stop = config.stop.model_copy(update={"window_s": config.window_s})  # autostop: the steady rule's windows
        point_run, samples, losses = await self.pool.run_point(index, load, stop, seeds, hint, started)
        facts = point_facts(point_run, reset, losses)
        sampler.event(facts)
        if not point_run.interrupted:
            await sampler.wait_past(point_run.end_s)  # bracket the point's counters
        records = writer.records_since(first)  # streamed from disk, never all in memory
        receiver, clock = self.bench.receiver, self.bench.clock
        spans = None
        if receiver is not None:  # server spans: the point's spans, once in
            spans = await point_spans(receiver, point_run.end_s, clock.now, clock.origin_unix_s)
        # the monitor's samples as emitted: the sampler may not have copied the last one to disk yet
        return point_result(writer.manifest(), facts, records, sampler.file, samples, spans=spans)

    async def _prefix_cache(self, mode: PrefixCacheMode, fresh: bool) -> CacheReset:
        """--prefix-cache reset: empty the server's cache through its engine's own control, after
        the previous point drained and before this one's connections are opened. A server started
        for this run has nothing cached before its first point, control or not."""
        if mode != "reset":
            return NOT_REQUESTED
        hook = self.target.profile.reset_prefix_cache if self.target.profile else None
        if hook is None and fresh:
            return CacheReset("done", "a freshly started server: nothing cached yet")
        return await reset_prefix_cache(hook, self.target.session, self.target.config.url)


Source = RequestSource | SessionSource | TraceSource | ProgramSource


def _source(bench: _Bench, target: _Target, backend: ServerFacts, served_max_len: int | None = None) -> Source:
    """The dataset built and config.json written; a trace's digest started on the side."""
    source, info = _built(bench.config, target, served_max_len)
    if isinstance(source, TraceSource):
        source.digest = source.trace.digest().start()
    bench.writer.write_config(
        config_json(bench.config, target.config, backend, info, bench.clock, bench.sampler, target.served)
    )
    return source


def _built(config: RunConfig, target: _Target, served_max_len: int | None = None) -> tuple[Source, DatasetFacts]:
    """The dataset built (the requests, or the conversations, every worker draws from; a trace:
    opened, its rows built by each worker as its replay goes) and what config.json says of it."""
    tokenizer = choose_tokenizer(config.dataset.tokenizer, target.config)
    knobs = config.backend.knobs if config.backend is not None else None
    max_len = (knobs.max_model_len if knobs is not None else None) or served_max_len
    source: RequestSource | SessionSource | TraceSource | ProgramSource
    if config.dataset.name == "trace":
        source = _trace_source(config, target, tokenizer, config.dataset.context_tokens or max_len)
        name = tokenizer.name if tokenizer is not None else None
        info = trace_info(config.dataset, source.trace, source.trace.facts(None), name)
    elif config.dataset.name == "programs":
        programs = read_programs(config.dataset.path, config.dataset.program_format)  # type: ignore[arg-type]
        counter = tokenizer.count if tokenizer is not None else estimate_tokens
        source = program_source(programs, config.dataset, tokenizer, counter, secrets.token_hex(4))
        info = program_info(config.dataset, programs, tokenizer.name if tokenizer is not None else None)
    elif config.sessions is not None:
        conversations, info = build_conversations(config.dataset, config.sessions, tokenizer, config.seed)
        if config.mix is not None or config.lora_mix:  # routing: each conversation's group
            conversations = mixed_conversations(
                conversations, config.mix, config.lora_mix, config.tenant_header, config.seed
            )
        counter = tokenizer.count if tokenizer is not None else estimate_tokens
        source = SessionSource(conversations, counter, config.sessions, max_len, id_prefix=secrets.token_hex(4))
        check_image_api([], target.config.api, config.dataset.images)  # images
    else:
        requests, info = build_requests(config.dataset, tokenizer, config.seed)
        if target.config.pooling:  # pooling APIs: --batch-size inputs a request
            requests = pooling_requests(requests, target.config.api, target.config.batch_size or 1)
        check_image_api(requests, target.config.api)  # images
        if config.mix is not None or config.lora_mix:  # routing: each request's group

            def build(overrides: dict[str, Any]) -> list[Request]:
                dataset = DatasetConfig.model_validate({**config.dataset.model_dump(), **overrides})
                return build_requests(dataset, tokenizer, config.seed)[0]

            requests = mixed_requests(requests, config.mix, config.lora_mix, config.tenant_header, config.seed, build)
        nonce = secrets.token_hex(4) if config.dataset.unique_prefix else None
        source = RequestSource(requests, unique_nonce=nonce)
    return source, info


def _trace_source(config: RunConfig, target: _Target, tokenizer: Tokenizer | None, max_len: int | None) -> TraceSource:
    """The trace opened here (its format, clock and first row in the window checked before any
    load); the same plan goes to every worker."""
    template = CHAT_TEMPLATE_TOKENS if target.config.api in CONVERSATION_APIS else 0
    guard = ContextGuard(max_len, config.dataset.over_context, template)
    window = replay_window(config.loads)
    batch = (target.config.batch_size or 1) if target.config.pooling else None
    plan = trace_plan(config.dataset, config.seed, window, _token_ids(target), guard, target.config.api, batch)
    try:
        source = TraceSource(plan, tokenizer)
        first = next(source.trace.reader.rows(), None)
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"--dataset-path {config.dataset.path}: {exc}") from exc
    if first is None:
        start, end = window
        raise BadInput(
            f"{config.dataset.path}: no trace rows in the replay window [{start or 'start'}, {end or 'end'}) s "
            f"of trace time (its clock: {_clock_text(source)})"
        )
    return source


def _note_trace(bench: _Bench, source: TraceSource, points: list[PointResult], console: Console) -> None:
    """config.json's ``dataset_info.trace`` once the replay ran: the file's digest and rows (the
    side pass, waited for now), and what the longest point sent (rows, left out, expected
    reuse); the console says what was left out."""
    digest = source.digest.result() if source.digest is not None else None
    sent = [p.trace for p in points if p.trace is not None]
    longest = max(sent, key=lambda t: t.num_rows_sent, default=None)
    facts = source.trace.facts(digest, longest)
    config = bench.config
    manifest = bench.writer.manifest()
    tokenizer = manifest.dataset_info.tokenizer if manifest.dataset_info is not None else None
    info = trace_info(config.dataset, source.trace, facts, tokenizer)
    bench.writer.write_config(manifest.model_copy(update={"dataset_info": info}))
    if (line := trace_line(facts)) is not None:
        console.print(line, markup=False, highlight=False)


def _clock_text(source: TraceSource) -> str:
    clock = source.trace.reader.clock
    if clock.kind == "first_row":
        return f"seconds from its first row, at {clock.origin}"
    return f"its own timestamps; the first row is at {clock.first_row_s:g} s"


def _token_ids(target: _Target) -> bool:
    """Prompts may go as token ids: the engine takes them (its profile says so) on completions."""
    return bool(target.profile and target.profile.token_id_prompts and target.config.api == "completions")


async def resolve_target(
    session: aiohttp.ClientSession, settings: TargetConfig, sut: ServerUnderTest
) -> tuple[ResolvedTarget, ModelListing]:
    """The target resolved once, before any load (with what the server listed): the server's URL, what its engine decides
    (``_decided``) and the model requests name: --model, else the name a launched server was given,
    else the first the server lists. A server the user runs (attached) that lists its models on an
    OpenAI-compatible API must list --model: otherwise BadInput before any load, naming what it
    serves (every request would fail). A server launched here serves the name its profile gave
    it, and other APIs name models their own way: unchecked."""
    decided = _decided(settings, sut.profile)
    wire = wire_for(decided["api"])
    listing = await probe(session, settings, sut.url, wire)  # raises TargetUnreachable before any load
    models = listing.ids
    model = settings.model or sut.model
    attached = sut.model is None
    if attached and model is not None and models and decided["api"] in LISTED_MODEL_APIS and model not in models:
        served = ", ".join(models[:10]) + (f" (and {len(models) - 10} more)" if len(models) > 10 else "")
        raise BadInput(
            f"--model {model}: {sut.url}{wire.probe_path} serves {served}; "
            "pass one of them as --model (or leave --model out to use the first)"
        )
    if model is None:
        if not models:
            raise TargetUnreachable(f"{sut.url}{wire.probe_path} names no model; pass --model NAME")
        model = models[0]
    backend = sut.profile.name if sut.profile else None
    resolved = ResolvedTarget.of(settings, url=sut.url, model=model, backend=backend, fresh=sut.fresh, **decided)
    return resolved, listing
