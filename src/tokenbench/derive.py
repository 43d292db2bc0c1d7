"""A run's files -> results.json: the one path, for a run as it goes and for ``tokenbench
recompute`` after a crash or an upgrade that fixed a metric.

Inputs, all in the run directory:
- ``config.json``: the settings, the resolved target and server, the dataset, the run's clock
  and where telemetry went (written before the first request);
- ``records.jsonl``: one line per request, flushed as each ends;
- ``samples.jsonl``: the server's and the GPU's scrapes, and the run's timeline: a
  ``point_start`` event when a load point starts and a ``point`` event with its span when it
  ends (written through the sampler, runner.py).
A run computes each point from these very facts (its records read back from records.jsonl, its
span as the event it wrote), so a recompute of the same files gives the same results.json; only
``computed_by`` says which tool version computed it, and how.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import TypeAdapter

from . import __version__
from .config import DeadlinesConfig, LoadPoint, RateLoad, ReplayLoad, SLOConfig, StopConfig
from .cost import CostConfig, point_cost
from .errors import BadInput
from .load import describe
from .metrics import (
    ChunkTally,
    PointSpan,
    Window,
    by_turn,
    series_edges,
    session_expected_reuse,
    summarize_point,
    timeseries,
)
from .metrics.prefix_cache import CacheTally, expected_reuse, prefix_cache
from .records import RequestRecord
from .results import (
    SCHEMA_VERSION,
    Clock,
    ComputedBy,
    DatasetFacts,
    Load,
    PointResult,
    RunResults,
    Server,
    SessionCounts,
    Slo,
    Span,
    Target,
    Telemetry,
    TimeWindow,
    Tool,
)
from .results.client import WorkerLoss, Workers
from .results.run import PointHead, PointMetrics, WindowClient
from .rundir import RecordSlice, point_ranges, write_json
from .telemetry.client_health import point_client, window_client
from .telemetry.energy import point_energy
from .telemetry.sampler import SamplesFile
from .telemetry.summary import matched_client_ttft, point_gpu, point_server, window_server

_LOAD: TypeAdapter[LoadPoint] = TypeAdapter(LoadPoint)

ConfigJson = dict[str, Any]  # config.json as the run wrote it
Facts = dict[str, Any]  # a ``point`` event of samples.jsonl: a point's span (run_facts.point_facts)


class RecomputeError(BadInput):
    """A directory that cannot be recomputed; the message names what is missing."""


def computed_by(how: Literal["run", "recompute"]) -> ComputedBy:
    return ComputedBy(name="tokenbench", version=__version__, how=how)


def results_header(config_json: ConfigJson, how: Literal["run", "recompute"]) -> RunResults:
    """results.json without its points, from config.json alone."""
    target = config_json.get("resolved_target") or {}
    return RunResults(
        schema_version=SCHEMA_VERSION,
        tool=Tool.model_validate(config_json.get("tool") or {"name": "tokenbench", "version": None}),
        computed_by=computed_by(how),
        target=Target.model_validate(
            {
                "url": target.get("url"),
                "model": target.get("model"),
                "api": target.get("api"),
                "ignore_eos": (config_json.get("target") or {}).get("ignore_eos", False),
                **(config_json.get("backend") or {}),
            }
        ),
        dataset=_optional(DatasetFacts, config_json.get("dataset_info")),
        slo=Slo(**_slo(config_json).model_dump()),
        clock=_optional(Clock, config_json.get("clock")),
        telemetry=_optional(Telemetry, config_json.get("telemetry")),
        **_workers(config_json),
        points=[],
    )


_Part = TypeVar("_Part", DatasetFacts, Clock, Telemetry)


def _optional(model: type[_Part], data: dict[str, Any] | None) -> _Part | None:
    return model.model_validate(data) if data is not None else None


def _workers(config_json: ConfigJson) -> dict[str, Any]:
    """``workers``: only in a run whose load came from several workers (config.json's facts)."""
    facts = config_json.get("workers_facts")
    return {"workers": Workers.model_validate(facts)} if facts else {}


def _losses(facts: Facts) -> dict[str, Any]:
    """``workers_lost``: only on a point during which a worker died."""
    lost = facts.get("workers_lost")
    return {"workers_lost": [WorkerLoss.model_validate(x) for x in lost]} if lost else {}


def _slo(config_json: ConfigJson) -> SLOConfig:
    return SLOConfig.model_validate(config_json.get("slo") or {})


def point_result(
    config_json: ConfigJson,
    facts: Facts,
    records: Iterable[RequestRecord],
    samples_file: SamplesFile,
    client_samples: Sequence[Facts] | None = None,
) -> PointResult:
    """One point of results.json from its span (a ``point`` event) and its records, streamed once
    (e.g. a RecordSlice of records.jsonl): their chunk times are tallied a batch at a time and
    dropped, so a point of any length is summarized in memory that does not grow with its chunks
    beyond its ITL gaps (metrics.ChunkTally). ``client_samples``: the run's own ``client`` samples
    as it wrote them (maybe not on disk yet); by default samples.jsonl's."""
    load = _LOAD.validate_python(facts["load"])
    start_s, end_s = facts["start_s"], facts["end_s"]
    window = Window(facts["window_start_s"], facts["load_end_s"])
    span = PointSpan(window, open_loop=isinstance(load, RateLoad | ReplayLoad), end_s=end_s)
    window_s = float(config_json.get("window_s") or 5.0)
    deadlines = DeadlinesConfig.model_validate(config_json.get("deadlines") or {})  # older runs: the defaults
    chunks = ChunkTally(span, series_edges(start_s, end_s, window_s), deadlines)
    cache = CacheTally(chunks.in_population)  # reads the server timings consume drops
    kept = chunks.consume(cache.observe(records))  # the records, without their chunk times
    metrics = summarize_point(kept, span, _slo(config_json), chunks)
    samples, header = samples_file.scrapes(), samples_file.header()
    health = samples_file.events("client") if client_samples is None else client_samples
    user_spans = [(a, b) for a, b in facts.get("user_spans") or []]
    series = timeseries(kept, start_s, end_s, facts["ramp_end_s"], user_spans, window_s, tokens=chunks.series_tokens)
    server = point_server(samples, window.start_s, window.end_s)
    population = [r for r in kept if chunks.in_population(r)]
    # the workload's expected reuse: a trace's or shared prefixes' (dataset facts), else sessions'
    workload_reuse = expected_reuse(config_json.get("dataset_info"))
    if workload_reuse is None and config_json.get("sessions"):
        workload_reuse = session_expected_reuse(population, kept)
    # The server and the GPU over the client's window; over the whole point beside, named so.
    return PointResult(
        **dict(_point_head(config_json, facts, load)),
        **{k: v for k, v in metrics if k in metrics.model_fields_set},  # unset optional parts stay absent
        server=_with_matched_ttft(server, kept),
        server_whole_point=point_server(samples, start_s, end_s),
        gpu=point_gpu(samples, header, window.start_s, window.end_s),
        gpu_whole_point=point_gpu(samples, header, start_s, end_s),
        timeseries=_windows(series, samples, health),
        **_session_parts(config_json, facts, population),
        prefix_cache=prefix_cache(facts.get("prefix_cache_reset"), server, cache, workload_reuse),
        **_cost(config_json, metrics),
        energy=point_energy(samples, header, window.start_s, window.end_s, metrics.output_tokens_per_s),
        **_client(health, window),
        **_losses(facts),
    )


def _windows(series: Sequence[WindowClient], samples: list[Facts], health: Sequence[Facts]) -> list[TimeWindow]:
    """Each time-series window: the client's figures, the server's and the client's health beside."""
    return [
        TimeWindow.of(w, window_server(samples, w.start_s, w.end_s), window_client(health, w.start_s, w.end_s))
        for w in series
    ]


def _client(samples: Sequence[Facts], window: Window) -> dict[str, Any]:
    """``client``: the client's health over the window; no key on a point of a run from before the
    client was sampled (exclude_unset)."""
    client = point_client(samples, window.start_s, window.end_s)
    return {} if client is None else {"client": client}


def _cost(config_json: ConfigJson, metrics: PointMetrics) -> dict[str, Any]:
    """``cost`` on the points of a run given a price (config.json's ``cost``); other points have
    no such key (exclude_unset)."""
    price = config_json.get("cost")
    if not price:
        return {}
    return {
        "cost": point_cost(CostConfig.model_validate(price), metrics.output_tokens_per_s, metrics.total_tokens_per_s)
    }


def _session_parts(config_json: ConfigJson, facts: Facts, population: Sequence[RequestRecord]) -> dict[str, Any]:
    """A --multi-turn point's ``by_turn`` (over its window population) and ``sessions`` (the load
    generator's counts over the whole point; a point the process never finished has no counts);
    other points get neither key (exclude_unset)."""
    counts = facts.get("sessions")
    if counts is None and not config_json.get("sessions"):
        return {}
    parts: dict[str, Any] = {"by_turn": by_turn(population)}
    if counts is not None:
        parts["sessions"] = SessionCounts.model_validate(counts)
    return parts


def _point_head(config_json: ConfigJson, facts: Facts, load: LoadPoint) -> PointHead:
    """Which point: its index, its load with the run's stop settings, its span."""
    stop = StopConfig.model_validate(config_json["stop"])
    return PointHead(
        index=facts["index"],
        label=describe(load),
        load=Load(
            **load.model_dump(mode="json"),
            warmup_s=stop.warmup_s,
            duration_s=stop.duration_s,
            max_requests=stop.max_requests,
        ),
        span=Span(
            start_s=facts["start_s"],
            ramp_end_s=facts["ramp_end_s"],
            load_end_s=facts["load_end_s"],
            end_s=facts["end_s"],
        ),
        interrupted=facts["interrupted"],
    )


def _with_matched_ttft(server: Server | None, records: Sequence[RequestRecord]) -> Server | None:
    """The server's figures with the client's TTFT over the requests its histogram counted."""
    if server is None:
        return None
    first_chunks = [(r.chunk_times_s[0], r.ttft_s) for r in records if r.ttft_s is not None]
    return server.with_matched_ttft(matched_client_ttft(first_chunks, server))


def unfinished_point(start: Facts, records: Iterable[RequestRecord], stop: StopConfig) -> Facts:
    """The span of a point the run never finished (killed): it ran at least until the last of
    its records ended; its load ended there or at its deadline, whichever came first."""
    end_s = max(
        (t for r in records for t in (r.closed_s, r.end_s, r.sent_s, r.scheduled_s) if t is not None),
        default=start["start_s"],
    )
    end_s = max(end_s, start["start_s"])
    deadline = start["start_s"] + stop.duration_s if stop.duration_s is not None else end_s
    return {
        **start,
        "kind": "point",
        "load_end_s": min(end_s, deadline),
        "end_s": end_s,
        "user_spans": [],
        "interrupted": True,
    }


def recompute_run(run_dir: Path) -> RunResults:
    """Derive results.json from the run's files and write it (the previous one is kept as
    results.previous.json). Returns the results."""
    run_dir = Path(run_dir)
    config_json = _run_config(run_dir)
    samples = SamplesFile(run_dir / "samples.jsonl")
    records_path = run_dir / "records.jsonl"
    by_point = {index: RecordSlice(records_path, ranges) for index, ranges in point_ranges(records_path).items()}
    spans = _Spans.of(run_dir, samples, config_json)
    results = results_header(spans.config_json, "recompute")
    for index in sorted(spans.indices() | set(by_point)):
        point_records = by_point.get(index, RecordSlice(records_path, []))
        facts = spans.facts(index, point_records)
        results = results.with_point(point_result(spans.config_json, facts, point_records, samples))
    planned = len(config_json["loads"])
    results = results.finished(len(spans.ended) < planned or any(p.interrupted for p in results.points))
    previous = run_dir / "results.json"
    if previous.exists():
        shutil.copyfile(previous, run_dir / "results.previous.json")
    write_json(run_dir / "results.json", results.to_json())
    return results


def _run_config(run_dir: Path) -> ConfigJson:
    """config.json of a run that has its records; a RecomputeError names what is missing."""
    for name in ("config.json", "records.jsonl"):
        if not (run_dir / name).is_file():
            raise RecomputeError(
                f"{run_dir}: no {name}; recompute needs config.json, records.jsonl "
                f"and samples.jsonl from a tokenbench run"
            )
    config_json: ConfigJson = json.loads((run_dir / "config.json").read_text())
    if "stop" not in config_json or "loads" not in config_json:
        raise RecomputeError(f"{run_dir / 'config.json'} is not a tokenbench run's config")
    return config_json


class _Spans:
    """Where each point's span comes from: its ``point`` event; for a point the run never finished,
    its ``point_start`` event and its records; for a run from before 0.2.0, its old results.json
    (whose clock and telemetry then complete ``config_json``)."""

    def __init__(self, run_dir: Path, config_json: ConfigJson, ended: dict[int, Facts], started: dict[int, Facts]):
        self.run_dir, self.config_json, self.ended, self.started = run_dir, config_json, ended, started
        self.stop = StopConfig.model_validate(config_json["stop"])
        self.earlier: dict[int, Facts] = {}

    @classmethod
    def of(cls, run_dir: Path, samples: SamplesFile, config_json: ConfigJson) -> _Spans:
        ended = {e["index"]: e for e in samples.events("point")}
        started = {e["index"]: e for e in samples.events("point_start")}
        spans = cls(run_dir, config_json, ended, started)
        if not started and (run_dir / "results.json").is_file():  # a run from before 0.2.0: its facts
            old = json.loads((run_dir / "results.json").read_text())
            spans.earlier = _spans_from_results(old, spans.stop.warmup_s)
            spans.config_json = {
                **config_json,
                "clock": config_json.get("clock") or old.get("clock"),
                "telemetry": config_json.get("telemetry") or old.get("telemetry"),
            }
        return spans

    def indices(self) -> set[int]:
        return set(self.ended) | set(self.started) | set(self.earlier)

    def facts(self, index: int, records: Iterable[RequestRecord]) -> Facts:
        if index in self.ended:
            return self.ended[index]
        if index in self.started:
            return unfinished_point(self.started[index], records, self.stop)
        if index in self.earlier:
            return self.earlier[index]
        raise RecomputeError(
            f"{self.run_dir}: records of point {index} but no span for it in samples.jsonl "
            f"(nor in an earlier results.json)"
        )


def _spans_from_results(old: dict[str, Any], warmup_s: float) -> dict[int, Facts]:
    """Point spans from a results.json written before runs logged them in samples.jsonl: old
    runs re-derived with today's definitions (the users' spans were not kept: the time series'
    active_users is then null)."""
    spans = {}
    for p in old.get("points", []):
        span, load = p.get("span") or {}, dict(p.get("load") or {})
        for key in ("warmup_s", "duration_s", "max_requests"):
            load.pop(key, None)
        window = p.get("window") or {}
        spans[p["index"]] = {
            "kind": "point",
            "index": p["index"],
            "load": load,
            "start_s": span["start_s"],
            "ramp_end_s": span["ramp_end_s"],
            "window_start_s": window.get("start_s", span["ramp_end_s"] + warmup_s),
            "load_end_s": span["load_end_s"],
            "end_s": span["end_s"],
            "user_spans": [],
            "interrupted": bool(p.get("interrupted")),
        }
    return spans
