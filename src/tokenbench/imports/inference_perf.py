"""inference-perf's report directory (``inference-perf --config_file FILE``, its
``storage.local_storage.path``): one point per load stage.

Files read, as inference-perf 0.7.0 writes them (inference_perf/reportgen/base.py
``ReportGenerator.generate_reports``, ``summarize_requests``, ``build_per_request_lifecycle_entry``;
inference_perf/config/): ``config.yaml`` (the run's whole config as it ran: ``api.type`` chat or
completion, ``api.streaming``, ``load.type`` constant / poisson / concurrent and its ``stages``,
``server.model_name`` and ``base_url``, ``report.request_lifecycle``), ``stage_N_lifecycle_metrics.json``
(one a stage: ``load_summary.count``, ``requested_rate``, ``concurrency``; ``benchmark_time_seconds``;
``successes.latency.<metric>.mean / median / pN`` in seconds; ``successes.throughput``;
``failures``), ``per_request_lifecycle_metrics.json`` (written only with
``report.request_lifecycle.per_request: true``: a list, not in start order, each with
``start_time`` and ``end_time`` (time.perf_counter(): just before the POST, and after the stream
closed and the response was released; client/modelserver/openai_client.py),
``info.request_metrics.text.input_tokens`` (its tokenizer's count of the prompt),
``info.response_metrics`` (``chunk_times``: the arrival of each SSE event with content, a role-only
delta, the usage chunk and [DONE] excluded (apis/streaming_parser.py); ``output_tokens``: its
tokenizer's count of the reply's text; ``server_usage``: the server's usage) and ``error``
(``error_type``, ``error_msg``)) and, for the wall clock, ``inference-perf.partial.stage_0.yaml``
(``run.time.start``: stage 0's start, time.time()).

The files name no inference-perf version. A report is read as 0.7.0's when its files hold what
0.7.0 writes and older versions did not (``successes.client_fallback_requests`` in a stage's
summary, ``load.stage_teardown_grace_seconds`` in its config); one without is refused.
The per-request file has no stage id: its requests, in start order, are dealt to the stages in
turn by each stage's ``load_summary.count`` (stages run one after another). It keeps no request's
scheduled time (its stage summaries keep only their ``schedule_delay`` distribution).
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML is not a dependency)

from tokenbench.config import Arrival, LoadPoint, RateLoad, UsersLoad
from tokenbench.errors import BadInput
from tokenbench.imports.definitions import tool_names
from tokenbench.imports.tool_run import ImportedRun, ToolPoint, ToolRequest, json_object
from tokenbench.records import Outcome, TokenSource

TOOL = "inference-perf"
VERSION = "0.7.0"  # the version whose report directory this reader was written against
CONFIG = "config.yaml"
SUMMARY = "summary_lifecycle_metrics.json"
PER_REQUEST = "per_request_lifecycle_metrics.json"
STAGE = re.compile(r"stage_(\d+)_lifecycle_metrics\.json")
WALL_CLOCK = "inference-perf.partial.stage_0.yaml"
# inference-perf's api.type -> tokenbench's API
APIS = {"chat": "chat", "completion": "completions"}
RATES: dict[str, Arrival] = {"constant": "constant", "poisson": "poisson"}
# Record keys inference-perf keeps nothing of, per request (its stage summaries keep the
# schedule delay's distribution, not each request's; the HTTP status is in the error's text)
NOT_RECORDED = ("scheduled_s", "finish_reason", "cached_prompt_tokens", "chunk_tokens", "response_id", "status")


def read(path: Path) -> ImportedRun | None:
    """``path`` (the report directory, or one of its lifecycle files) read, or None when it is
    not inference-perf's output."""
    directory = path if path.is_dir() else path.parent
    if path.is_file() and path.name not in (SUMMARY, PER_REQUEST) and not STAGE.fullmatch(path.name):
        return None
    summary = json_object(directory / SUMMARY)
    config_file = directory / CONFIG
    if summary is None or not {"load_summary", "successes", "failures"} <= summary.keys() or not config_file.is_file():
        return None
    try:
        config = yaml.safe_load(config_file.read_text()) or {}
    except yaml.YAMLError as exc:
        raise BadInput(f"{config_file}: not inference-perf's config.yaml (YAML: {exc})") from None
    _check_version(directory, summary, config)
    load = config.get("load") or {}
    api = config.get("api") or {}
    lifecycle = (config.get("report") or {}).get("request_lifecycle") or {}
    if not (directory / PER_REQUEST).is_file() or not (lifecycle.get("per_request_fields") or {}).get("info", True):
        raise BadInput(
            f"{directory}: inference-perf's report without {PER_REQUEST} (its requests): run it with "
            f"report.request_lifecycle.per_request: true (and per_request_fields.info left true)"
        )
    if not api.get("streaming"):
        raise BadInput(
            f"{directory}: inference-perf ran with api.streaming false: it times no chunk; tokenbench imports "
            f"streaming runs (api.streaming: true)"
        )
    kind = str(api.get("type") or "completion")
    if kind not in APIS:
        raise BadInput(f"{config_file}: inference-perf api.type {kind}: tokenbench imports {', '.join(APIS)}")
    load_type = str(load.get("type") or "constant")
    if load_type not in (*RATES, "concurrent"):
        raise BadInput(
            f"{config_file}: inference-perf load.type {load_type}: tokenbench imports {', '.join([*RATES, 'concurrent'])}"
        )
    server = config.get("server") or {}
    return ImportedRun(
        tool=TOOL,
        version=VERSION,
        source=directory / PER_REQUEST,
        model=server.get("model_name"),
        url=server.get("base_url"),
        api=APIS[kind],
        points=_points(directory, load_type),
        not_recorded=NOT_RECORDED,
        started_unix_s=_started(directory),
    )


def _check_version(directory: Path, summary: dict[str, Any], config: dict[str, Any]) -> None:
    """BadInput unless the report holds what 0.7.0's does (its files name no version)."""
    missing = []
    if "client_fallback_requests" not in (summary.get("successes") or {}):
        missing.append(f"{SUMMARY}: successes.client_fallback_requests")
    if "stage_teardown_grace_seconds" not in (config.get("load") or {}):
        missing.append(f"{CONFIG}: load.stage_teardown_grace_seconds")
    if missing:
        raise BadInput(
            f"{directory}: an inference-perf report of another version (it lacks {'; '.join(missing)}): "
            f"tokenbench reads inference-perf {VERSION}'s; run inference-perf=={VERSION}"
        )


def _stages(directory: Path) -> list[dict[str, Any]]:
    """Each stage's summary, by stage id."""
    found = {int(m.group(1)): p for p in directory.iterdir() if (m := STAGE.fullmatch(p.name))}
    out = []
    for i in sorted(found):
        data = json_object(found[i])
        if data is None:
            raise BadInput(f"{found[i]}: not an inference-perf stage summary (a JSON object)")
        out.append(data)
    return out


def _points(directory: Path, load_type: str) -> list[ToolPoint]:
    """The stages, each with its share of the requests: in start order, each stage's
    ``load_summary.count`` in turn."""
    stages = _stages(directory)
    if not stages:
        raise BadInput(
            f"{directory}: inference-perf's report without stage_N_lifecycle_metrics.json: run it with "
            f"report.request_lifecycle.per_stage: true (the default)"
        )
    entries = json.loads((directory / PER_REQUEST).read_text())
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and {"start_time", "end_time"} <= e.keys() for e in entries
    ):
        raise BadInput(
            f"{directory / PER_REQUEST}: not inference-perf's per-request report (a JSON list of requests, "
            f"each with start_time and end_time)"
        )
    entries.sort(key=lambda e: float(e["start_time"]))
    counts = [int((s.get("load_summary") or {}).get("count") or 0) for s in stages]
    if sum(counts) != len(entries):
        raise BadInput(
            f"{directory}: its stages count {sum(counts)} requests, {PER_REQUEST} holds {len(entries)}: "
            f"give the files of one inference-perf run"
        )
    points, first = [], 0
    for stage, count in zip(stages, counts):
        requests = [_request(e) for e in entries[first : first + count]]
        first += count
        points.append(
            ToolPoint(
                load=_load(stage, load_type),
                requests=requests,
                figures=_figures(stage),
                duration_s=stage.get("benchmark_time_seconds"),
            )
        )
    return points


def _load(stage: dict[str, Any], load_type: str) -> LoadPoint:
    """A constant or poisson stage is an open loop at its rate. A concurrent one enqueues its
    num_requests within its first second (main.py sets the stage's rate to num_requests over 1 s)
    with at most concurrency_level in flight: as many users as that level, each sending its next
    when one ends."""
    summary = stage.get("load_summary") or {}
    if load_type == "concurrent":
        return UsersLoad(users=int(summary.get("concurrency") or 1))
    return RateLoad(rate_per_s=float(summary["requested_rate"]), arrival=RATES[load_type])


def _request(entry: dict[str, Any]) -> ToolRequest:
    info = entry.get("info") or {}
    response = info.get("response_metrics") or {}
    usage = response.get("server_usage") or {}
    error = entry.get("error")
    start = float(entry["start_time"])
    chunks = [float(t) for t in response.get("chunk_times") or ()]
    # the server's usage where it sent one; inference-perf's tokenizer over the text otherwise
    output = usage.get("completion_tokens")
    source = TokenSource.SERVER
    if output is None and response.get("output_tokens") is not None:
        output, source = response["output_tokens"], TokenSource.TOKENIZER
    prompt = usage.get("prompt_tokens", ((info.get("request_metrics") or {}).get("text") or {}).get("input_tokens"))
    text = None
    if error:
        text = f"{error.get('error_type')}: {error.get('error_msg')}" if isinstance(error, dict) else str(error)
    return ToolRequest(
        start_s=start,
        latency_s=float(entry["end_time"]) - start if text is None else None,
        ttft_s=chunks[0] - start if chunks else None,
        chunk_gaps_s=tuple(b - a for a, b in zip(chunks, chunks[1:])),
        # a request that failed before its reply counts its prompt as 0 (its process_failure): unknown
        prompt_tokens=int(prompt) if prompt is not None and (text is None or prompt) else None,
        output_tokens=int(output) if output is not None and text is None else None,
        output_tokens_from=source,
        error=text,
        failure=_failure(error) if isinstance(error, dict) else Outcome.STREAM_ERROR,
    )


def _failure(error: dict[str, Any]) -> Outcome:
    """How a request failed, from inference-perf's ``error_type``: ``HTTP Error <status>`` for a
    non-200 answer, "TimeoutError", or the exception's class name (aiohttp's for the connection and
    the stream) (client/modelserver/openai_client.py)."""
    kind = str(error.get("error_type") or "")
    if kind.startswith("HTTP Error"):
        return Outcome.HTTP_ERROR
    if "Timeout" in kind:
        return Outcome.TIMEOUT
    if kind in ("ClientConnectorError", "ClientConnectorCertificateError", "ClientConnectorSSLError"):
        return Outcome.CONNECT_ERROR
    return Outcome.STREAM_ERROR


def _started(directory: Path) -> float | None:
    """Stage 0's start on the wall clock (its BR0.2 partial's ``run.time.start``; the first send
    follows within an arrival gap); None without the file."""
    path = directory / WALL_CLOCK
    if not path.is_file():
        return None
    try:
        start = (yaml.safe_load(path.read_text()) or {})["run"]["time"]["start"]
        return datetime.datetime.fromisoformat(str(start).replace("Z", "+00:00")).timestamp()
    except (KeyError, TypeError, ValueError, yaml.YAMLError):
        return None


def _figures(stage: dict[str, Any]) -> dict[str, float]:
    """inference-perf's headline figures of a stage (its successful requests) by tokenbench
    metric key, already in seconds and per second: its names are the summary's paths
    (``successes.latency.time_to_first_token.mean``)."""
    out = {}
    for key, name in tool_names(TOOL).items():
        value: Any = stage
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, (int, float)):
            out[key] = float(value)
    return out
