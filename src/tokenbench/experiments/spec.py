"""The experiment file: one typed tree (pydantic), validated with errors that name the field, and
its expansion into server configurations and cells.

A *server configuration* is one backend entry with one combination of its swept knobs; it is
launched once. A *cell* is (server configuration, dataset variant, trial): one `tokenbench run`
with every load point, written to its own run directory.

What a cell runs with are the run's own settings (config/), in three layers of the file: the top
level (every cell's), a backend entry (its server's cells') and a variant (its cells'), each taking
the fields of the run models named below (experiments/overlays.py); a cell's RunConfig is its layers
merged, the variant's over the entry's over the experiment's, and validated as one, as ``tokenbench
run`` validates its flags, when the file is read. Declared here is only what is the experiment's
own: names, servers, variants, trials, ``load:`` or ``search:``, sweeps and tags.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML is not a dependency)
from pydantic import Field, ValidationError, field_validator, model_validator

from tokenbench.common.frozen import FrozenModel
from tokenbench.common.slug import slug
from tokenbench.common.units import fraction
from tokenbench.config import (
    BackendConfig,
    DatasetConfig,
    EngineKnobs,
    LoadPoint,
    LoadSweep,
    RunConfig,
    TargetConfig,
)
from tokenbench.config.cost import CostConfig
from tokenbench.errors import BadInput
from tokenbench.experiments.overlays import Fields, Layer, Layered
from tokenbench.experiments.search_spec import SearchSpec
from tokenbench.results.manifest import ATTACHED

_KNOBS = set(EngineKnobs.model_fields)

# Where a file writes the run's settings. RunConfig's fields the experiment sets itself, never a
# file: the request's settings are written flat (target), the server's in its entry (backend, cost),
# the loads in load: or search:; its trials are cells, each run once (RunConfig's trials stay 1);
# each cell has its own run directory and no live view.
EXPERIMENT_OWN = frozenset({"target", "backend", "cost", "loads", "trials", "out_dir", "live"})
# RunConfig's fields that hold for a server's whole life (the runner reads them from its first
# cell): the experiment's, not a variant's.
SERVER_LIFE = frozenset({"prefix_cache", "server_traces", "server_traces_port", "server_traces_grpc_port"})
# Where requests go, and the model they name: a backend entry's (its url; model is what the engine
# loads, and served_model_name, BackendConfig's, what an attached server's requests name).
ADDRESS = frozenset({"url", "model"})

# The top level: every cell's settings (RunConfig's own fields: stop:, dataset:, slo:, sessions:,
# seed, window_s, lora_mix, mix, ...; the request's: api, ignore_eos, tools, headers, ...) and every
# server's metrics scrape period.
EXPERIMENT_SETTINGS = (
    Fields(RunConfig, "run", leave_out=EXPERIMENT_OWN),
    Fields(TargetConfig, "target", leave_out=ADDRESS),
    Fields(BackendConfig, "server", only=frozenset({"metrics_interval_s"})),
)
# A backend entry: its server (BackendConfig's fields, backend naming the profile and engine_bin the
# executable; knobs), its requests' settings over the experiment's (url to attach, an api of its
# own, ...) and its hardware's price (cost_per_hour x gpus: --cost-per-hour and --gpus).
ENTRY_SETTINGS = (
    Fields(BackendConfig, "server", keys={"name": "backend", "executable": "engine_bin"}),
    Fields(TargetConfig, "target", leave_out=frozenset({"model"})),
    Fields(CostConfig, "cost", keys={"usd_per_gpu_hour": "cost_per_hour"}),
)
# A variant: the dataset's fields (flat, over the experiment's dataset:), the request's and RunConfig's
# own (a lora_mix, mix, slo, sessions, ... of its own), each over the experiment's (and its entry's).
VARIANT_SETTINGS = (
    Fields(DatasetConfig, "dataset"),
    Fields(TargetConfig, "target", leave_out=ADDRESS),
    Fields(RunConfig, "run", leave_out=EXPERIMENT_OWN | SERVER_LIFE | {"dataset"}),
)


class BackendEntry(Layered):
    """One backend to launch (``backend`` + ``model``) or to attach to (``url``): ENTRY_SETTINGS."""

    LAYER: ClassVar[Layer] = Layer("backend entry", ENTRY_SETTINGS, unset=True)

    label: str | None = None  # default: the backend name (+ swept values)
    # knob -> values; every combination is one server configuration. engine_args may be swept
    # too (a list of argument lists), for engine-specific settings such as a KV cache in bytes.
    sweep: dict[str, list[Any]] = Field(default_factory=dict)
    # Facts about this configuration for reports, beside the swept knobs (e.g. a KV cache size
    # given through engine_args): {"kv_cache_bytes": 23592960}.
    tags: dict[str, float | int | str] = Field(default_factory=dict)

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
        given = self.settings()
        if given.get("url") is None and given.get("backend") is None:
            raise ValueError("give backend (to launch it) or url (to attach)")
        if given.get("url") is not None and (self.sweep or given.get("knobs", EngineKnobs()) != EngineKnobs()):
            raise ValueError("knobs and sweep need a launched backend; drop url")
        if given.get("gpus") is not None and given.get("cost_per_hour") is None:
            raise ValueError("gpus counts the GPUs cost_per_hour pays for: add cost_per_hour (USD per GPU-hour)")
        return self


class Variant(Layered):
    """A dataset variant (e.g. with and without a system prompt): VARIANT_SETTINGS over the experiment's."""

    LAYER: ClassVar[Layer] = Layer("variant", VARIANT_SETTINGS, unset=True)

    label: str


class AutoTrials(FrozenModel):
    """``trials: auto``: each (configuration, variant) runs ``min`` trials, then one more at a
    time until, at every load, the 95% CI of ``metric`` (a catalogue key of the aggregates) is
    within ``precision`` of its mean, or does not overlap the CI of any other configuration of the
    same variant at that load (the comparison is decided), or ``max`` trials ran."""

    metric: str = "output_tokens_per_s"
    precision: float = Field(default=0.05, gt=0, lt=1)  # the CI's half-width / |mean|; "5%" or 0.05
    min: int = Field(default=3, ge=2)
    max: int = Field(default=10, ge=2)

    _fractions = field_validator("precision", mode="before")(fraction)

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


class ExperimentSpec(Layered):
    """An experiment file: its servers, variants, loads and trials, and EXPERIMENT_SETTINGS, every cell's."""

    LAYER: ClassVar[Layer] = Layer("experiment", EXPERIMENT_SETTINGS, unset=False)

    name: str
    description: str = ""
    backends: list[BackendEntry] = Field(min_length=1)
    load: LoadSweep | None = None  # a fixed list of loads (the same sweep as --users/--rate), or...
    search: SearchSpec | None = None  # ...a capacity search per cell (exactly one of the two)
    variants: list[Variant] = Field(default_factory=lambda: [Variant(label="default")])
    trials: Annotated[int, Field(ge=1)] | Literal["auto"] = 1
    auto_trials: AutoTrials = Field(default_factory=AutoTrials)  # how `trials: auto` stops

    @classmethod
    def _given(cls, data: dict[str, Any]) -> dict[str, Any]:
        """A replay ends each point with the trace's last row, and a staged point with its stages:
        ``stop:`` (the experiment's, or a variant's own) then needs neither a duration nor a request
        count (as ``tokenbench run --dataset trace`` and ``--stages``)."""
        load = data.get("load")
        if not isinstance(load, dict) or not any(load.get(k) for k in ("replay", "stages", "shape")):
            return data
        variants = data.get("variants")
        if isinstance(variants, list):
            own = [
                {**v, "stop": _ends_by_schedule(v["stop"])} if isinstance(v, dict) and "stop" in v else v
                for v in variants
            ]
            data = {**data, "variants": own}
        return {**data, "stop": _ends_by_schedule(data.get("stop") if data.get("stop") is not None else {})}

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
        if self.search is not None and "trace" in self._dataset_names():
            raise ValueError(
                "search: probes a rate or users; dataset trace replays its own schedule (use load: replay)"
            )
        return self

    @model_validator(mode="after")
    def _replay_needs_trace(self) -> ExperimentSpec:
        if self.load is None:
            return self
        names = self._dataset_names()
        if self.load.replay is not None and any(name != "trace" for name in names):
            raise ValueError("load.replay replays a trace: set dataset: {name: trace, path: FILE}")
        if "trace" in names and self.load.replay is None:
            raise ValueError("dataset trace is replayed on its own schedule: use load: {replay: {speeds: [1]}}")
        return self

    @field_validator("variants")
    @classmethod
    def _labels(cls, v: list[Variant]) -> list[Variant]:
        labels = [x.label for x in v]
        if len(set(labels)) != len(labels):
            raise ValueError(f"variant labels must be unique, got {labels}")
        return v

    @model_validator(mode="after")
    def _cells(self) -> ExperimentSpec:
        """Every server configuration and every cell's settings are valid by the run's own rules
        (e.g. --prefix-groups with --prefix-tokens, --batch-size with a pooling --api): said when
        the file is read, not when its cell starts."""
        problems = [p for i, entry in enumerate(self.backends) for p in _server_problems(self, i, entry)]
        cells = [_cell_problems(self, entry) for entry in self.backends]
        for i, found in enumerate(cells):  # the entry named when another's cells are fine
            problems += [p if all(p in other for other in cells) else f"backends.{i}: {p}" for p in found]
        if problems:
            raise ValueError("; ".join(dict.fromkeys(problems)))  # each once, in order
        return self

    def _dataset_names(self) -> set[str]:
        """Each variant's dataset name (its own, or the experiment's)."""
        dataset: DatasetConfig = self.settings()["dataset"]
        return {str(v.routed()["dataset"].get("name", dataset.name)) for v in self.variants}

    def with_settings(self, **settings: Any) -> ExperimentSpec:
        """This experiment with these top-level settings instead (``--server-traces``), validated as
        the file's would be."""
        return type(self).model_validate({**self.model_dump(), **settings})


def _server_problems(spec: ExperimentSpec, i: int, entry: BackendEntry) -> list[str]:
    """What is wrong with an entry's server configurations: ``backends.0.sweep.max_num_seqs: ...``."""
    found = []
    for swept in _combinations(entry.sweep):
        try:
            _server(spec, entry, swept)
        except ValidationError as exc:
            for e in exc.errors():
                loc = [str(x) for x in e["loc"]]
                if loc[:1] == ["knobs"] and loc[1:2] and loc[1] in swept:
                    loc = ["sweep", *loc[1:]]
                found.append(f"{'.'.join([f'backends.{i}', *loc])}: {_message(e)}")
    return found


def _cell_problems(spec: ExperimentSpec, entry: BackendEntry) -> list[str]:
    """What is wrong with the settings of an entry's cells, by variant: ``variant 'x': --prefix-groups
    and --prefix-tokens go together`` (the variant named when it sets anything: the problem is then
    likely its own)."""
    found = []
    for variant in spec.variants:
        try:
            _run_config(spec, entry, variant, 1)
        except ValidationError as exc:
            named = [f"variant {variant.label!r}"] if variant.settings() else []
            for e in exc.errors():
                # a section's own check (the dataset's, the target's) names its flags: no "dataset: "
                at = [".".join(str(x) for x in e["loc"])] if len(e["loc"]) > 1 else []
                found.append(": ".join([*named, *at, _message(e)]))
    return found


def _ends_by_schedule(stop: Any) -> Any:
    if isinstance(stop, dict) and stop.get("duration_s") is None and stop.get("max_requests") is None:
        return {**stop, "schedule_ends": True}
    return stop


def _message(error: Any) -> str:
    return str(error["msg"]).removeprefix("Value error, ")


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
    backend: BackendConfig | None  # what to launch; None: attach to url
    swept: dict[str, Any]
    cells: tuple[Cell, ...]
    server: BackendConfig  # the entry's server, launched or attached (then: its profile, its /metrics)
    url: str | None  # the attached server's


def _entry_name(entry: BackendEntry) -> str:
    """A configuration's default label: the backend, and the engine a serving layer serves from."""
    given = entry.settings()
    if given.get("backend") is None:
        return ATTACHED
    return f"{given['backend']}-{given['upstream']}" if given.get("upstream") else str(given["backend"])


def _value_label(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "+".join(str(v).lstrip("-") for v in value)
    return str(value)


def _combinations(sweep: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the swept values, one per server configuration ({} without a sweep)."""
    return [dict(zip(sweep, combo)) for combo in itertools.product(*sweep.values())]


def expand(spec: ExperimentSpec) -> list[ServerPlan]:
    plans: list[ServerPlan] = []
    seen: set[str] = set()
    for entry in spec.backends:
        for swept in _combinations(entry.sweep):
            base = entry.label or _entry_name(entry)
            label = slug(base + "".join(f"_{k}={_value_label(v)}" for k, v in swept.items()))
            if label in seen:
                raise ExperimentError(f"two server configurations are both labelled {label!r}; set label")
            seen.add(label)
            server = _server(spec, entry, swept)
            url = entry.routed()["target"].get("url")
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
            backend = server if url is None else None
            plans.append(ServerPlan(label, entry, backend, {**entry.tags, **swept}, cells, server, url))
    return plans


def same_experiment(a: ExperimentSpec, b: ExperimentSpec) -> bool:
    """Whether two specs are one experiment: the same name, trials and server configurations, whose
    cells run with the same settings, however each wrote them (experiment.json's spec as an earlier
    version wrote it, every default spelt out, is the same experiment as its file)."""

    def essence(spec: ExperimentSpec) -> tuple[Any, ...]:
        plans = [(p.label, p.backend, p.server, p.url, p.swept, p.cells) for p in expand(spec)]
        return spec.name, spec.description, spec.trials, spec.auto_trials, plans

    return essence(a) == essence(b)


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


def _server(spec: ExperimentSpec, entry: BackendEntry, swept: dict[str, Any]) -> BackendConfig:
    """The entry's server with these swept knobs: its settings over the experiment's."""
    server = {**spec.routed()["server"], **entry.routed()["server"]}
    if swept:
        server["knobs"] = {**server.get("knobs", EngineKnobs()).model_dump(), **swept}
    return BackendConfig.model_validate(server)


def _run_config(spec: ExperimentSpec, entry: BackendEntry, variant: Variant, trial: int) -> RunConfig:
    """A cell's settings: its variant's over its entry's over the experiment's (the dataset and the
    request field by field, each other setting whole), and what the experiment sets itself."""
    top, server, own = spec.routed(), entry.routed(), variant.routed()
    run = {**top["run"], **own["run"]}
    target = {**top["target"], **server["target"], **own["target"]}
    if target.get("url") is not None:  # attached: its requests name the model it serves
        target["model"] = server["server"].get("served_model_name")
    backend = {**top["server"], **server["server"]}
    return RunConfig.model_validate(
        {
            **run,
            "target": target,
            "dataset": {**run["dataset"].model_dump(), **own["dataset"]},
            "loads": spec.load.points() if spec.load is not None else [_search_template(spec)],
            # a cell's run reads the server's profile (metric names, quirks), /metrics and scrape period
            "backend": {k: backend.get(k) for k in ("name", "metrics_url", "metrics_interval_s")}
            if backend.get("name")
            else None,
            "cost": server["cost"] or None,
            # each trial gets its own seed: the same prompts in another order, other arrival times
            "seed": run["seed"] + (trial - 1) * 1000,
            "live": False,
        }
    )


def _search_template(spec: ExperimentSpec) -> LoadPoint:
    assert spec.search is not None
    return spec.search.template()
