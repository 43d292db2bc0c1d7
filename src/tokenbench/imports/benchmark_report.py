"""llm-d's Benchmark Report v0.2.x (``tokenbench export --format benchmark-report`` writes it; so
do llm-d-benchmark's harnesses): one report a point, a JSON or YAML file, or a directory of them.

Fields read, as the schema has them (llmdbenchmark/analysis/benchmark_report/schema_v0_2.py and
schema_v0_2_1.py; tests/fixtures/benchmark_report): ``version``; ``run.time.duration`` (ISO 8601)
and ``run.time.start``; ``scenario.load.standardized`` (``tool``, ``tool_version``, ``rate_qps``,
``concurrency``, ``stage``); ``scenario.stack[]``'s inference engine (``model.name``, its ``tool``,
``role``); ``results.request_performance.aggregate``: ``requests`` (``total``, ``failures``,
``incomplete``), ``latency`` (``time_to_first_token``, ``time_per_output_token``,
``inter_token_latency``, ``request_latency``: each a Statistics with its ``units`` and mean,
percentiles, min, max, stddev) and ``throughput`` (``output_token_rate``, ``total_token_rate``,
``request_rate``: their means; tokenbench has no prompt-token rate of a generative point to set
``input_token_rate`` beside). Each figure is converted from its
``units`` (ms, s, ms/token, s/token, tokens/s, queries/s) to tokenbench's stored unit; any other
unit is refused, naming the field. The report names no arrival process: a rate is read as
tokenbench's default (Poisson), its label saying so.

A report holds aggregates only, no request: the import is a run whose points carry the report's
load and, in results.json ``imported``, the report's own figures; it has no records, so
tokenbench's own figures of its points are absent (None), never made up from the aggregates.
report, compare and the gate read the tool's figures for such a run (``Imported.aggregate_only``).
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML is not a dependency)

from tokenbench.config import LoadPoint, RateLoad, UsersLoad
from tokenbench.errors import BadInput
from tokenbench.imports.tool_run import ImportedRun, ToolPoint, json_object

TOOL = "benchmark-report"
MAJOR_MINOR = "0.2"  # the schema versions this reader was written against: 0.2, 0.2.0, 0.2.1, ...
SUFFIXES = (".json", ".yaml", ".yml")
# the schema's statistic -> tokenbench's (a Distribution's field)
STATS = {
    "mean": "mean",
    "stddev": "std",
    "min": "min",
    "p50": "p50",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
    "p99p9": "p999",
    "max": "max",
}
_SECONDS = {"s": 1.0, "ms": 1e-3}
_PER_TOKEN = {"s/token": 1.0, "ms/token": 1e-3, **_SECONDS}
# aggregate.latency's entries -> tokenbench's distribution and the units each may be given in
LATENCIES = {
    "time_to_first_token": ("ttft_s", _SECONDS),
    "time_per_output_token": ("tpot_s", _PER_TOKEN),
    "inter_token_latency": ("itl_s", _PER_TOKEN),
    "request_latency": ("e2e_s", _SECONDS),
}
# aggregate.throughput's entries (their mean) -> tokenbench's metric and the unit it must be in
THROUGHPUTS = {
    "output_token_rate": ("output_tokens_per_s", "tokens/s"),
    "total_token_rate": ("total_tokens_per_s", "tokens/s"),
    "request_rate": ("requests_per_s", "queries/s"),
}
AGGREGATE = "results.request_performance.aggregate"
NOT_RECORDED = ("every record key: a Benchmark Report holds aggregates, no request",)


def read(path: Path) -> ImportedRun | None:
    """``path`` (a report, or a directory of them) read, or None when it holds no Benchmark Report."""
    files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES) if path.is_dir() else [path]
    reports = [(f, doc) for f in files if (doc := _document(f)) is not None]
    if not reports:
        return None
    for f, doc in reports:
        _check_version(f, doc)
    reports.sort(key=lambda fd: (_standardized(fd[0], fd[1]).get("stage") or 0, fd[0].name))
    first_file, first = reports[0]
    load = _standardized(first_file, first)
    tool, version = load.get("tool"), load.get("tool_version")
    native = _native_target(first) if tool == "tokenbench" else {}
    started = _started(first)
    return ImportedRun(
        tool=TOOL,
        version=str(first["version"]),
        source=first_file if len(reports) == 1 else path,
        model=_model(first) or native.get("model"),
        url=native.get("url"),
        api=native.get("api") or "chat",
        points=[_point(f, doc) for f, doc in reports],
        not_recorded=NOT_RECORDED,
        started_unix_s=started,
        aggregate_only=True,
        measured_by=f"{tool} {version}".strip() if tool else None,
    )


def _document(path: Path) -> dict[str, Any] | None:
    """A file's report (Any: llm-d's document, read key by key), or None when it is not one."""
    if path.suffix in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(path.read_text()) if path.is_file() else None
        except (yaml.YAMLError, UnicodeDecodeError):
            return None
    else:
        data = json_object(path)
    if not isinstance(data, dict) or "version" not in data:
        return None
    # v0.2's parts (v0.1 had scenario and metrics, no run)
    return data if isinstance(data.get("results"), dict) or isinstance(data.get("run"), dict) else None


def _check_version(path: Path, doc: dict[str, Any]) -> None:
    version = str(doc["version"])
    if not re.fullmatch(rf"{re.escape(MAJOR_MINOR)}(\.\d+)?", version):
        raise BadInput(
            f"{path}: Benchmark Report version {version}: tokenbench reads versions {MAJOR_MINOR}.x; "
            f"convert it with llm-d-benchmark's benchmark_report to {MAJOR_MINOR}.1"
        )


def _part(doc: dict[str, Any], dotted: str) -> dict[str, Any]:
    """The dict at a dotted path ({} where a part is absent or not a dict)."""
    value: Any = doc
    for name in dotted.split("."):
        value = value.get(name) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


def _standardized(path: Path, doc: dict[str, Any]) -> dict[str, Any]:
    load = _part(doc, "scenario.load.standardized")
    if not load:
        raise BadInput(f"{path}: a Benchmark Report without scenario.load.standardized: tokenbench needs its load")
    return load


def _model(doc: dict[str, Any]) -> str | None:
    """The inference engine's model (scenario.stack[].standardized, kind inference_engine)."""
    stack = _part(doc, "scenario").get("stack") or []
    for component in stack if isinstance(stack, list) else []:
        s = component.get("standardized") if isinstance(component, dict) else None
        if isinstance(s, dict) and s.get("kind") == "inference_engine":
            name = (s.get("model") or {}).get("name")
            if name:
                return str(name)
    return None


def _native_target(doc: dict[str, Any]) -> dict[str, str]:
    """A tokenbench report's target, from the settings it carries (scenario.load.native.config:
    config.json's resolved_target)."""
    target = _part(doc, "scenario.load.native.config.resolved_target")
    return {k: str(target[k]) for k in ("model", "url", "api") if target.get(k)}


def _started(doc: dict[str, Any]) -> float | None:
    start = _part(doc, "run.time").get("start")
    try:
        return datetime.datetime.fromisoformat(str(start).replace("Z", "+00:00")).timestamp() if start else None
    except ValueError:
        return None


_DURATION = re.compile(r"^P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def _duration_s(doc: dict[str, Any]) -> float | None:
    """run.time.duration (ISO 8601: "PT12.5S", "PT1M30S") in seconds; None without one."""
    match = _DURATION.match(str(_part(doc, "run.time").get("duration") or ""))
    if match is None or not any(match.groups()):
        return None
    d, h, m, s = (float(g or 0) for g in match.groups())
    return ((d * 24 + h) * 60 + m) * 60 + s


def _load(path: Path, load: dict[str, Any]) -> LoadPoint:
    """A rate (capped by the concurrency where both are given) is an open loop; a concurrency
    alone, that many users each sending its next when one ends."""
    rate, concurrency = load.get("rate_qps"), load.get("concurrency")
    cap = int(concurrency) if isinstance(concurrency, (int, float)) else None
    if isinstance(rate, (int, float)) and rate > 0:
        return RateLoad(rate_per_s=float(rate), max_concurrency=cap)
    if cap is not None and cap >= 1:
        return UsersLoad(users=cap)
    raise BadInput(
        f"{path}: scenario.load.standardized has neither rate_qps nor concurrency: tokenbench places a point by its load"
    )


def _point(path: Path, doc: dict[str, Any]) -> ToolPoint:
    aggregate = _part(doc, AGGREGATE)
    figures: dict[str, float] = {}
    names: dict[str, str] = {}
    latency = _part(aggregate, "latency")
    for name, (key, units) in LATENCIES.items():
        stats = latency.get(name)
        if not isinstance(stats, dict):
            continue
        scale = _scale(path, f"{AGGREGATE}.latency.{name}", stats, units)
        for theirs, ours in STATS.items():
            value = stats.get(theirs)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                figures[f"{key}_{ours}"] = float(value) * scale
                names[f"{key}_{ours}"] = f"{name}.{theirs}"
    throughput = _part(aggregate, "throughput")
    for name, (key, unit) in THROUGHPUTS.items():
        stats = throughput.get(name)
        if isinstance(stats, dict) and isinstance(stats.get("mean"), (int, float)):
            _scale(path, f"{AGGREGATE}.throughput.{name}", stats, {unit: 1.0})
            figures[key], names[key] = float(stats["mean"]), f"{name}.mean"
    requests = _part(aggregate, "requests")
    total, failures = requests.get("total"), requests.get("failures")
    ended = total - (requests.get("incomplete") or 0) if isinstance(total, int) else None
    if ended and isinstance(failures, int):
        # tokenbench's error rate: the failed over those that ended (incomplete ones did not)
        figures["error_rate"], names["error_rate"] = failures / ended, "requests.failures / (total - incomplete)"
    return ToolPoint(
        load=_load(path, _standardized(path, doc)),
        requests=[],
        figures=figures,
        duration_s=_duration_s(doc),
        figure_names=names,
        requests_total=total if isinstance(total, int) else None,
        requests_failed=failures if isinstance(failures, int) else None,
    )


def _scale(path: Path, where: str, stats: dict[str, Any], units: dict[str, float]) -> float:
    unit = stats.get("units")
    if unit not in units:
        raise BadInput(f"{path}: {where}.units is {unit!r}: tokenbench reads it in {', '.join(units)}")
    return units[unit]
