"""An imported run as a tokenbench run directory: config.json, records.jsonl and samples.jsonl
with each point's span, then results.json derived by the path a native run's goes through
(rundir.derive), with the tool's own figures and the differences in ``imported``."""

from __future__ import annotations

import hashlib
import json
from array import array
from pathlib import Path

from tokenbench import __version__
from tokenbench.config import RunConfig, StopConfig, TargetConfig
from tokenbench.imports.definitions import aggregate_figures, compare_figures
from tokenbench.imports.tool_run import ImportedRun, ToolPoint, ToolRequest
from tokenbench.metrics.stats import distribution
from tokenbench.records import Outcome, RequestRecord
from tokenbench.results import RunResults
from tokenbench.results.imported import Imported, ImportedPoint
from tokenbench.results.layout import SAMPLES
from tokenbench.results.manifest import PointEnd, PointStart, RunManifest, TargetFacts
from tokenbench.results.run import Clock, Tool
from tokenbench.rundir import RunWriter, write_json
from tokenbench.rundir.derive import recompute_run


def _record(point: int, index: int, r: ToolRequest, origin: float) -> RequestRecord:
    start = r.start_s - origin
    chunks = array("d")
    if r.ttft_s is not None:
        t = start + r.ttft_s
        chunks.append(t)
        for gap in r.chunk_gaps_s:
            t += gap
            chunks.append(t)
        if r.closing_chunk and chunks:
            chunks.pop()
        if r.opening_chunk and chunks:
            chunks.pop(0)
    ok = r.error is None and r.latency_s is not None
    closed = start + r.latency_s if r.latency_s is not None else (chunks[-1] if chunks else start)
    outcome = Outcome.OK if ok else r.failure
    if ok and not chunks:
        outcome = Outcome.NO_OUTPUT
    return RequestRecord(
        point=point,
        id=index,
        scheduled_s=start,
        sent_s=start,
        chunk_times_s=chunks,
        end_s=chunks[-1] if chunks else None,
        closed_s=closed,
        outcome=outcome,
        error=r.error or (None if ok else "the tool recorded a failure"),
        prompt_tokens=r.prompt_tokens,
        output_tokens=r.output_tokens,
        output_tokens_source=r.output_tokens_from if r.output_tokens is not None else None,
        end_marker=ok,
    )


def write_run_dir(run: ImportedRun, out: Path) -> RunResults:
    """``run`` as a run directory at ``out`` (fresh), results.json derived by tokenbench's own
    definitions, with the tool's figures and the differences in ``imported``."""
    config = RunConfig(
        target=TargetConfig(url=run.url or "http://imported.invalid", model=run.model, api=run.api),  # type: ignore[arg-type]
        loads=[p.load for p in run.points],
        # what stopped the tool's load: its requests, every one sent
        stop=StopConfig(max_requests=max(1, max(_sent(p) for p in run.points)), drain_timeout_s=0),
        live=False,
        out_dir=out,
    )
    starts = [r.start_s for p in run.points for r in p.requests]
    origin = min(starts) if starts else 0.0
    writer = RunWriter(out)
    try:
        manifest = RunManifest(
            config=config,
            resolved_target=TargetFacts(url=run.url, model=run.model, api=run.api),  # type: ignore[arg-type]
            tool=Tool(name=run.tool, version=run.version),  # what measured it; computed_by: tokenbench
            # the tool's own clock, its first send at 0; on the wall clock where the file says
            # (0: it does not)
            clock=Clock(origin_monotonic_s=origin, origin_unix_s=run.started_unix_s or 0.0, unit="s"),
        )
        writer.write_config(manifest)
        events = []
        for i, point in enumerate(run.points):
            records = [_record(i, k, r, origin) for k, r in enumerate(point.requests)]
            writer.write_records(records)
            first = min((r.scheduled_s for r in records), default=0.0)
            last_send = max((r.scheduled_s for r in records), default=first)
            end = max((r.closed_s or r.scheduled_s for r in records), default=first)
            start = PointStart(index=i, load=point.load, start_s=first, ramp_end_s=first, window_start_s=first)
            events.append(start.to_json())
            events.append(
                PointEnd(
                    index=i,
                    load=point.load,
                    start_s=first,
                    ramp_end_s=first,
                    window_start_s=first,
                    load_end_s=max(last_send, first + (point.duration_s or 0.0)),
                    end_s=end,
                    interrupted=False,
                    num_records=len(records),
                ).to_json()
            )
    finally:
        writer.close()
    (out / SAMPLES).write_text("".join(json.dumps(e) + "\n" for e in events))
    results = recompute_run(out)
    results = _without_record_figures(results) if run.aggregate_only else _without_unknown_gaps(run, results)
    (out / "results.previous.json").unlink(missing_ok=True)
    imported = imported_facts(run, results)
    results = results.model_copy(update={"imported": imported})
    write_json(out / "results.json", results.to_json())
    return results


def _sent(point: ToolPoint) -> int:
    """The requests the tool sent at a point: its records, or its own count where it kept none."""
    return len(point.requests) or point.requests_total or 0


def _without_record_figures(results: RunResults) -> RunResults:
    """An aggregate-only import's points: no records, so no rate, concurrency or time series of
    tokenbench's (derive's zeros over no records would read as a server that served nothing)."""
    empty: dict[str, object] = {
        "output_tokens_per_s": None,
        "total_tokens_per_s": None,
        "requests_per_s": None,
        "goodput_per_s": None,
        "good_fraction": None,
        "fluidity": None,
        "steady_state": None,
        "timeseries": [],
    }
    points = [
        p.model_copy(update={**empty, "concurrency": p.concurrency.model_copy(update={"mean": None})})
        for p in results.points
    ]
    return results.model_copy(update={"points": points})


def _without_unknown_gaps(run: ImportedRun, results: RunResults) -> RunResults:
    """A point whose tool kept only each request's first and last chunk (ToolRequest.ends_only)
    has no ITL and no fluidity: the one gap its records hold spans the whole reply."""
    points = [
        point.model_copy(update={"itl_s": distribution(()), "fluidity": None})
        if any(r.ends_only for r in tool_point.requests)
        else point
        for tool_point, point in zip(run.points, results.points)
    ]
    return results.model_copy(update={"points": points})


def _sha256(source: Path) -> str:
    """A file's digest; a directory's (a directory of reports): over its files' names and bytes."""
    if not source.is_dir():
        return hashlib.sha256(source.read_bytes()).hexdigest()
    h = hashlib.sha256()
    for f in sorted(p for p in source.iterdir() if p.is_file()):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def imported_facts(run: ImportedRun, results: RunResults) -> Imported:
    """What results.json says of the import: the file, the tool, and per point each of the tool's
    figures beside tokenbench's over the same requests, with the definition that explains a gap."""
    digest = _sha256(run.source)
    points = []
    for tool_point, point in zip(run.points, results.points):
        if run.aggregate_only:
            figures = aggregate_figures(run.measured_by, tool_point.figures, tool_point.figure_names)
            counts = {"requests": tool_point.requests_total, "failures": tool_point.requests_failed}
        else:
            plain = not any(r.opening_chunk or r.closing_chunk for r in tool_point.requests)
            figures, counts = compare_figures(run.tool, tool_point.figures, point, plain), {}
        points.append(ImportedPoint(index=point.index, figures=figures, warnings=list(tool_point.warnings), **counts))
    return Imported(
        tool=run.tool,
        version=run.version,
        file=run.source.name,
        sha256=digest,
        imported_by=__version__,
        not_recorded=list(run.not_recorded),
        points=points,
        aggregate_only=run.aggregate_only,
        measured_by=run.measured_by,
    )
