"""A run as llm-d's Benchmark Report v0.2.1 (``tokenbench export DIR --format benchmark-report``):
one report per load point, so llm-d-benchmark's analysis and tools read tokenbench's runs.

The schema is llm-d-benchmark's (llmdbenchmark/analysis/benchmark_report/schema_v0_2.py and
schema_v0_2_1.py, br_v0_2_1_json_schema.json): ``version``, ``run`` (``uid``, ``eid``, ``time``),
``scenario.load`` (``metadata``, ``standardized``: the tool, the source of the prompts, their
lengths, the rate or concurrency, the stage; ``native``: tokenbench's settings as config.json has
them) and ``results``: ``request_performance.aggregate`` (``requests`` total / failures /
incomplete and the prompt and output lengths, ``latency``, ``throughput``) and ``observability``
(the server's running and waiting requests and KV-cache usage from its own metrics, the GPU's
utilization and power). Every figure is tokenbench's, over the point's window (METRICS.md), in
the schema's units: seconds, s/token, tokens/s, queries/s, percent.

How the schema's names map: ``time_to_first_token`` is TTFT, ``time_per_output_token`` TPOT
((E2E − TTFT) / (output tokens − 1)), ``inter_token_latency`` tokenbench's ITL (every gap between
content chunks, pooled: what llm-d maps vLLM bench's ITL to), ``normalized_time_per_output_token``
E2E / output tokens, ``request_latency`` E2E. ``scenario.stack`` is left out: the schema's
components need fields (accelerators, parallelism, a configuration hash) a run does not know.
"""

from __future__ import annotations

import datetime
import hashlib
from pathlib import Path
from typing import Any

from tokenbench import __version__
from tokenbench.metrics.stats import distribution
from tokenbench.records import UNFINISHED, Outcome, RequestRecord, failed
from tokenbench.results import Distribution, Gauge, PointResult, RunResults
from tokenbench.results.layout import CONFIG
from tokenbench.rundir import read_records
from tokenbench.rundir.read import read_json, read_results

VERSION = "0.2.1"
Doc = dict[str, Any]  # a report as JSON
# tokenbench's statistic -> the schema's
_STATS: tuple[tuple[str, str], ...] = (
    ("std", "stddev"),
    ("min", "min"),
    ("p50", "p50"),
    ("p90", "p90"),
    ("p95", "p95"),
    ("p99", "p99"),
    ("p999", "p99p9"),
    ("max", "max"),
)


def _statistics(d: Distribution | None, units: str) -> Doc | None:
    if d is None or d.mean is None:
        return None
    out: Doc = {"units": units, "mean": d.mean}
    for ours, theirs in _STATS:
        value = getattr(d, ours)
        if value is not None:
            out[theirs] = value
    return out


def _gauge(g: Gauge | None, units: str, scale: float = 1.0) -> Doc | None:
    return None if g is None else {"units": units, "mean": g.mean * scale, "max": g.max * scale}


def _mean(value: float | None, units: str) -> Doc | None:
    return None if value is None else {"units": units, "mean": value}


def _dropped(doc: Doc) -> Doc:
    """``doc`` without its None values, recursively (the schema's optional parts are left out)."""
    return {k: _dropped(v) if isinstance(v, dict) else v for k, v in doc.items() if v is not None}


def _iso(unix_s: float) -> str:
    return datetime.datetime.fromtimestamp(unix_s, tz=datetime.UTC).isoformat().replace("+00:00", "Z")


def point_report(
    run_dir: Path, results: RunResults, point: PointResult, records: list[RequestRecord], settings: Doc
) -> Doc:
    """One load point of a run as a Benchmark Report v0.2.1 document (``records``: the point's)."""
    ok = [r for r in records if r.outcome is Outcome.OK]
    prompt = [float(r.prompt_tokens) for r in ok if r.prompt_tokens is not None]
    output = [float(r.output_tokens) for r in ok if r.output_tokens is not None]
    load = point.load
    standardized: Doc = {
        "tool": "tokenbench",
        "tool_version": __version__,
        "parallelism": results.workers.count if results.workers is not None else 1,
        "source": "random" if results.dataset is not None and results.dataset.name == "synthetic" else "sampled",
        "stage": point.index,
        "input_seq_len": {"distribution": "other", "value": distribution(prompt).mean or 0},
        "output_seq_len": {"distribution": "other", "value": distribution(output).mean} if output else None,
        "rate_qps": load.rate_per_s if load.kind == "rate" else None,
        "concurrency": load.users if load.kind == "users" else load.max_concurrency,
    }
    requests = point.requests
    window = point.window
    origin = results.clock.origin_unix_s if results.clock is not None and results.clock.origin_unix_s else None
    server, gpu = point.server, point.gpu
    aggregate: Doc = {
        "requests": {
            "total": requests.total,
            "failures": sum(1 for r in records if failed(r.outcome)),
            "incomplete": sum(1 for r in records if r.outcome in UNFINISHED),
            "input_length": _statistics(distribution(prompt), "count") if prompt else None,
            "output_length": _statistics(distribution(output), "count") if output else None,
        },
        "latency": {
            "time_to_first_token": _statistics(point.ttft_s, "s"),
            "normalized_time_per_output_token": _statistics(point.normalized_latency_s, "s/token"),
            "time_per_output_token": _statistics(point.tpot_s, "s/token"),
            "inter_token_latency": _statistics(point.itl_s, "s/token"),
            "request_latency": _statistics(point.e2e_s, "s"),
        },
        "throughput": {
            "input_token_rate": _mean(
                None
                if point.total_tokens_per_s is None or point.output_tokens_per_s is None
                else point.total_tokens_per_s - point.output_tokens_per_s,
                "tokens/s",
            ),
            "output_token_rate": _mean(point.output_tokens_per_s, "tokens/s"),
            "total_token_rate": _mean(point.total_tokens_per_s, "tokens/s"),
            "request_rate": _mean(point.requests_per_s, "queries/s"),
        },
    }
    resources: Doc = {
        "kv_cache_usage": _gauge(server.kv_usage, "percent", 100.0) if server else None,
        "running_requests": _gauge(server.running, "count") if server else None,
        "waiting_requests": _gauge(server.waiting, "count") if server else None,
        "gpu_utilization": _gauge(gpu.util_pct, "percent"),
        "power_consumption": _gauge(gpu.power_w, "Watts"),
    }
    label = results.target.backend or results.target.url or "server"
    components = [{"component_label": label, "aggregate": resources}] if any(resources.values()) else None
    uid = hashlib.sha256(f"{run_dir.resolve()}#{point.index}".encode()).hexdigest()[:16]
    report: Doc = {
        "version": VERSION,
        "run": {
            "uid": uid,
            "eid": run_dir.name,
            "time": {
                "start": _iso(origin + window.start_s) if origin else None,
                "end": _iso(origin + window.end_s) if origin else None,
                "duration": f"PT{point.window_s:.3f}S",
            },
            "description": f"tokenbench {run_dir.name}, point {point.index}: {point.label} (the measurement window)",
        },
        "scenario": {
            "load": {
                "metadata": {"schema_version": "0.0.1", "description": point.label},
                "standardized": standardized,
                "native": {"config": settings},
            }
        },
        "results": {
            "request_performance": {"aggregate": aggregate},
            "observability": {"components": components} if components else None,
        },
    }
    return _dropped(report)


def benchmark_reports(run_dir: Path) -> dict[int, Doc]:
    """Every point of a run directory as a Benchmark Report, by point index."""
    results = read_results(run_dir)
    settings = read_json(run_dir / CONFIG) if (run_dir / CONFIG).is_file() else {}
    by_point: dict[int, list[RequestRecord]] = {}
    for record in read_records(run_dir):  # once for the run, not once a point
        by_point.setdefault(record.point, []).append(record)
    return {p.index: point_report(run_dir, results, p, by_point.get(p.index, []), settings) for p in results.points}
