"""GuideLLM's ``guidellm run --output kind=json`` (benchmarks.json): one JSON report, one point per
benchmark in ``benchmarks[]``.

Fields read, as GuideLLM 0.8.1 writes them (guidellm/benchmark/schemas/report.py, benchmark.py,
metrics.py; guidellm/schemas/base/request_stats.py): ``metadata.guidellm_version``,
``config.spec.backend`` (``target``, ``model``, ``request_format``), ``config.spec.profile``
(``max_concurrency`` as asked), and per benchmark ``config.strategy`` (``type_``, ``rate``,
``streams``, ``max_concurrency``), ``duration``, ``warmup_duration``, ``cooldown_duration``, the
``metrics`` summaries (``successful`` of each) and ``requests.successful / errored / incomplete``,
each request's ``info.timings`` (``request_start``: the first request header written, httpx's
trace; ``first_token_iteration`` and ``last_token_iteration``: the first and last SSE line with
content; ``request_end``: when the stream closed), ``info.error``, ``prompt_tokens`` and
``output_tokens`` (the server's usage; GuideLLM's count of content iterations without one).

GuideLLM keeps no per-chunk times: only a request's first and last content chunk. A record has
those two (``ToolRequest.ends_only``): TTFT, E2E and TPOT are tokenbench's over them; the pooled
ITL (every gap between chunks) is not recorded, and tokenbench's ITL of an imported point is
empty. Incomplete requests (in flight when GuideLLM's benchmark ended: status "cancelled") are
imported as failed, with GuideLLM's status as their error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenbench.config import Arrival, LoadPoint, RateLoad, UsersLoad
from tokenbench.errors import BadInput
from tokenbench.imports.definitions import tool_names
from tokenbench.imports.tool_run import ImportedRun, ToolPoint, ToolRequest, json_object
from tokenbench.records import TokenSource

TOOL = "guidellm"
VERSIONS = ("0.8.1",)  # the versions whose benchmarks.json this reader was written against
# --backend request_format -> tokenbench's API
APIS = {"/v1/chat/completions": "chat", "/v1/completions": "completions", "/v1/responses": "responses"}
RATES: dict[str, Arrival] = {"constant": "constant", "poisson": "poisson"}
# Record keys GuideLLM keeps nothing of: its requests' own schedule is kept (targeted_start) but
# tokenbench's record starts at the send, and the HTTP status and finish reason are not kept
NOT_RECORDED = ("chunk_times_s (between the first and the last)", "finish_reason", "status")


def read(path: Path) -> ImportedRun | None:
    """``path`` read, or None when it is not a GuideLLM report."""
    data = json_object(path)
    if data is None or "benchmarks" not in data:
        return None
    meta = data.get("metadata")
    if not isinstance(meta, dict) or "guidellm_version" not in meta:
        return None
    version = str(meta["guidellm_version"])
    if version not in VERSIONS:
        raise BadInput(
            f"{path}: GuideLLM {version}'s report: tokenbench reads GuideLLM {', '.join(VERSIONS)}'s "
            f"benchmarks.json; run guidellm=={VERSIONS[-1]}"
        )
    benchmarks = data["benchmarks"] or []
    if not benchmarks or any(not _requests(b) for b in benchmarks):
        raise BadInput(
            f"{path}: a GuideLLM report without its requests (benchmarks[].requests empty): give the "
            f"benchmarks.json of a guidellm run (--output kind=json) that sent requests"
        )
    spec = (data.get("config") or {}).get("spec") or {}
    backend = spec.get("backend") or {}
    fmt = str(backend.get("request_format") or "/v1/chat/completions")
    if fmt not in APIS:
        raise BadInput(f"{path}: GuideLLM request_format {fmt}: tokenbench imports {', '.join(APIS)}")
    cap = (spec.get("profile") or {}).get("max_concurrency")
    return ImportedRun(
        tool=TOOL,
        version=version,
        source=path,
        model=backend.get("model") or None,
        url=backend.get("target"),
        api=APIS[fmt],
        points=[_point(path, b, cap) for b in benchmarks],
        not_recorded=NOT_RECORDED,
    )


def _requests(benchmark: dict[str, Any]) -> list[dict[str, Any]]:
    """The benchmark's requests, each status group in turn, in start order."""
    groups = benchmark.get("requests") or {}
    out = [r for status in ("successful", "errored", "incomplete") for r in groups.get(status) or ()]
    return sorted(out, key=lambda r: _t(r, "request_start") or _t(r, "resolve_start") or 0.0)


def _point(path: Path, benchmark: dict[str, Any], cap: int | None) -> ToolPoint:
    """Its strategy in tokenbench's words: constant and poisson rates an open loop (capped where
    the profile asked a max_concurrency; the strategy's own is GuideLLM's worker limit);
    concurrent N streams, synchronous one, throughput its max_concurrency: that many users, each
    sending its next when one ends."""
    strategy = (benchmark.get("config") or {}).get("strategy") or {}
    kind = str(strategy.get("type_"))
    load: LoadPoint
    if kind in RATES:
        load = RateLoad(rate_per_s=float(strategy["rate"]), arrival=RATES[kind], max_concurrency=cap)
    elif kind == "concurrent":
        load = UsersLoad(users=int(strategy["streams"]))
    elif kind == "synchronous":
        load = UsersLoad(users=1)
    elif kind == "throughput":
        load = UsersLoad(users=int(strategy.get("max_concurrency") or len(_requests(benchmark)) or 1))
    else:
        raise BadInput(
            f"{path}: GuideLLM strategy {kind}: tokenbench imports {', '.join([*RATES, 'concurrent', 'synchronous', 'throughput'])}"
        )
    return ToolPoint(
        load=load,
        requests=[_request(r) for r in _requests(benchmark)],
        figures=_figures(benchmark),
        duration_s=benchmark.get("duration"),
        warnings=_warnings(benchmark, load),
    )


# a request whose target time lies this long before its benchmark began was never on schedule
LATE_TARGET_S = 1.0
# a schedule sent this much faster than its rate is another load than the one named
OVER_RATE = 1.5


def _warnings(benchmark: dict[str, Any], load: LoadPoint) -> tuple[str, ...]:
    """GuideLLM's own warnings of the benchmark, and a rate schedule it did not keep: in 0.8.1 a
    Poisson run can read its arrivals' shared offset before it is set (still -1, in
    ``AsyncPoissonStrategy.init_processes_start``, guidellm/scheduler/strategies.py), so its
    requests' ``targeted_start`` are seconds after the Unix epoch, every one is late, and each goes
    as soon as a worker is free: a burst, not the rate asked."""
    out = [f"GuideLLM: {w}" for w in benchmark.get("warnings") or () if isinstance(w, str)]
    if not isinstance(load, RateLoad):
        return tuple(out)
    requests = _requests(benchmark)
    started = benchmark.get("start_time")
    targets = [t for t in (_t(r, "targeted_start") for r in requests) if t is not None]
    sends = sorted(t for t in (_t(r, "request_start") for r in requests) if t is not None)
    if isinstance(started, (int, float)) and targets and min(targets) < started - LATE_TARGET_S:
        late = sum(t < started - LATE_TARGET_S for t in targets)
        out.append(
            f"GuideLLM's schedule did not start with the benchmark: {late} of {len(targets)} requests were "
            f"due before it began (targeted_start from {min(targets):.1f} s, the benchmark at {started:.1f} s), "
            "so each went as soon as a worker was free"
        )
    if len(sends) > 2 and sends[-1] > sends[0]:
        sent_rate = (len(sends) - 1) / (sends[-1] - sends[0])
        if sent_rate > OVER_RATE * load.rate_per_s:
            out.append(
                f"GuideLLM sent {sent_rate:.2f} req/s for the {load.rate_per_s:g} req/s asked: these figures are "
                "of that load, not of the rate the point names"
            )
    return tuple(out)


def _t(r: dict[str, Any], name: str) -> float | None:
    value = ((r.get("info") or {}).get("timings") or {}).get(name)
    return float(value) if isinstance(value, (int, float)) else None


def _request(r: dict[str, Any]) -> ToolRequest:
    info = r.get("info") or {}
    start = _t(r, "request_start") or _t(r, "resolve_start") or 0.0
    first, last, end = _t(r, "first_token_iteration"), _t(r, "last_token_iteration"), _t(r, "request_end")
    status = str(info.get("status") or "")
    error = info.get("error") or (None if status == "completed" else f"GuideLLM status {status or 'unknown'}")
    output = r.get("output_tokens")
    from_usage = (r.get("output_metrics") or {}).get("total_tokens") is not None
    return ToolRequest(
        start_s=start,
        latency_s=end - start if end is not None and error is None else None,
        ttft_s=first - start if first is not None else None,
        # its only gap: the first content chunk's to the last (none recorded between)
        chunk_gaps_s=(last - first,) if first is not None and last is not None and last > first else (),
        prompt_tokens=r.get("prompt_tokens"),
        output_tokens=output if error is None else None,
        # the server's usage; without one GuideLLM counts its content iterations, one token each
        output_tokens_from=TokenSource.SERVER if from_usage else TokenSource.CHUNKS,
        error=str(error) if error is not None else None,
        ends_only=True,
    )


def _figures(benchmark: dict[str, Any]) -> dict[str, float]:
    """GuideLLM's headline figures (its successful requests' summaries) by tokenbench metric key,
    in seconds and per second: ``name.stat`` in metrics, ``_ms`` ones divided by 1000."""
    metrics = benchmark.get("metrics") or {}
    out = {}
    for key, name in tool_names(TOOL).items():
        metric, stat = name.rsplit(".", 1)
        summary = (metrics.get(metric) or {}).get("successful") or {}
        value = summary.get(stat) if stat in ("mean", "median") else (summary.get("percentiles") or {}).get(stat)
        if isinstance(value, (int, float)):
            out[key] = value / 1e3 if metric.endswith("_ms") else float(value)
    return out
