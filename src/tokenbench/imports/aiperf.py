"""AIPerf's artifacts directory (``aiperf profile --artifact-dir DIR``): one benchmark, a point.

Files read, as AIPerf 0.13.0 writes them: ``profile_export_aiperf.json`` (the aggregate:
``aiperf_version``, ``input_config`` with the endpoint, the model and the profiling phase's load,
each metric's ``avg``/``p50``/``p99`` in its ``unit``, ``benchmark_duration``, ``error_summary``)
and ``profile_export.jsonl`` (one line a request, written at ``--export-level records``, the
default). Per request: ``metadata.request_start_ns`` (time.time_ns() just before the POST, taken
with the perf-counter start its latencies are measured from), ``metadata.benchmark_phase``
(``warmup`` lines, where the file holds any, are left out: AIPerf leaves them out of its figures),
``metadata.was_cancelled``, ``metrics.time_to_first_token`` (to its first response with content),
``metrics.inter_chunk_latency`` (the gaps between consecutive responses with content),
``metrics.request_latency`` (to its last response with content), ``input_sequence_length`` and
``output_sequence_length`` (AIPerf's tokenizer over the prompt and the reply's text, unless it ran
with --use-server-token-count), and ``error`` (code, type, message) on a failed request.

AIPerf times only responses with content (aiperf/common/models/record_models.py
``content_responses``): a chat stream's role-only opening chunk and a closing chunk with only the
finish reason are not among them, so no event is dropped here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenbench.config import Arrival, LoadPoint, RateLoad, UsersLoad
from tokenbench.errors import BadInput
from tokenbench.imports.definitions import tool_names
from tokenbench.imports.tool_run import ImportedRun, ToolPoint, ToolRequest, json_object
from tokenbench.records import TokenSource

TOOL = "aiperf"
VERSIONS = ("0.13.0",)  # the versions whose files this reader was written against
AGGREGATE = "profile_export_aiperf.json"
PER_REQUEST = "profile_export.jsonl"
# AIPerf's --endpoint-type -> tokenbench's API
APIS = {"chat": "chat", "completions": "completions"}
# Record keys AIPerf keeps nothing of (beside the tokenbench-only ones)
NOT_RECORDED = ("scheduled_s", "finish_reason", "cached_prompt_tokens", "chunk_tokens", "response_id", "status")


def read(path: Path) -> ImportedRun | None:
    """``path`` (the artifacts directory, or either of its two files) read, or None when it is
    not AIPerf's output."""
    directory = path if path.is_dir() else path.parent
    if path.is_file() and path.name not in (AGGREGATE, PER_REQUEST):
        return None
    aggregate, per_request = directory / AGGREGATE, directory / PER_REQUEST
    if not aggregate.is_file():
        if path.is_dir() and per_request.is_file():
            raise BadInput(
                f"{path}: AIPerf's {PER_REQUEST} without its {AGGREGATE}: pass the whole artifacts directory"
            )
        return None
    data = json_object(aggregate)
    if data is None or "aiperf_version" not in data:
        return None
    version = str(data["aiperf_version"])
    if version not in VERSIONS:
        raise BadInput(f"{aggregate}: AIPerf {version}: tokenbench reads the files of AIPerf {', '.join(VERSIONS)}")
    if not per_request.is_file():
        raise BadInput(
            f"{directory}: AIPerf's results without {PER_REQUEST} (its requests): run aiperf profile with "
            f"--export-level records (the default) and pass its --artifact-dir"
        )
    config = data.get("input_config") or {}
    endpoint = config.get("endpoint") or {}
    kind = str(endpoint.get("type") or "chat")
    if kind not in APIS:
        raise BadInput(f"{aggregate}: AIPerf --endpoint-type {kind}: tokenbench imports {', '.join(APIS)}")
    models = (config.get("models") or {}).get("items") or [{}]
    urls = endpoint.get("urls") or [None]
    return ImportedRun(
        tool=TOOL,
        version=version,
        source=per_request,
        model=models[0].get("name"),
        url=urls[0],
        api=APIS[kind],
        points=[_point(data, config, per_request)],
        not_recorded=NOT_RECORDED,
    )


def _point(data: dict[str, Any], config: dict[str, Any], per_request: Path) -> ToolPoint:
    lines = [json.loads(line) for line in per_request.read_text().splitlines() if line.strip()]
    requests = [_request(r) for r in lines if (r.get("metadata") or {}).get("benchmark_phase") != "warmup"]
    requests.sort(key=lambda r: r.start_s)
    duration = data.get("benchmark_duration") or {}
    return ToolPoint(
        load=_load(config, len(requests)),
        requests=requests,
        figures=_figures(data),
        duration_s=_seconds(duration.get("avg"), str(duration.get("unit"))),
    )


def _load(config: dict[str, Any], n: int) -> LoadPoint:
    """The profiling phase's load in tokenbench's words: a request rate (poisson, constant or
    gamma arrivals) is an open loop, its --concurrency a cap; a concurrency alone is that many
    users, each sending its next when one ends."""
    phases = [p for p in config.get("phases") or [] if p.get("kind", "profiling") == "profiling"]
    phase = phases[0] if phases else {}
    cap = phase.get("concurrency")
    if phase.get("rate") is not None:
        kind = phase.get("type")
        arrival: Arrival = "constant" if kind == "constant" else "gamma" if kind == "gamma" else "poisson"
        burstiness = float(phase.get("smoothness") or 1.0)  # gamma's shape (aiperf/config/phases.py)
        return RateLoad(rate_per_s=float(phase["rate"]), arrival=arrival, burstiness=burstiness, max_concurrency=cap)
    return UsersLoad(users=int(cap or n or 1))


def _ms(metrics: dict[str, Any], key: str) -> float | None:
    entry = metrics.get(key)
    if not isinstance(entry, dict) or not isinstance(entry.get("value"), (int, float)):
        return None
    return _seconds(entry["value"], str(entry.get("unit")))


def _request(line: dict[str, Any]) -> ToolRequest:
    metadata, metrics = line.get("metadata") or {}, line.get("metrics") or {}
    error = line.get("error")
    text = None
    if error:
        text = str(error.get("message") or error.get("type") or error) if isinstance(error, dict) else str(error)
    elif metadata.get("was_cancelled"):
        text = "cancelled by AIPerf"
    gaps = metrics.get("inter_chunk_latency") or {}
    unit = str(gaps.get("unit"))
    output = metrics.get("output_sequence_length", {}).get("value")
    prompt = metrics.get("input_sequence_length", {}).get("value")
    return ToolRequest(
        start_s=int(metadata["request_start_ns"]) / 1e9,
        latency_s=_ms(metrics, "request_latency") if text is None else None,
        ttft_s=_ms(metrics, "time_to_first_token"),
        chunk_gaps_s=tuple(_seconds(g, unit) or 0.0 for g in gaps.get("value") or ()),
        prompt_tokens=int(prompt) if prompt is not None else None,
        output_tokens=int(output) if output is not None and text is None else None,
        # AIPerf counts the reply's text with its tokenizer (the server's usage with --use-server-token-count)
        output_tokens_from=TokenSource.TOKENIZER,
        error=text,
    )


_SCALE = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "sec": 1.0, "s": 1.0}


def _seconds(value: Any, unit: str) -> float | None:
    """A time in AIPerf's unit in seconds, a rate (requests/sec, tokens/sec) as it is."""
    if not isinstance(value, (int, float)):
        return None
    return float(value) * _SCALE.get(unit, 1.0)


def _figures(data: dict[str, Any]) -> dict[str, float]:
    """AIPerf's headline figures by tokenbench metric key, in seconds and per second: its tool
    names are ``metric.stat`` (``time_to_first_token.avg``)."""
    out = {}
    for key, name in tool_names(TOOL).items():
        metric, _, stat = name.partition(".")
        entry = data.get(metric)
        if isinstance(entry, dict):
            value = _seconds(entry.get(stat), str(entry.get("unit")))
            if value is not None:
                out[key] = value
    return out
