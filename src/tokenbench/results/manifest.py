"""What a run writes of itself beside its records, as types: config.json (``RunManifest``: the
settings and every resolved fact results.json is derived from) and the run's own events in
samples.jsonl (``PointStart`` when a load point starts, ``PointEnd`` with its span when it ends).
Each has one ``to_json``/``from_json`` pair; ``derive`` reads nothing else.

config.json's keys are a public interface: the settings (``RunConfig``, credentials masked) at its
top level, where ``backend`` holds the server's facts (``ServerFacts``: the settings' own backend
goes in ``backend_config``), then ``resolved_target``, ``dataset_info``, ``tool``, ``clock``,
``telemetry`` and, for a run of several workers, ``workers_facts``.

Old run directories read through ``load_manifest`` (config.json of any 0.x version: a key a
version did not write takes the default declared here once) and ``earlier_spans`` (a run from
before 0.2.0 logged no point events: its spans come from its old results.json).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_serializer, field_validator

from tokenbench.common.frozen import FrozenModel
from tokenbench.config import Api, LoadPoint, RunConfig
from tokenbench.config.target import ResolvedTarget
from tokenbench.errors import BadInput
from tokenbench.results import (
    Clock,
    DatasetFacts,
    ProgramCounts,
    SessionCounts,
    StoppedEarly,
    Telemetry,
    Tool,
    TracePointFacts,
)
from tokenbench.results.base import Number
from tokenbench.results.client import WorkerLoss, Workers
from tokenbench.results.served_model import ServedModel
from tokenbench.results.stopping import AutoStopFacts

# What config.json says of a server tokenbench knows nothing of (``ServerFacts.backend`` None):
# the public value results.json's ``target.backend`` has always had.
ATTACHED = "attached"


# What a prefix-cache reset before a point came to (backends/cache_control.py makes it).
ResetStatus = Literal["done", "not_supported", "failed", "not_requested"]


class ManifestError(BadInput):
    """A config.json that is not a tokenbench run's: the message names the file and what is wrong."""


class TargetFacts(FrozenModel):
    """What config.json says of the resolved target (config.target.ResolvedTarget, made by
    ``of``): its URL, the model requests named, the API they used; every key None in a
    config.json that did not say (before 0.2)."""

    url: str | None = None
    model: str | None = None
    api: Api | None = None
    continuous_usage: bool | None = None  # usage on every chunk was asked for; absent before it existed
    # the fields --response-format went in (config/constraints.py's Dialect); only when it was given
    structured_dialect: str | None = None
    # which model the server served, as far as it told (clients/served_model.py); absent before it was asked
    served_model: ServedModel | None = None

    @classmethod
    def of(cls, target: ResolvedTarget, served: ServedModel | None = None) -> TargetFacts:
        given: dict[str, Any] = {"structured_dialect": target.structured_dialect} if target.structured_dialect else {}
        if served is not None:
            given["served_model"] = served
        return cls(
            url=target.url, model=target.model, api=target.api, continuous_usage=target.continuous_usage, **given
        )


class ServerFacts(FrozenModel):
    """What a run knows of its server (backends.server): attached, only its profile's name and
    title; launched, its command, version and cold start. ``backend`` None: a server tokenbench
    knows nothing of (written ``"attached"`` in JSON, as it always was). Only the keys given are
    written (results.json's ``target`` spreads them)."""

    backend: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    cold_start_s: Number | None = None
    cold_start_includes: str | None = None
    command: list[str] | None = None
    command_env: dict[str, str] | None = None
    # the engine's knobs as that version dumped them (config.EngineKnobs); None: a serving layer's
    # (its engine, the upstream, has them). Any: a knob's value is whatever the knob's type is.
    knobs: dict[str, Any] | None = None
    engine_model: str | None = None
    log: str | None = None
    url: str | None = None  # only on an upstream engine: where the layer reached it
    upstream: ServerFacts | None = None  # a serving layer's engine, launched before it
    # a router's replicas, launched before it in this order: each one's facts and url
    replicas: list[ServerFacts] | None = None

    @field_validator("backend", mode="before")
    @classmethod
    def _attached(cls, v: object) -> object:
        return None if v == ATTACHED else v

    @field_serializer("backend")
    def _attached_json(self, v: str | None) -> str:
        return ATTACHED if v is None else v

    @classmethod
    def attached(cls, profile: str | None, title: str | None) -> ServerFacts:
        """A server the run attached to (--url): its profile's name and title, if it named one."""
        return cls(backend=profile, engine=title)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServerFacts:
        return cls.model_validate(data)


class RunManifest(FrozenModel):
    """config.json: the run's settings (``config``) and every fact resolved once the run started.
    A key absent from an older config.json takes the default declared here (or RunConfig's)."""

    config: RunConfig  # the settings as the run was given them, credentials masked
    resolved_target: TargetFacts = TargetFacts()
    backend: ServerFacts | None = None  # None: a config.json from before server facts were written
    dataset_info: DatasetFacts | None = None
    tool: Tool = Tool(name="tokenbench", version=None)
    clock: Clock | None = None  # None before 0.2.0: results.json had it
    telemetry: Telemetry | None = None
    workers_facts: Workers | None = None  # only a run whose load came from several workers

    def to_json(self) -> dict[str, Any]:
        """config.json: the settings' keys in their order (``backend``: the server's facts, in the
        place the settings' own backend had), then the run's facts."""
        data = self.config.redacted()
        backend_config = data["backend"]
        if self.backend is not None:
            data["backend"] = self.backend.to_json()
        else:
            del data["backend"]
        data["resolved_target"] = self.resolved_target.model_dump(mode="json", exclude_unset=True)
        if self.dataset_info is not None:  # the keys the dataset gave: no "trace" key but a trace's
            data["dataset_info"] = self.dataset_info.model_dump(mode="json", exclude_unset=True)
        data["tool"] = self.tool.model_dump(mode="json")
        for key, part in (("clock", self.clock), ("telemetry", self.telemetry), ("workers_facts", self.workers_facts)):
            if part is not None:
                data[key] = part.model_dump(mode="json")
        if backend_config is not None:
            data["backend_config"] = backend_config  # what the run was told to launch or attach as
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunManifest:
        """A config.json as a run of this version writes it (see ``load_manifest`` for any)."""
        settings = {k: v for k, v in data.items() if k not in _FACTS}
        settings["backend"] = data.get("backend_config")
        facts = {k: v for k, v in data.items() if k in _FACTS and k != "backend_config"}
        return cls.model_validate({"config": RunConfig.model_validate(settings), **facts})

    def with_workers(self, facts: Workers) -> RunManifest:
        """This manifest once the workers' clocks are known (config.json is rewritten)."""
        return self.model_copy(update={"workers_facts": facts})


# config.json's keys that are facts, not settings (RunManifest's own fields, and the settings' backend)
_FACTS = frozenset(RunManifest.model_fields) - {"config"} | {"backend_config"}


def load_manifest(path: Path) -> RunManifest:
    """config.json of any tokenbench version: a ManifestError names the file and what is wrong.
    Every 0.x layout is today's minus keys added since (each takes its declared default), and
    "attached" for an unknown server; a layout that differs otherwise is read here, by its
    ``tool.version``, before it is validated."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{path}: not readable as JSON: {exc}") from None
    if not isinstance(data, dict) or "stop" not in data or "loads" not in data:
        raise ManifestError(f"{path} is not a tokenbench run's config")
    try:
        return RunManifest.from_json(data)
    except ValidationError as exc:
        version = (data.get("tool") or {}).get("version")
        raise ManifestError(f"{path} (written by tokenbench {version or 'before 0.2'}): {_why(exc)}") from None


def _why(exc: ValidationError) -> str:
    """A validation error on one line: each key that is wrong, and what is wrong with it."""
    return "; ".join(f"{'.'.join(str(part) for part in e['loc']) or 'the file'}: {e['msg']}" for e in exc.errors())


class PrefixCacheReset(FrozenModel):
    """What the prefix-cache reset before a point did (backends.cache_control.CacheReset)."""

    status: ResetStatus
    detail: str | None = None


class _PointEvent(FrozenModel):
    """What a point's two events share: which point, its load, and where its span began. Only the
    keys given are written (a run of an older version wrote fewer)."""

    kind: str
    index: int
    load: LoadPoint
    start_s: Number
    ramp_end_s: Number
    window_start_s: Number
    # the reset in both events: a point the run never finished is derived from its start
    prefix_cache_reset: PrefixCacheReset | None = None  # None: a run from before resets were logged

    @field_serializer("load")
    def _whole_load(self, load: LoadPoint) -> dict[str, Any]:
        """The load written whole (every field, as a run always wrote it), whichever were given."""
        return load.model_dump(mode="json")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.model_dump(mode="json", exclude_unset=True)}


class PointStart(_PointEvent):
    """samples.jsonl's ``point_start``: a load point started."""

    kind: Literal["point_start"] = "point_start"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PointStart:
        return cls.model_validate(data)


class PointEnd(_PointEvent):
    """samples.jsonl's ``point``: a point's span once it ended; with the point's records, all its
    results need (derive.point_result)."""

    kind: Literal["point"] = "point"
    load_end_s: Number
    end_s: Number
    user_spans: list[tuple[Number, Number]] = []  # not kept before 0.2.0 (active_users is then null)
    interrupted: bool
    num_records: int | None = None  # None: a point the run never finished
    last_arrival_s: Number | None = None
    sessions: SessionCounts | None = None  # a --multi-turn point the process finished
    programs: ProgramCounts | None = None  # an agent-programs point the process finished
    trace: TracePointFacts | None = None  # a replay point the process finished: its use of the trace
    workers_lost: list[WorkerLoss] | None = None  # only a point during which a worker died
    stopped_early: StoppedEarly | None = None  # only a point the circuit breaker stopped (failfast.py)
    auto_stop: AutoStopFacts | None = None  # autostop: only a point that judged itself (autostop.py)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PointEnd:
        return cls.model_validate(data)

    @classmethod
    def unfinished(cls, start: PointStart, load_end_s: Number, end_s: Number) -> PointEnd:
        """The span of a point the run never finished, from its start event."""
        given = start.model_dump(exclude_unset=True, exclude={"kind"})
        return cls.model_validate(
            {**given, "load_end_s": load_end_s, "end_s": end_s, "user_spans": [], "interrupted": True}
        )


class _OldPart(BaseModel):
    """A part of a results.json from before 0.2.0: the keys read are declared, any other ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class _OldSpan(_OldPart):
    """A point's span in a results.json from before 0.2.0 (keys it had that are not read: ignored)."""

    start_s: Number
    ramp_end_s: Number
    load_end_s: Number
    end_s: Number


class _OldWindow(_OldPart):
    start_s: Number | None = None


class _OldPoint(_OldPart):
    index: int
    load: dict[str, Any]  # Any: the load's JSON with the stop settings beside (results.Load), parsed below
    span: _OldSpan
    window: _OldWindow = _OldWindow()
    interrupted: bool | None = None


class _OldResults(_OldPart):
    """What recompute needs of a results.json written before 0.2.0: its points' spans, its clock
    and where its telemetry went (config.json had neither)."""

    points: list[_OldPoint] = []
    clock: Clock | None = None
    telemetry: Telemetry | None = None


class EarlierRun(BaseModel):
    """A run from before 0.2.0, as its results.json tells it: each point's span and the facts its
    config.json lacked."""

    model_config = ConfigDict(frozen=True)

    spans: dict[int, PointEnd]
    clock: Clock | None
    telemetry: Telemetry | None


def earlier_spans(path: Path, warmup_s: float) -> EarlierRun:
    """Point spans from a results.json written before runs logged them in samples.jsonl: old runs
    re-derived with today's definitions (the users' spans were not kept)."""
    try:
        old = _OldResults.model_validate_json(Path(path).read_bytes())
    except ValidationError as exc:
        raise ManifestError(f"{path}: no point spans to recompute from: {_why(exc)}") from None
    spans = {}
    for p in old.points:
        load = {k: v for k, v in p.load.items() if k not in ("warmup_s", "duration_s", "max_requests")}
        window_start_s = p.window.start_s if p.window.start_s is not None else p.span.ramp_end_s + warmup_s
        spans[p.index] = PointEnd.model_validate(
            {
                "index": p.index,
                "load": load,
                **p.span.model_dump(),
                "window_start_s": window_start_s,
                "user_spans": [],
                "interrupted": bool(p.interrupted),
            }
        )
    return EarlierRun(spans=spans, clock=old.clock, telemetry=old.telemetry)
