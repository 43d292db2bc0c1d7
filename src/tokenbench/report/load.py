"""Read run and experiment directories into tidy, typed rows for the report and compare.

Owns the mapping from files to report data; nothing here computes a metric from records. A RUN
directory has ``results.json``; an EXPERIMENT directory has ``experiment.json`` (its aggregates
over trials) and one run directory per cell. Only those two files are read (never records.jsonl
or samples.jsonl): the report shows what the run wrote.

Every missing number stays ``None`` (shown as "–"), never 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..catalogue import shown_in
from ..results import mean_ci95 as _mean_ci95

# The per-point headline metrics, named as in experiment.json's aggregates (catalogue.METRICS).
METRIC_NAMES: tuple[str, ...] = tuple(m.key for m in shown_in("aggregates"))


class ReportInputError(Exception):
    """A directory that is neither a run nor an experiment, or a file that does not parse."""


@dataclass(frozen=True)
class Stat:
    """One metric at one point: the mean over trials with its 95% CI half-width (None when n < 2)."""

    mean: float | None
    ci95: float | None
    n: int
    values: tuple[float, ...] = ()


@dataclass(frozen=True)
class PointRow:
    """One load point of one configuration (trials folded into Stats)."""

    source: str  # the run directory's or experiment's name
    config: str  # unique display label: backend configuration (+ dataset variant)
    backend: str | None
    swept: dict[str, Any]
    variant: str | None
    point: int
    label: str  # "16 users", "2 req/s"
    load_kind: str  # "users" | "rate"
    load_value: float | None  # users, or offered requests per second
    metrics: dict[str, Stat]
    outcomes: dict[str, int]  # request outcomes summed over trials, "ok" included
    num_trials: int

    def mean(self, name: str) -> float | None:
        stat = self.metrics.get(name)
        return None if stat is None else stat.mean


@dataclass(frozen=True)
class PointSpan:
    """One point's stretch of a run's clock and its time-series windows (as written)."""

    index: int
    label: str
    load_kind: str
    start_s: float
    ramp_end_s: float
    measure_start_s: float  # end of ramp + warm-up: where the measurement window starts
    load_end_s: float
    end_s: float
    windows: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class RunSeries:
    """The time series of one run directory (a plain run, or one cell of an experiment)."""

    title: str
    config: str
    trial: Any
    run_dir: Path
    points: tuple[PointSpan, ...]


@dataclass(frozen=True)
class RunHeader:
    """What a reader needs to know about one run: what was benchmarked, with what."""

    path: Path
    name: str
    config: str
    backend: str | None
    engine: str | None
    engine_version: str | None
    cold_start_s: float | None
    model: str | None
    api: str | None
    dataset: str
    slo: dict[str, float | None]
    interrupted: bool
    num_points: int


@dataclass(frozen=True)
class ServerInfo:
    label: str
    config: str
    backend: str | None
    swept: dict[str, Any]
    status: str | None
    error: str | None
    cold_start_s: float | None
    engine_version: str | None


@dataclass(frozen=True)
class CellInfo:
    cell_id: str
    server: str
    variant: str | None
    trial: Any
    status: str | None
    error: str | None


@dataclass(frozen=True)
class ExperimentHeader:
    path: Path
    name: str
    description: str
    complete: bool
    trials: int | None
    load: str
    model: str | None
    dataset: str
    slo: dict[str, float | None]
    servers: tuple[ServerInfo, ...]
    cells: tuple[CellInfo, ...]


@dataclass(frozen=True)
class ReportData:
    """Everything the report shows, read from the input directories in the order given."""

    runs: tuple[RunHeader, ...]
    experiments: tuple[ExperimentHeader, ...]
    rows: tuple[PointRow, ...]
    series: tuple[RunSeries, ...]
    slos: tuple[dict[str, float | None], ...] = field(default=())  # distinct SLOs of the inputs


# ---------------------------------------------------------------------------------------------
# statistics


def mean_ci95(values: list[float | None]) -> Stat:
    """Mean and Student-t 95% CI half-width over the non-null values (CI None when n < 2);
    the one definition is results.mean_ci95."""
    r = _mean_ci95(values)
    return Stat(r["mean"], r["ci95"], r["n"], tuple(r["values"]))


# ---------------------------------------------------------------------------------------------
# one results.json point -> the aggregate metric names


def point_metrics(point: dict[str, Any]) -> dict[str, float | None]:
    """A results.json point's headline numbers under experiment.json's metric names."""
    return {m.key: m.get(point) for m in shown_in("aggregates")}


def load_value(load: dict[str, Any]) -> float | None:
    kind = load.get("kind")
    value = load.get("users") if kind == "users" else load.get("rate_per_s")
    return None if value is None else float(value)


# ---------------------------------------------------------------------------------------------
# directories


def is_experiment_dir(path: Path) -> bool:
    return (path / "experiment.json").is_file()


def is_run_dir(path: Path) -> bool:
    return (path / "results.json").is_file()


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ReportInputError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ReportInputError(f"{path}: expected a JSON object at the top level")
    return data


def load_inputs(dirs: list[Path]) -> ReportData:
    """Read each directory (run or experiment, in the order given) into one ReportData."""
    if not dirs:
        raise ReportInputError("give at least one run or experiment directory")
    parts: list[_Part] = []
    for d in dirs:
        d = Path(d)
        if is_experiment_dir(d):
            parts.append(_read_experiment(d))
        elif is_run_dir(d):
            parts.append(_read_run(d))
        else:
            raise ReportInputError(
                f"{d}: neither a run directory (results.json) nor an experiment directory (experiment.json)"
            )
    labels = _unique_labels(parts)
    runs, experiments, rows, series, slos = [], [], [], [], []
    for i, part in enumerate(parts):
        relabel = labels[i]
        runs += [replace(h, config=relabel[h.config]) for h in part.runs]
        experiments += [_relabel_experiment(h, relabel) for h in part.experiments]
        rows += [replace(r, config=relabel[r.config]) for r in part.rows]
        series += [_relabel_series(s, relabel) for s in part.series]
        for slo in part.slos:
            if slo not in slos:
                slos.append(slo)
    return ReportData(tuple(runs), tuple(experiments), tuple(rows), tuple(series), tuple(slos))


@dataclass
class _Part:
    """What one input directory contributes, before configuration labels are made unique."""

    name: str
    runs: list[RunHeader]
    experiments: list[ExperimentHeader]
    rows: list[PointRow]
    series: list[RunSeries]
    slos: list[dict[str, float | None]]

    def configs(self) -> list[str]:
        seen: list[str] = []
        for r in self.rows:
            if r.config not in seen:
                seen.append(r.config)
        for h in self.runs:
            if h.config not in seen:
                seen.append(h.config)
        for e in self.experiments:
            for s in e.servers:
                if s.config not in seen:
                    seen.append(s.config)
        return seen


def _unique_labels(parts: list[_Part]) -> list[dict[str, str]]:
    """Per part, config label -> a label unique across all inputs. Two runs of the same backend
    would otherwise be drawn as one line; the source's name tells them apart."""
    owners: dict[str, list[int]] = {}
    for i, part in enumerate(parts):
        for c in part.configs():
            owners.setdefault(c, []).append(i)
    names = [p.name for p in parts]
    out: list[dict[str, str]] = []
    for i, part in enumerate(parts):
        mapping = {}
        for c in part.configs():
            if len(owners[c]) == 1:
                mapping[c] = c
            elif names.count(part.name) == 1:
                mapping[c] = f"{c} ({part.name})"
            else:
                mapping[c] = f"{c} (#{i + 1} {part.name})"
        out.append(mapping)
    return out


def _relabel_series(s: RunSeries, relabel: dict[str, str]) -> RunSeries:
    new = relabel.get(s.config, s.config)
    return replace(s, config=new, title=s.title.replace(s.config, new, 1))


def _relabel_experiment(h: ExperimentHeader, relabel: dict[str, str]) -> ExperimentHeader:
    servers = tuple(replace(s, config=relabel.get(s.config, s.config)) for s in h.servers)
    return replace(h, servers=servers)


# ---------------------------------------------------------------------------------------------
# a run directory


def _dataset_text(dataset: dict[str, Any] | None) -> str:
    if not dataset:
        return "–"
    bits = [str(dataset.get("name") or "?")]
    if dataset.get("source"):
        bits.append(f"from {dataset['source']}")
    if dataset.get("system_prompt"):
        bits.append("with system prompt")
    if dataset.get("unique_prefix"):
        bits.append("unique prefixes")
    if dataset.get("exact_lengths") is False:
        bits.append("approximate lengths")
    return ", ".join(bits)


def _slo(results: dict[str, Any]) -> dict[str, float | None]:
    slo = results.get("slo") or {}
    return {k: slo.get(k) for k in ("ttft_s", "tpot_s", "e2e_s")}


def _run_header(path: Path, results: dict[str, Any], config: str) -> RunHeader:
    target = results.get("target") or {}
    return RunHeader(
        path=path,
        name=path.name,
        config=config,
        backend=target.get("backend"),
        engine=target.get("engine"),
        engine_version=target.get("engine_version"),
        cold_start_s=target.get("cold_start_s"),
        model=target.get("model"),
        api=target.get("api"),
        dataset=_dataset_text(results.get("dataset")),
        slo=_slo(results),
        interrupted=bool(results.get("interrupted")),
        num_points=len(results.get("points") or []),
    )


def point_spans(results: dict[str, Any]) -> tuple[PointSpan, ...]:
    spans = []
    for p in results.get("points") or []:
        span = p.get("span") or {}
        if span.get("start_s") is None:
            continue
        window = p.get("window") or {}
        ramp_end = span.get("ramp_end_s", span["start_s"])
        load_end = span.get("load_end_s", span.get("end_s", ramp_end))
        spans.append(
            PointSpan(
                index=p.get("index", len(spans)),
                label=str(p.get("label", "")),
                load_kind=(p.get("load") or {}).get("kind", "users"),
                start_s=span["start_s"],
                ramp_end_s=ramp_end,
                measure_start_s=window.get("start_s", ramp_end),
                load_end_s=load_end,
                end_s=span.get("end_s", load_end),
                windows=tuple(p.get("timeseries") or ()),
            )
        )
    return tuple(spans)


def _read_run(path: Path) -> _Part:
    results = read_json(path / "results.json")
    config = (results.get("target") or {}).get("backend") or "run"
    rows = []
    for p in results.get("points") or []:
        load = p.get("load") or {}
        metrics = {k: mean_ci95([v]) for k, v in point_metrics(p).items()}
        rows.append(
            PointRow(
                source=path.name,
                config=config,
                backend=(results.get("target") or {}).get("backend"),
                swept={},
                variant=None,
                point=p.get("index", len(rows)),
                label=str(p.get("label", "")),
                load_kind=load.get("kind", "users"),
                load_value=load_value(load),
                metrics=metrics,
                outcomes=dict((p.get("requests") or {}).get("by_outcome") or {}),
                num_trials=1,
            )
        )
    series = [RunSeries(title=config, config=config, trial=None, run_dir=path, points=point_spans(results))]
    return _Part(path.name, [_run_header(path, results, config)], [], rows, series, [_slo(results)])


# ---------------------------------------------------------------------------------------------
# an experiment directory


def _server_config(label: str, variant: str | None, many_variants: bool) -> str:
    return f"{label} · {variant}" if many_variants and variant is not None else label


def _load_text(load: dict[str, Any]) -> str:
    if load.get("users"):
        return "users " + ", ".join(str(u) for u in load["users"])
    if load.get("rates"):
        return "rates " + ", ".join(f"{r:g}" for r in load["rates"]) + " req/s"
    return "–"


def _read_experiment(path: Path) -> _Part:
    exp = read_json(path / "experiment.json")
    spec = exp.get("spec") or {}
    name = str(exp.get("name") or spec.get("name") or path.name)
    cells_raw: dict[str, dict[str, Any]] = exp.get("cells") or {}
    variants = {c.get("variant") for c in cells_raw.values()} | {a.get("variant") for a in exp.get("aggregates") or []}
    many_variants = len(variants) > 1
    backend_of = {s.get("label"): s.get("backend") for s in exp.get("servers") or []}

    # Each cell's results.json: time series, outcomes and header facts (model, dataset, SLO).
    cell_results: dict[str, dict[str, Any]] = {}
    for cell_id, cell in cells_raw.items():
        run_dir = path / (cell.get("run_dir") or f"cells/{cell_id}")
        if (run_dir / "results.json").is_file():
            try:
                cell_results[cell_id] = read_json(run_dir / "results.json")
            except ReportInputError:
                continue  # a cell killed mid-write; its aggregate (if any) still shows

    outcomes: dict[tuple[str, Any, int], dict[str, int]] = {}
    series: list[RunSeries] = []
    for cell_id, cell in cells_raw.items():
        results = cell_results.get(cell_id)
        # Only finished cells, as in the aggregates: an interrupted trial's partial point would
        # mix into the outcome shares and the stability verdict (it is listed with its status).
        if results is None or cell.get("status") != "ok":
            continue
        config = _server_config(str(cell.get("server")), cell.get("variant"), many_variants)
        for p in results.get("points") or []:
            key = (str(cell.get("server")), cell.get("variant"), p.get("index"))
            acc = outcomes.setdefault(key, {})
            for outcome, n in ((p.get("requests") or {}).get("by_outcome") or {}).items():
                acc[outcome] = acc.get(outcome, 0) + int(n)
        run_dir = path / (cell.get("run_dir") or f"cells/{cell_id}")
        series.append(
            RunSeries(
                title=f"{config} · trial {cell.get('trial')}",
                config=config,
                trial=cell.get("trial"),
                run_dir=run_dir,
                points=point_spans(results),
            )
        )

    rows = []
    for agg in exp.get("aggregates") or []:
        server = str(agg.get("server"))
        load = agg.get("load") or {}
        metrics = {
            k: Stat(
                v.get("mean"),
                v.get("ci95"),
                int(v.get("n") or 0),
                tuple(x for x in v.get("values") or () if x is not None),
            )
            for k, v in (agg.get("metrics") or {}).items()
            if isinstance(v, dict)
        }
        for k in METRIC_NAMES:
            metrics.setdefault(k, Stat(None, None, 0, ()))
        rows.append(
            PointRow(
                source=name,
                config=_server_config(server, agg.get("variant"), many_variants),
                backend=agg.get("backend") or backend_of.get(server),
                swept=dict(agg.get("swept") or {}),
                variant=agg.get("variant"),
                point=int(agg.get("point", 0)),
                label=str(agg.get("label", "")),
                load_kind=load.get("kind", "users"),
                load_value=load_value(load),
                metrics=metrics,
                outcomes=outcomes.get((server, agg.get("variant"), agg.get("point")), {}),
                num_trials=max((s.n for s in metrics.values()), default=0),
            )
        )

    first = next(iter(cell_results.values()), {})
    servers = tuple(
        ServerInfo(
            label=str(s.get("label")),
            config=_server_config(str(s.get("label")), None, False),
            backend=s.get("backend"),
            swept=dict(s.get("swept") or {}),
            status=s.get("status"),
            error=s.get("error"),
            cold_start_s=s.get("cold_start_s"),
            engine_version=s.get("engine_version"),
        )
        for s in exp.get("servers") or []
    )
    cells = tuple(
        CellInfo(
            cell_id=str(cid),
            server=str(c.get("server")),
            variant=c.get("variant"),
            trial=c.get("trial"),
            status=c.get("status"),
            error=c.get("error"),
        )
        for cid, c in cells_raw.items()
    )
    slo = _slo(first) if first else {k: (spec.get("slo") or {}).get(k) for k in ("ttft_s", "tpot_s", "e2e_s")}
    model = (first.get("target") or {}).get("model")
    if model is None:
        models = {b.get("model") for b in spec.get("backends") or [] if b.get("model")}
        model = ", ".join(sorted(str(m) for m in models)) or None
    header = ExperimentHeader(
        path=path,
        name=name,
        description=str(exp.get("description") or spec.get("description") or ""),
        complete=bool(exp.get("complete")),
        trials=spec.get("trials"),
        load=_load_text(spec.get("load") or {}),
        model=model,
        dataset=_dataset_text(first.get("dataset")) if first else _dataset_text(spec.get("dataset")),
        slo=slo,
        servers=servers,
        cells=cells,
    )
    return _Part(name, [], [header], rows, series, [slo])
