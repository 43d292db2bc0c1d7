"""`tokenbench run`, top to bottom: target -> dataset -> load points -> records -> metrics -> files.

Each load point runs with everything else equal; results.json is rewritten after every point and
records are flushed as they finish, so an interrupted run keeps everything it measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from . import __version__
from .backends import get_profile
from .backends.base import Profile
from .backends.server import ManagedServer, metrics_url_for
from .clients import wire_for
from .clients.stream import StreamingClient, TargetUnreachable, make_session, probe, warm_connections
from .config import BackendConfig, RateLoad, RunConfig, TargetConfig
from .datasets import DatasetInfo, build_requests
from .datasets.tokenizers import HFTokenizer, RemoteTokenizer, Tokenizer
from .load import describe
from .loadgen import LiveStats, LoadGenerator, PointRun, RequestSource
from .metrics import PointSpan, Window, summarize_point, timeseries
from .records import RequestRecord, RunClock
from .report.console import LiveView, summary_table
from .report.files import RunWriter, default_run_dir
from .telemetry.sampler import Sampler, SamplesFile
from .telemetry.summary import matched_client_ttft, point_gpu, point_server, window_server

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
def _target(config: RunConfig, run_dir: Path, console: Console) -> Iterator[tuple[TargetConfig, dict, Profile | None, str | None]]:
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
    console.print(f"starting {profile.title}: {' '.join(server.launch.argv)}")
    with server:
        console.print(f"{profile.title} ready at {server.url} after {server.cold_start_s:.1f}s "
                      f"(version {server.version or 'unknown'})")
        target = config.target.model_copy(update={"url": server.url, "model": server.spec.served_name})
        yield _with_api(target, profile), server.describe(), profile, metrics_url_for(profile, server.url, server.spec)


def _with_api(target: TargetConfig, profile: Profile | None) -> TargetConfig:
    if target.api is None:
        return target.model_copy(update={"api": profile.default_api if profile else "chat"})
    if profile is not None and target.api not in profile.apis:
        raise ValueError(f"--api {target.api}: {profile.title} serves {', '.join(profile.apis)}")
    return target


def _sampler(config: RunConfig, profile: Profile | None, metrics_url: str | None, run_dir: Path,
             clock: RunClock) -> Sampler:
    """Scrapes the server's /metrics (when its profile or --metrics-url says where) and the GPU."""
    backend = config.backend or BackendConfig()
    return Sampler(run_dir / "samples.jsonl", clock.origin_monotonic_s, backend.metrics_url or metrics_url,
                   profile.name if profile else None, backend.metrics_interval_s)


def _concurrency_hint(load) -> int:
    """Connections to open before a point: its users, or its concurrency cap (open loop)."""
    return min(getattr(load, "users", None) or getattr(load, "max_concurrency", None) or 1, 1024)


def _max_users(config: RunConfig) -> int:
    users = [getattr(p, "users", 0) or getattr(p, "max_concurrency", 0) or 0 for p in config.loads]
    return min(max(users + [4]), 64)


async def _run_points(
    config: RunConfig, target: TargetConfig, backend: dict, writer: RunWriter, console: Console,
    clock: RunClock, sampler: Sampler,
) -> RunResult:
    wire = wire_for(target.api)
    async with make_session(target, clock.now) as session:
        target = await _resolve_model(session, target, wire)
        tokenizer = _tokenizer(config, target)
        requests, info = build_requests(config.dataset, tokenizer, config.seed)
        writer.write_config(_config_json(config, target, backend, info))
        records: list[RequestRecord] = []

        def sink(record: RequestRecord) -> None:
            records.append(record)
            writer.write_record(record)

        count = HFTokenizer(config.dataset.tokenizer).count if config.dataset.tokenizer else None
        client = StreamingClient(session, target, wire, clock.now, count_tokens=count, keep_text=config.keep_text)
        stats = LiveStats()
        gen = LoadGenerator(client, clock, sink, stats)
        nonce = secrets.token_hex(4) if config.dataset.unique_prefix else None
        source = RequestSource(requests, unique_nonce=nonce)
        results = _results_header(config, target, backend, info, clock, sampler)
        await sampler.wait_past(clock.now())  # a baseline scrape before the first point
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, gen.interrupt)
        try:
            with LiveView(stats, clock.now, console, enabled=config.live):
                for index, load in enumerate(config.loads):
                    stats.label = describe(load)
                    first = len(records)
                    source.start_point(load, config.seed)
                    await warm_connections(session, target, wire, _concurrency_hint(load))
                    point_run = await gen.run_point(index, load, config.stop, source, config.seed + index)
                    if not point_run.interrupted:
                        await sampler.wait_past(point_run.end_s)  # bracket the point's counters
                    results["points"].append(_point_result(config, point_run, records[first:], sampler.file))
                    writer.write_results(results)
                    if point_run.interrupted:
                        break
        finally:
            loop.remove_signal_handler(signal.SIGINT)
    results["interrupted"] = gen.interrupted
    writer.write_results(results)
    console.print(summary_table(results["points"]))
    return RunResult(writer.dir, results, gen.interrupted)


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


def _point_result(config: RunConfig, run: PointRun, records: list[RequestRecord], samples_file: SamplesFile) -> dict:
    window = Window(run.window_start_s, run.load_end_s)
    point = {
        "index": run.index,
        "label": describe(run.load),
        "load": {**run.load.model_dump(mode="json"), "warmup_s": config.stop.warmup_s,
                 "duration_s": config.stop.duration_s, "max_requests": config.stop.max_requests},
        "span": {"start_s": run.start_s, "ramp_end_s": run.ramp_end_s,
                 "load_end_s": run.load_end_s, "end_s": run.end_s},
        "interrupted": run.interrupted,
    }
    span = PointSpan(window, open_loop=isinstance(run.load, RateLoad), end_s=run.end_s)
    point.update(summarize_point(records, span, config.slo))
    samples = samples_file.scrapes()
    # The server and the GPU over the client's window; over the whole point beside, named so.
    point["server"] = point_server(samples, window.start_s, window.end_s)
    point["server_whole_point"] = point_server(samples, run.start_s, run.end_s)
    if point["server"] is not None:
        first_chunks = [(r.chunk_times_s[0], r.ttft_s) for r in records if r.ttft_s is not None]
        point["server"]["client_ttft_s_matched"] = matched_client_ttft(first_chunks, point["server"])
    header = samples_file.header()
    point["gpu"] = point_gpu(samples, header, window.start_s, window.end_s)
    point["gpu_whole_point"] = point_gpu(samples, header, run.start_s, run.end_s)
    point["timeseries"] = [
        {**w, **window_server(samples, w["start_s"], w["end_s"])}
        for w in timeseries(records, run.start_s, run.end_s, run.ramp_end_s, run.user_spans, config.window_s)
    ]
    return point


def _config_json(config: RunConfig, target: TargetConfig, backend: dict, info: DatasetInfo) -> dict:
    data = config.redacted()
    data["resolved_target"] = {"url": target.url, "model": target.model, "api": target.api}
    data["backend"] = backend
    data["dataset_info"] = info.to_json()
    data["tool"] = {"name": "tokenbench", "version": __version__}
    return data


def _results_header(config, target, backend, info: DatasetInfo, clock: RunClock, sampler: Sampler) -> dict:
    return {
        "tool": {"name": "tokenbench", "version": __version__},
        "target": {"url": target.url, "model": target.model, "api": target.api,
                   "ignore_eos": target.ignore_eos, **backend},
        "dataset": info.to_json(),
        "slo": config.slo.model_dump(),
        "clock": {"origin_monotonic_s": clock.origin_monotonic_s, "origin_unix_s": clock.origin_unix_s,
                  "unit": "seconds since origin, time.perf_counter()"},
        "telemetry": {"samples": sampler.out.name, "metrics_url": sampler.metrics_url,
                      "interval_s": sampler.interval_s},
        "points": [],
    }
