"""The experiment file: one typed tree (pydantic), validated with errors that name the field, and
its expansion into server configurations and cells.

A *server configuration* is one backend entry with one combination of its swept knobs; it is
launched once. A *cell* is (server configuration, dataset variant, trial): one `tokenbench run`
with every load point, written to its own run directory.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML is not a dependency)
from pydantic import Field, ValidationError, field_validator, model_validator

from tokenbench.common.frozen import FrozenModel
from tokenbench.common.slug import slug
from tokenbench.config import (
    Api,
    BackendConfig,
    DatasetConfig,
    DeadlinesConfig,
    EngineKnobs,
    LoadPoint,
    LoadSweep,
    OutputConstraint,
    PrefixCacheMode,
    RunConfig,
    SessionConfig,
    StopConfig,
    TargetConfig,
)
from tokenbench.config.cost import CostConfig
from tokenbench.config.mix import DEFAULT_TENANT_HEADER, WorkloadMix
from tokenbench.config.slo import SLOConfig
from tokenbench.errors import BadInput
from tokenbench.experiments.search_spec import SearchSpec

_KNOBS = set(EngineKnobs.model_fields)


class BackendEntry(FrozenModel):
    """One backend to launch (``backend`` + ``model``) or to attach to (``url``)."""

    label: str | None = None  # default: the backend name (+ swept values)
    backend: str | None = None  # a profile name (tokenbench backends); with url: its metric names
    url: str | None = None  # attach instead of launching (knobs and sweeps are then refused)
    model: str | None = None
    served_model_name: str | None = None
    engine_bin: str | None = None
    upstream: str | None = None  # a serving layer's engine (BackendConfig.upstream), e.g. llamacpp
    layer_args: tuple[str, ...] = ()  # the layer's own settings (BackendConfig.layer_args)
    knobs: EngineKnobs = Field(default_factory=EngineKnobs)
    # knob -> values; every combination is one server configuration. engine_args may be swept
    # too (a list of argument lists), for engine-specific settings such as a KV cache in bytes.
    sweep: dict[str, list[Any]] = Field(default_factory=dict)
    ready_timeout_s: float = Field(default=900.0, gt=0)
    metrics_url: str | None = None
    # Facts about this configuration for reports, beside the swept knobs (e.g. a KV cache size
    # given through engine_args): {"kv_cache_bytes": 23592960}.
    tags: dict[str, float | int | str] = Field(default_factory=dict)
    # this configuration's hardware price: USD per GPU-hour x gpus (tokenbench run's --cost-per-hour
    # and --gpus); every point then has its cost per million tokens
    cost_per_hour: float | None = Field(default=None, gt=0)
    gpus: int | None = Field(default=None, gt=0)
    # this entry's wire when it differs from the experiment's api: a layer study drives Triton
    # with its generate_stream and the engine alone with completions (the same raw prompt)
    api: Api | None = None

    @field_validator("sweep")
    @classmethod
    def _sweep(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in v.items():
            if key not in _KNOBS:
                raise ValueError(f"sweep key {key!r} is not a knob; use one of {', '.join(sorted(_KNOBS))}")
            if not values:
                raise ValueError(f"sweep.{key} is empty")
        return v

    @model_validator(mode="after")
    def _target(self) -> BackendEntry:
        if self.url is None and self.backend is None:
            raise ValueError("give backend (to launch it) or url (to attach)")
        if self.url is not None and (self.sweep or self.knobs != EngineKnobs()):
            raise ValueError("knobs and sweep need a launched backend; drop url")
        if self.gpus is not None and self.cost_per_hour is None:
            raise ValueError("gpus counts the GPUs cost_per_hour pays for: add cost_per_hour (USD per GPU-hour)")
        return self

    def cost(self) -> CostConfig | None:
        """The price of this configuration's hardware (None: not given)."""
        if self.cost_per_hour is None:
            return None
        return CostConfig(usd_per_gpu_hour=self.cost_per_hour, gpus=self.gpus or 1)


LoadSpec = LoadSweep  # `load:` of an experiment file: the same sweep as --users/--rate


class Variant(FrozenModel):
    """A dataset variant (e.g. with and without a system prompt): fields override ``dataset``."""

    label: str
    system_prompt: str | None = None
    input_tokens: int | None = Field(default=None, gt=0)
    output_tokens: int | None = Field(default=None, gt=0)
    unique_prefix: bool | None = None
    # shared-prefix groups (a variant with them beside one without shows what prefix caching gives)
    prefix_groups: int | None = Field(default=None, gt=0)
    prefix_tokens: int | None = Field(default=None, gt=0)
    prefix_skew: float | None = Field(default=None, gt=0)
    # pooling APIs: this variant's inputs per pooling request (over the experiment's batch_size)
    batch_size: int | None = Field(default=None, gt=0)
    # images: a variant with images beside one without shows what they cost
    images: str | None = None
    image_size: str | None = None
    image_format: Literal["png", "jpeg"] | None = None
    # routing: a variant's own LoRA mix and workload mix (not dataset fields)
    lora_mix: dict[str, float] | None = None
    mix: WorkloadMix | None = None
    # structured output: the request's constraint and tools (TargetConfig's
    # fields, over the experiment's own; a variant without them beside one with shows their cost)
    response_format: OutputConstraint | None = None
    tools: str | tuple[dict[str, Any], ...] | None = None  # a file, or the definitions (TargetConfig reads it)
    tool_choice: str | None = None


GROUP_FIELDS = {"lora_mix", "mix"}  # a Variant's fields that are not its dataset's
# Variant fields that are the target's, not the dataset's (variant_dataset leaves them out)
TARGET_VARIANT_FIELDS = frozenset({"label", "response_format", "tools", "tool_choice"})


class AutoTrials(FrozenModel):
    """``trials: auto``: each (configuration, variant) runs ``min`` trials, then one more at a
    time until, at every load, the 95% CI of ``metric`` (a catalogue key of the aggregates) is
    within ``precision`` of its mean, or does not overlap the CI of any other configuration of the
    same variant at that load (the comparison is decided), or ``max`` trials ran."""

    metric: str = "output_tokens_per_s"
    precision: float = Field(default=0.05, gt=0, lt=1)  # the CI's half-width / |mean|; "5%" or 0.05
    min: int = Field(default=3, ge=2)
    max: int = Field(default=10, ge=2)

    @field_validator("precision", mode="before")
    @classmethod
    def _percent(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().endswith("%"):
            try:
                return float(value.strip()[:-1]) / 100
            except ValueError:
                raise ValueError(f"precision {value!r}: a percent such as 5% or a fraction such as 0.05") from None
        return value

    @field_validator("metric")
    @classmethod
    def _known(cls, value: str) -> str:
        from tokenbench.metrics.catalogue import shown_in

        keys = [m.key for m in shown_in("aggregates")]
        if value not in keys:
            raise ValueError(f"metric {value!r} is not an aggregated metric: one of {', '.join(keys[:8])}, ...")
        return value

    @model_validator(mode="after")
    def _ceiling(self) -> AutoTrials:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self


class ExperimentSpec(FrozenModel):
    name: str
    description: str = ""
    backends: list[BackendEntry] = Field(min_length=1)
    load: LoadSpec | None = None  # a fixed list of loads, or...
    search: SearchSpec | None = None  # ...a capacity search per cell (exactly one of the two)
    stop: StopConfig
    dataset: DatasetConfig = Field(default_factory=DatasetConfig)
    variants: list[Variant] = Field(default_factory=lambda: [Variant(label="default")])
    trials: Annotated[int, Field(ge=1)] | Literal["auto"] = 1
    auto_trials: AutoTrials = Field(default_factory=AutoTrials)  # how `trials: auto` stops
    api: Api | None = None
    ignore_eos: bool = False
    slo: SLOConfig = Field(default_factory=SLOConfig)
    deadlines: DeadlinesConfig = Field(default_factory=DeadlinesConfig)  # the fluidity index's
    window_s: float = Field(default=5.0, gt=0)
    metrics_interval_s: float = Field(default=1.0, gt=0)
    seed: int = 0
    sessions: SessionConfig | None = None  # multi-turn sessions (``--multi-turn``'s settings)
    # pooling APIs: inputs per request of api embeddings, rerank, score (``--batch-size``)
    batch_size: int | None = Field(default=None, gt=0)
    # routing: --lora-mix, --mix and --tenant-header for every cell (a variant's own win)
    lora_mix: dict[str, float] | None = None
    mix: WorkloadMix | None = None
    tenant_header: str = DEFAULT_TENANT_HEADER
    # structured output: every variant's, unless it names its own
    response_format: OutputConstraint | None = None
    tools: str | tuple[dict[str, Any], ...] | None = None
    tool_choice: str | None = None
    # server spans: every cell receives the server's spans (``--server-traces``); a launched engine is
    # pointed at one receiver port for its lifetime (0: a free one), an attached one by the user
    server_traces: bool = False
    server_traces_port: int = Field(default=0, ge=0, le=65535)

    @model_validator(mode="before")
    @classmethod
    def _replay_ends_by_schedule(cls, data: Any) -> Any:
        """A replay ends each point with the trace's last row: ``stop:`` then needs neither a
        duration nor a request count (as ``tokenbench run --dataset trace``)."""
        if not isinstance(data, dict) or not isinstance(data.get("load"), dict) or not data["load"].get("replay"):
            return data
        stop = data.get("stop") if data.get("stop") is not None else {}
        if isinstance(stop, dict) and stop.get("duration_s") is None and stop.get("max_requests") is None:
            return {**data, "stop": {**stop, "schedule_ends": True}}
        return data

    @model_validator(mode="after")
    def _load_or_search(self) -> ExperimentSpec:
        if self.trials == "auto" and self.search is not None:
            raise ValueError(
                "trials: auto adds trials to load: experiments; a search: repeats its probes (search.trials)"
            )
        if (self.load is None) == (self.search is None):
            raise ValueError(
                "give exactly one of load: (the loads to run, e.g. {users: [1, 10]}) or search: "
                "(a capacity search, e.g. {slo: 'ttft:p90<=500ms'})"
            )
        if self.search is not None and self.search.trials is not None and self.trials not in (1, self.search.trials):
            raise ValueError(
                f"trials ({self.trials}) and search.trials ({self.search.trials}) differ: with search: both "
                "mean how often each probed value is repeated; set one"
            )
        if self.search is not None and self.dataset.name == "trace":
            raise ValueError(
                "search: probes a rate or users; dataset trace replays its own schedule (use load: replay)"
            )
        return self

    @model_validator(mode="after")
    def _replay_needs_trace(self) -> ExperimentSpec:
        if self.load is None:
            return self
        if self.load.replay is not None and self.dataset.name != "trace":
            raise ValueError("load.replay replays a trace: set dataset: {name: trace, path: FILE}")
        if self.dataset.name == "trace" and self.load.replay is None:
            raise ValueError("dataset trace is replayed on its own schedule: use load: {replay: {speeds: [1]}}")
        return self

    # before every point: "reset" empties the server's prefix cache through its engine's control;
    # a launched engine without one is restarted before every cell instead (experiments/runner.py)
    prefix_cache: PrefixCacheMode = "keep"

    @field_validator("variants")
    @classmethod
    def _labels(cls, v: list[Variant]) -> list[Variant]:
        labels = [x.label for x in v]
        if len(set(labels)) != len(labels):
            raise ValueError(f"variant labels must be unique, got {labels}")
        return v

    @model_validator(mode="after")
    def _variant_datasets(self) -> ExperimentSpec:
        """Each variant's dataset is valid (e.g. --prefix-groups with --prefix-tokens): said when
        the file is read, not when its cell starts."""
        for variant in self.variants:
            try:
                variant_dataset(self.dataset, variant)
            except ValidationError as exc:
                problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
                raise ValueError(f"variant {variant.label!r}: {problems}") from None
        return self


class ExperimentError(BadInput):
    """A bad experiment file; the message names the field."""


def load_spec(path: Path) -> ExperimentSpec:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ExperimentError(f"{path}: no such experiment file") from None
    except yaml.YAMLError as exc:
        raise ExperimentError(f"{path}: not valid YAML: {exc}") from None
    return parse_spec(data, str(path))


def parse_spec(data: Any, source: str = "experiment") -> ExperimentSpec:
    if not isinstance(data, dict):
        raise ExperimentError(f"{source}: expected a mapping at the top level")
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as exc:
        parts = []
        for e in exc.errors():
            where = ".".join(str(x) for x in e["loc"])
            msg = e["msg"].removeprefix("Value error, ")
            parts.append(f"{where}: {msg}" if where else msg)
        raise ExperimentError(f"{source}: " + "; ".join(parts)) from None


@dataclass(frozen=True)
class Cell:
    id: str  # also the run directory name under cells/
    variant: str
    trial: int
    config: RunConfig
    search: SearchSpec | None = None  # a capacity search (its trials inside it) instead of config.loads


@dataclass(frozen=True)
class ServerPlan:
    label: str
    entry: BackendEntry
    backend: BackendConfig | None  # None: attach to entry.url
    swept: dict[str, Any]
    cells: tuple[Cell, ...]


def _entry_name(entry: BackendEntry) -> str:
    """A configuration's default label: the backend, and the engine a serving layer serves from."""
    if entry.backend is None:
        return "attached"
    return f"{entry.backend}-{entry.upstream}" if entry.upstream else entry.backend


def _value_label(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "+".join(str(v).lstrip("-") for v in value)
    return str(value)


def expand(spec: ExperimentSpec) -> list[ServerPlan]:
    plans: list[ServerPlan] = []
    seen: set[str] = set()
    for entry in spec.backends:
        keys = list(entry.sweep)
        for combo in itertools.product(*(entry.sweep[k] for k in keys)) if keys else [()]:
            swept = dict(zip(keys, combo))
            base = entry.label or _entry_name(entry)
            label = slug(base + "".join(f"_{k}={_value_label(v)}" for k, v in swept.items()))
            if label in seen:
                raise ExperimentError(f"two server configurations are both labelled {label!r}; set label")
            seen.add(label)
            backend = None
            if entry.url is None:
                knobs = entry.knobs.model_copy(
                    update={k: (tuple(v) if k == "engine_args" else v) for k, v in swept.items()}
                )
                backend = BackendConfig(
                    name=entry.backend,
                    model=entry.model,
                    served_model_name=entry.served_model_name,
                    knobs=EngineKnobs.model_validate(knobs.model_dump()),
                    executable=entry.engine_bin,
                    upstream=entry.upstream,
                    layer_args=entry.layer_args,
                    ready_timeout_s=entry.ready_timeout_s,
                    metrics_interval_s=spec.metrics_interval_s,
                    metrics_url=entry.metrics_url,
                )
            cells = tuple(
                Cell(
                    id=slug(f"{label}__{variant.label}__t{trial}"),
                    variant=variant.label,
                    trial=trial,
                    config=_run_config(spec, entry, variant, trial),
                    search=_cell_search(spec),
                )
                for variant in spec.variants
                for trial in range(1, _cell_trials(spec) + 1)
            )
            plans.append(ServerPlan(label, entry, backend, {**entry.tags, **swept}, cells))
    return plans


def _cell_search(spec: ExperimentSpec) -> SearchSpec | None:
    """The search with its trials set: search.trials, else the experiment's trials."""
    if spec.search is None:
        return None
    return spec.search.model_copy(update={"trials": spec.search.trials or spec.trials})


def _cell_trials(spec: ExperimentSpec) -> int:
    """Run cells per (server, variant): one per trial (auto: its minimum, then more as needed,
    ``more_cells``); a search repeats its probes instead."""
    if spec.search is not None:
        return 1
    return spec.auto_trials.min if spec.trials == "auto" else spec.trials


def trial_cell(spec: ExperimentSpec, plan: ServerPlan, variant: str, trial: int) -> Cell:
    """One more trial of a configuration's variant (``trials: auto``)."""
    chosen = next(v for v in spec.variants if v.label == variant)
    return Cell(
        id=slug(f"{plan.label}__{variant}__t{trial}"),
        variant=variant,
        trial=trial,
        config=_run_config(spec, plan.entry, chosen, trial),
        search=None,
    )


def variant_dataset(dataset: DatasetConfig, variant: Variant) -> DatasetConfig:
    """The experiment's dataset with the variant's fields over it, validated."""
    overrides = {
        k: v
        for k, v in variant.model_dump(exclude={"batch_size", *GROUP_FIELDS, *TARGET_VARIANT_FIELDS}).items()
        if v is not None
    }
    return DatasetConfig.model_validate(dataset.model_copy(update=overrides).model_dump())


def _run_config(spec: ExperimentSpec, entry: BackendEntry, variant: Variant, trial: int) -> RunConfig:
    return RunConfig(
        target=TargetConfig(
            url=entry.url,
            model=entry.served_model_name if entry.url else None,
            api=entry.api or spec.api,
            ignore_eos=spec.ignore_eos,
            batch_size=variant.batch_size or spec.batch_size,
            **_structure(spec, variant),
        ),
        loads=spec.load.points() if spec.load is not None else [_search_template(spec)],
        stop=spec.stop,
        dataset=variant_dataset(spec.dataset, variant),
        backend=BackendConfig(
            name=entry.backend, metrics_url=entry.metrics_url, metrics_interval_s=spec.metrics_interval_s
        )
        if entry.backend
        else None,
        slo=spec.slo,
        deadlines=spec.deadlines,
        # each trial gets its own seed: the same prompts in another order, other arrival times
        seed=spec.seed + (trial - 1) * 1000,
        window_s=spec.window_s,
        live=False,
        sessions=spec.sessions,
        prefix_cache=spec.prefix_cache,
        cost=entry.cost(),
        lora_mix=variant.lora_mix or spec.lora_mix,
        mix=variant.mix or spec.mix,
        tenant_header=spec.tenant_header,
        server_traces=spec.server_traces,
        server_traces_port=spec.server_traces_port,
    )


def _structure(spec: ExperimentSpec, variant: Variant) -> dict[str, Any]:
    """the variant's response_format / tools / tool_choice, else the experiment's."""
    fields = ("response_format", "tools", "tool_choice")
    return {f: getattr(variant, f) if getattr(variant, f) is not None else getattr(spec, f) for f in fields}


def _search_template(spec: ExperimentSpec) -> LoadPoint:
    assert spec.search is not None
    return spec.search.template()
