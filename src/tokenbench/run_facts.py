"""What a run writes of itself beside its records: config.json (the settings and every resolved
fact results are derived from) and each point's span (the ``point_start`` and ``point`` events of
samples.jsonl), so ``tokenbench recompute`` derives results.json exactly as the run did."""

from __future__ import annotations

import dataclasses

from . import __version__
from .config import RunConfig, TargetConfig
from .datasets import DatasetInfo
from .loadgen import PointRun
from .records import RunClock
from .telemetry.sampler import Sampler


def config_json(
    config: RunConfig, target: TargetConfig, backend: dict, info: DatasetInfo, clock: RunClock, sampler: Sampler
) -> dict:
    """config.json: the settings and every resolved fact results.json is derived from (with the
    records and samples): the target, the server, the dataset, the clock, where telemetry went."""
    data = config.redacted()
    data["resolved_target"] = {
        "url": target.url,
        "model": target.model,
        "api": target.api,
        "continuous_usage": target.continuous_usage,  # usage on every chunk was asked for
    }
    data["backend"] = backend
    data["dataset_info"] = info.model_dump(mode="json", exclude_unset=True)  # no "trace" key but a trace's
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


def start_facts(run: PointRun) -> dict:
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
        **start_facts(run),
        "kind": "point",
        "load_end_s": run.load_end_s,
        "end_s": run.end_s,
        "user_spans": [list(s) for s in run.user_spans],
        "interrupted": run.interrupted,
        "num_records": run.num_records,
        "last_arrival_s": run.last_arrival_s,
        **({"sessions": dataclasses.asdict(run.sessions)} if run.sessions is not None else {}),
    }
