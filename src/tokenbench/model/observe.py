"""Runs on disk -> what the fit reads: each point's finished requests as arrays (sent, first and last
token, chunks, prompt and output tokens), the run's launch knobs and the server's KV gauge.

A directory argument is a run (config.json + records.jsonl) or holds runs below it (an experiment:
every cell's run directory)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tokenbench.errors import BadInput
from tokenbench.records import RequestRecord
from tokenbench.results import PointResult
from tokenbench.results.layout import CONFIG, RECORDS, SAMPLES
from tokenbench.results.manifest import load_manifest
from tokenbench.rundir import RecordSlice, point_ranges
from tokenbench.rundir.read import read_results
from tokenbench.telemetry.sampler import SamplesFile

FloatArray = np.ndarray[Any, np.dtype[np.float64]]
# A limited client's lag over this share of a point's median TTFT may be in its TTFTs
LAG_SHARE = 0.05
PREDICTED_URL = "model:"  # a prediction's resolved target URL: model:<the model file>


@dataclass(frozen=True)
class PointObs:
    """A point's finished requests (ok, at least one chunk), sorted by send time."""

    run: str
    index: int
    label: str
    sent: FloatArray
    first: FloatArray
    last: FloatArray
    chunks: FloatArray  # content chunks (one decode step each)
    prompt: FloatArray
    output: FloatArray
    kv_scrapes: list[tuple[float, float]]  # (t, KV usage fraction) inside the point
    prompt_extra: FloatArray  # the server's prompt tokens less the dataset's (chat template, system prompt)
    client_limited: bool = False  # results.json: the client did not keep up, by a lag its TTFTs may hold
    # prompt tokens the server reused from its cache, as it said (llama.cpp's timings.cache_n, an
    # OpenAI usage's cached_tokens); NaN where it did not say; None: no request said
    cached: FloatArray | None = None

    @property
    def n(self) -> int:
        return len(self.sent)

    @property
    def prefilled(self) -> FloatArray:
        """The prompt tokens each request's prefill computed: its prompt less what the server reused
        from its cache (llama.cpp reuses the chat template's ~24 tokens from a slot's last prompt:
        joint prefills of 70 computed tokens each cost 3.95 ms a token, one of 94 with none reused
        3.84, where the whole prompts made three joint ones look 20% cheaper than one)."""
        if self.cached is None:
            return self.prompt
        out: FloatArray = self.prompt - np.nan_to_num(self.cached, nan=0.0)
        return out


@dataclass(frozen=True)
class RunObs:
    name: str
    points: list[PointObs]
    server: dict[str, Any]  # Any: ServerFacts as JSON (engine, model, knobs)
    knobs: dict[str, Any]  # Any: the launch knobs as config.json wrote them


def run_dirs(paths: list[Path]) -> list[Path]:
    """Every run directory at or below ``paths`` (sorted, each once)."""
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise BadInput(f"{path}: no such directory (give run or experiment directories)")
        if (path / RECORDS).is_file() and (path / CONFIG).is_file():
            found.append(path)
            continue
        found += sorted(p.parent for p in path.rglob(RECORDS) if (p.parent / CONFIG).is_file())
    found = [d for d in found if not _predicted(d)]
    if not found:
        raise BadInput(f"no run directory (config.json + records.jsonl) in {', '.join(map(str, paths))}")
    return sorted(set(found))


def _predicted(run_dir: Path) -> bool:
    """A model's prediction (model predict / validate: its target is ``model:FILE``), never fitted on."""
    try:
        target = load_manifest(run_dir / CONFIG).resolved_target
    except (OSError, ValueError):
        return False
    return str(target.url or "").startswith(PREDICTED_URL)


def _arrays(records: list[RequestRecord]) -> tuple[FloatArray, ...]:
    rows = []
    for r in records:
        times = r.chunk_times_s
        if not r.ok or r.sent_s is None or len(times) == 0:
            continue
        prompt = r.prompt_tokens if r.prompt_tokens is not None else r.dataset_prompt_tokens
        out = r.output_tokens if r.output_tokens is not None else len(times)
        extra = prompt - r.dataset_prompt_tokens if prompt and r.dataset_prompt_tokens else math.nan
        cached = r.cached_prompt_tokens if r.cached_prompt_tokens is not None and prompt else math.nan
        rows.append((r.sent_s, times[0], times[-1], len(times), prompt or 0, out, extra, cached))
    rows.sort()
    cols = np.array(rows, dtype=float).reshape(-1, 8)
    return tuple(cols[:, i] for i in range(8))


def _client_limited(path: Path) -> dict[int, bool]:
    """Per point index, whether results.json says the client was limited in a way its TTFTs show
    (no file, or a run from before the client was sampled: none)."""
    try:
        results = read_results(path)
    except (OSError, ValueError):
        return {}
    return {p.index: lag_in_ttft(p) for p in results.points}


def lag_in_ttft(point: PointResult) -> bool:
    """A limited client whose lag may be in its TTFTs: short of CPU, or a loop or send lag p99 over
    LAG_SHARE of the point's median TTFT. A lag flag alone is not enough: beside vLLM CPU on 2
    cores a 4-user point's loop lag p99 was 17.5 ms (limited) against a median TTFT of 1.3 s, and
    leaving its rows out took the only 256-token prompts from the fit (prefill cost 1.51 -> 1.38 ms
    a token; the held-out 512-token TTFT -21.6% where it was +3.8%)."""
    client = point.client
    if client is None or not client.limited:
        return False
    if "cpu" in client.limited_by:
        return True
    lags = [lag for lag in (client.loop_lag_p99_s, client.send_lag_p99_s) if lag is not None]
    ttft = point.ttft_s.p50
    return not lags or not ttft or max(lags) > LAG_SHARE * ttft


def read_run(path: Path) -> RunObs:
    manifest = load_manifest(path / CONFIG)
    samples = SamplesFile(path / SAMPLES) if (path / SAMPLES).is_file() else None
    ends = {e.index: e for e in samples.point_ends()} if samples is not None else {}
    scrapes = samples.scrapes() if samples is not None else []
    kv = [
        (float(s["t_s"]), float(s["values"]["kv_usage"]))
        for s in scrapes
        if s.get("ok") and (s.get("values") or {}).get("kv_usage") is not None
    ]
    limited = _client_limited(path)
    points = []
    records_path = path / RECORDS
    for index, ranges in sorted(point_ranges(records_path).items()):
        sent, first, last, chunks, prompt, output, extra, cached = _arrays(list(RecordSlice(records_path, ranges)))
        if len(sent) == 0:
            continue
        event = ends.get(index)
        label = f"point {index}"
        if event is not None:
            from tokenbench.loadgen.schedule import describe

            label = describe(event.load)
        inside = [(t, u) for t, u in kv if sent[0] <= t <= last.max()]
        limited_here = limited.get(index, False)
        said = None if np.isnan(cached).all() else np.minimum(cached, np.maximum(prompt - 1, 0))
        points.append(
            PointObs(
                path.name, index, label, sent, first, last, chunks, prompt, output, inside, extra, limited_here, said
            )
        )
    backend = manifest.backend.to_json() if manifest.backend is not None else {}
    knobs = dict(backend.get("knobs") or {})
    if manifest.config.backend is not None:  # the knobs the run was told to launch with
        given = manifest.config.backend.knobs.model_dump(exclude_none=True)
        knobs = {**given, **knobs}
    backend.setdefault("model", manifest.resolved_target.model)
    return RunObs(str(path), points, backend, knobs)
