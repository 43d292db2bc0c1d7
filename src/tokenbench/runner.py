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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from . import __version__, redact
from .backends import get_profile
from .backends.base import Profile
from .backends.server import ManagedServer, metrics_url_for
from .clients import wire_for
from .clients.stream import StreamingClient, TargetUnreachable, make_session, probe, warm_connections
from .config import BackendConfig, RunConfig, TargetConfig
from .datasets import DatasetInfo, build_requests
from .datasets.tokenizers import HFTokenizer, RemoteTokenizer, Tokenizer
from .derive import point_result, results_header
from .load import describe
from .loadgen import LiveStats, LoadGenerator, PointRun, RequestSource
from .procs import Interrupts
from .records import RunClock
from .report.console import LiveView, summary_table
from .report.files import RunWriter, default_run_dir
from .telemetry.sampler import Sampler

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None


@dataclass
class RunResult:
    run_dir: Path
    results: dict
    interrupted: bool


def run(config: RunConfig, console: Console | None = None, server: dict | None = None) -> RunResult:
    """``server``: facts of a server the caller launched (experiments launch once per server
    configuration and run several cells against it); they go into results as the target's."""
    console = console or Console(stderr=True)
    Interrupts.ensure()
    redact.register(*redact.secrets_of(headers=config.target.headers), config.target.api_key())
    # before anything starts: a bad --out fails here, with no request sent
    writer = RunWriter(config.out_dir or default_run_dir(), keep_text=config.keep_text)
    clock = RunClock.start()
    try:
        with _target(config, writer.dir, console) as (target, backend, profile, metrics_url):
            backend = {**backend, **(server or {})}
            with _sampler(config, profile, metrics_url, writer.dir, clock) as sampler:
                runner = uvloop.run if uvloop is not None else asyncio.run
                return runner(_run_points(config, target, backend, writer, console, clock, sampler))
    finally:
        writer.close()


def _backend(config: RunConfig) -> BackendConfig | None:
    """The backend to launch: --backend, or with neither --url nor --backend the embedded
    llama.cpp server (xllamacpp) with the default GGUF and one slot per user."""
    if config.target.url is not None:
        return None
    backend = config.backend or BackendConfig(name="xllamacpp")
    if backend.name == "xllamacpp":  # the default path: --model is a GGUF, one slot per user
        knobs = backend.knobs
        if knobs.max_num_seqs is None:
            knobs = knobs.model_copy(update={"max_num_seqs": _max_users(config)})
        backend = backend.model_copy(update={"knobs": knobs, "model": backend.model or config.target.model})
    return backend


@contextlib.contextmanager
def _target(
    config: RunConfig, run_dir: Path, console: Console
) -> Iterator[tuple[TargetConfig, dict, Profile | None, str | None]]:
    """Attach to --url, or launch the backend for the run's duration and stop it after. Also
    says where its metrics are when that is not the server URL + the profile's path."""
    launch = _backend(config)
    if launch is None:
        named = config.backend.name if config.backend else None
        profile = get_profile(named) if named else None
        target = _with_api(config.target, profile)
        facts = {"backend": named or "attached", "engine": profile.title if profile else None}
        yield target, facts, profile, metrics_url_for(profile, target.url)
        return
    assert launch.name is not None
    profile = get_profile(launch.name)
    server = ManagedServer(profile, launch, run_dir / "server.log")
    console.print(f"starting {profile.title}: {' '.join(redact.mask_argv(server.launch.argv))}")
    with server:
        console.print(
            f"{profile.title} ready at {server.url} after {server.cold_start_s:.1f}s "
            f"(version {server.version or 'unknown'})"
        )
        target = config.target.model_copy(update={"url": server.url, "model": server.spec.served_name})
        yield _with_api(target, profile), server.describe(), profile, metrics_url_for(profile, server.url, server.spec)


def _with_api(target: TargetConfig, profile: Profile | None) -> TargetConfig:
    if target.api is None:
        return target.model_copy(update={"api": profile.default_api if profile else "chat"})
    if profile is not None and target.api not in profile.apis:
        raise ValueError(f"--api {target.api}: {profile.title} serves {', '.join(profile.apis)}")
    return target


def _sampler(
    config: RunConfig, profile: Profile | None, metrics_url: str | None, run_dir: Path, clock: RunClock
) -> Sampler:
    """Scrapes the server's /metrics (when its profile or --metrics-url says where) and the GPU."""
    backend = config.backend or BackendConfig()
    return Sampler(
        run_dir / "samples.jsonl",
        clock.origin_monotonic_s,
        backend.metrics_url or metrics_url,
        profile.name if profile else None,
        backend.metrics_interval_s,
    )


def _concurrency_hint(load) -> int:
    """Connections to open before a point: its users, or its concurrency cap (open loop)."""
    return min(getattr(load, "users", None) or getattr(load, "max_concurrency", None) or 1, 1024)


def _max_users(config: RunConfig) -> int:
    users = [getattr(p, "users", 0) or getattr(p, "max_concurrency", 0) or 0 for p in config.loads]
    return min(max(users + [4]), 64)


async def _run_points(
    config: RunConfig,
    target: TargetConfig,
    backend: dict,
    writer: RunWriter,
    console: Console,
    clock: RunClock,
    sampler: Sampler,
) -> RunResult:
    wire = wire_for(target.api)
    async with make_session(target, clock.now) as session:
        target = await _resolve_model(session, target, wire)
        tokenizer = _tokenizer(config, target)
        requests, info = build_requests(config.dataset, tokenizer, config.seed)
        writer.write_config(_config_json(config, target, backend, info, clock, sampler))
        count = HFTokenizer(config.dataset.tokenizer).count if config.dataset.tokenizer else None
        client = StreamingClient(session, target, wire, clock.now, count_tokens=count, keep_text=config.keep_text)
        stats = LiveStats()
        # Records go to disk as they end and are not kept: a point's are read back when it ends
        # (memory stays flat over a long run, and the run derives results exactly as recompute does).
        gen = LoadGenerator(client, clock, writer.write_record, stats)
        nonce = secrets.token_hex(4) if config.dataset.unique_prefix else None
        source = RequestSource(requests, unique_nonce=nonce)
        results = results_header(writer.config_json(), "run")
        await sampler.wait_past(clock.now())  # a baseline scrape before the first point
        loop = asyncio.get_running_loop()
        with (
            Interrupts.during(lambda: loop.call_soon_threadsafe(gen.interrupt)),
            LiveView(stats, clock.now, console, enabled=config.live),
        ):
            for index, load in enumerate(config.loads):
                stats.label = describe(load)
                first = writer.records_offset()
                source.start_point(load, config.seed)
                await warm_connections(session, target, wire, _concurrency_hint(load))
                point_run = await gen.run_point(
                    index,
                    load,
                    config.stop,
                    source,
                    config.seed + index,
                    started=lambda run: sampler.event(_start_facts(run)),
                )
                facts = point_facts(point_run)
                sampler.event(facts)
                if not point_run.interrupted:
                    await sampler.wait_past(point_run.end_s)  # bracket the point's counters
                records = writer.records_since(first)  # streamed from disk, never all in memory
                results["points"].append(point_result(writer.config_json(), facts, records, sampler.file))
                del records
                writer.write_results(results)
                if point_run.interrupted:
                    break
    results["interrupted"] = gen.interrupted
    writer.write_results(results)
    console.print(summary_table(results["points"]))
    return RunResult(writer.dir, results, gen.interrupted)


def _start_facts(run: PointRun) -> dict:
    return {
        "kind": "point_start",
        "index": run.index,
        "load": run.load.model_dump(mode="json"),
        "start_s": run.start_s,
        "ramp_end_s": run.ramp_end_s,
        "window_start_s": run.window_start_s,
    }


def point_facts(run: PointRun) -> dict:
    """A finished point's span as written to samples.jsonl (the ``point`` event): with the
    point's records, all its results need (derive.point_result)."""
    return {
        **_start_facts(run),
        "kind": "point",
        "load_end_s": run.load_end_s,
        "end_s": run.end_s,
        "user_spans": [list(s) for s in run.user_spans],
        "interrupted": run.interrupted,
        "num_records": run.num_records,
        "last_arrival_s": run.last_arrival_s,
    }


async def _resolve_model(session, target: TargetConfig, wire) -> TargetConfig:
    models = await probe(session, target, wire)  # raises TargetUnreachable before any load
    if target.model is None:
        if not models:
            raise TargetUnreachable(f"{target.url}{wire.probe_path} names no model; pass --model NAME")
        target = target.model_copy(update={"model": models[0]})
    return target


def _tokenizer(config: RunConfig, target: TargetConfig) -> Tokenizer | None:
    if config.dataset.tokenizer:
        return HFTokenizer(config.dataset.tokenizer)
    assert target.url is not None
    return RemoteTokenizer.available(target.url, target.model)


def _config_json(
    config: RunConfig, target: TargetConfig, backend: dict, info: DatasetInfo, clock: RunClock, sampler: Sampler
) -> dict:
    """config.json: the settings and every resolved fact results.json is derived from (with the
    records and samples): the target, the server, the dataset, the clock, where telemetry went."""
    data = config.redacted()
    data["resolved_target"] = {"url": target.url, "model": target.model, "api": target.api}
    data["backend"] = backend
    data["dataset_info"] = info.to_json()
    data["tool"] = {"name": "tokenbench", "version": __version__}
    data["clock"] = {
        "origin_monotonic_s": clock.origin_monotonic_s,
        "origin_unix_s": clock.origin_unix_s,
        "unit": "seconds since origin, time.perf_counter()",
    }
    data["telemetry"] = {
        "samples": sampler.out.name,
        "metrics_url": sampler.metrics_url,
        "interval_s": sampler.interval_s,
    }
    return data
