"""`tokenbench model fit|predict|validate`: a server model from runs already made, a
prediction of a load nobody ran (run's own flags), and the model checked against a run it was not
fitted on. `tokenbench capacity --predict MODEL` (cli/capacity.py) calls ``predicted_capacity``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tokenbench.cli.common import UsageError, err
from tokenbench.cli.flags import FlagCommand, run_options
from tokenbench.cli.help import GroupedCommand
from tokenbench.cli.run_flags import run_config
from tokenbench.config.flags import DATASET, LOAD, OUTPUT, STOPPING

if TYPE_CHECKING:
    from tokenbench.capacity.plan import CapacitySettings
    from tokenbench.config import RunConfig
    from tokenbench.model.params import ServerModel
    from tokenbench.results.capacity import Objective

app = typer.Typer(
    no_args_is_help=True,
    help="What if: a server model fitted from runs already made, predicting loads nobody ran.",
)
MODEL_FILE = "server-model.json"
MODEL_PANEL = "The model"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.3g} ms"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.1f}%"


def _fit_report(model: ServerModel) -> None:
    from rich.table import Table

    params = Table(title="fitted parameters", title_justify="left")
    for column in ("parameter", "value", "± SE", "constrained by", "note"):
        params.add_column(column)
    for name, p in model.params.items():
        seconds = name.endswith("_s")
        value = "no limit" if p.value is None else (_ms(p.value) if seconds else f"{p.value:.4g}")
        se = "-" if p.se is None else (_ms(p.se) if seconds else f"{p.se:.3g}")
        by = (", ".join(Path(r).name for r in p.by) or "-") if p.constrained else "[yellow]not constrained[/]"
        params.add_row(name, value, se, by, p.note or "")
    err.print(params)
    # what a predicted request's prefill computes: the dataset's prompt, plus what the server adds
    # (chat template), less what it reuses from its cache (as the runs' server said)
    err.print(
        f"prompt tokens: the server counts {model.prompt_tokens_extra:g} more than the dataset and reuses "
        f"{model.prompt_tokens_cached:g} from its cache (medians; a prediction prefills the rest)"
    )
    points = Table(
        title="each fitted point predicted from its run's own settings (error: model vs measured)", title_justify="left"
    )
    for column in ("run", "point", "requests", "TTFT mean", "TTFT p90", "TPOT mean", "output tok/s"):
        points.add_column(column)
    for f in model.points:
        cells = [
            f"{v * 1e3:.1f} ms {_pct(f.error[k])}" if (v := f.measured[k]) is not None else "-"
            for k in ("ttft_mean_s", "ttft_p90_s", "tpot_mean_s")
        ]
        tok = f.measured["output_tokens_per_s"]
        cells.append(f"{tok:.1f} {_pct(f.error['output_tokens_per_s'])}" if tok is not None else "-")
        points.add_row(Path(f.run).name, f.label, str(f.requests), *cells)
    err.print(points)


@app.command("fit", cls=GroupedCommand)
def fit(
    runs: Annotated[list[Path], typer.Argument(help="Run directories, or directories holding runs (an experiment).")],
    out: Annotated[
        Path | None, typer.Option("--out", help=f"The model file (default: {MODEL_FILE} in the first directory).")
    ] = None,
    knob: Annotated[
        list[str] | None,
        typer.Option(
            help="A batch limit the runs' config.json does not say (a server attached by --url): max_num_seqs=8, "
            "kv_capacity_tokens=N, max_batched_tokens=N.",
        ),
    ] = None,
) -> None:
    """Fit a model of one server configuration from its runs: the engine's step time by batch,
    its batch limits and the per-request overhead, each with its uncertainty and the runs that
    constrained it (or "not constrained")."""
    from tokenbench.model.fit import fit as fit_model
    from tokenbench.model.params import parse_knobs

    model = fit_model(runs, parse_knobs(knob))
    path = out or runs[0] / MODEL_FILE
    model.save(path)
    _fit_report(model)
    err.print(f"model: {path}")


def _routing(value: str) -> Any:
    from tokenbench.model.engine import ROUTINGS

    if value not in ROUTINGS:
        raise UsageError(f"--routing must be one of {', '.join(ROUTINGS)}, got {value!r}")
    return value


def _load_model(path: Path, knobs: list[str] | None) -> ServerModel:
    from tokenbench.model.params import ServerModel, parse_knobs

    return ServerModel.load(path).with_knobs(parse_knobs(knobs))


def predict(
    ctx: typer.Context,
    model_file: Annotated[Path, typer.Argument(help="A model file from `tokenbench model fit`.", metavar="MODEL")],
    routing: Annotated[
        str, typer.Option(help="round-robin or least-loaded (fewest requests).", rich_help_panel=MODEL_PANEL)
    ] = "round-robin",
    knob: Annotated[
        list[str] | None,
        typer.Option(
            help="Set a batch limit: max_num_seqs=64, kv_capacity_tokens=N, max_batched_tokens=N (none: no limit).",
            rich_help_panel=MODEL_PANEL,
        ),
    ] = None,
) -> None:
    """Predict a run: `tokenbench run`'s load flags (--rate, --users, --dataset, --duration, ...)
    simulated against the model in virtual time; writes a run directory whose results.json is
    marked `predicted` (report, compare and capacity read it as any run)."""
    from tokenbench.console.tables import summary_table
    from tokenbench.model.predict import predict as predict_run
    from tokenbench.rundir import default_run_dir

    server = _load_model(model_file, knob)
    config = run_config(ctx.params)
    out = config.out_dir or default_run_dir()
    prediction = predict_run(
        config, server, str(model_file), out, (config.backend.replicas if config.backend else 1), _routing(routing)
    )
    err.print(summary_table(prediction.results))
    p = prediction.results.predicted
    interval = f"± {p.interval * 100:.0f}%" if p is not None and p.interval is not None else "no interval"
    validated = (
        f"last validation {p.validation_error * 100:.0f}% on {p.validation_run}"
        if p is not None and p.validation_error is not None
        else "never validated (tokenbench model validate)"
    )
    err.print(f"predicted in {prediction.wall_s:.2f} s ({interval}; {validated})")
    err.print(f"results: {out}/results.json")


predict_command = FlagCommand(predict, run_options())


class PredictCommand(GroupedCommand):
    """``tokenbench model predict``: run's options, its --help the model's and a first run's groups."""

    first = (MODEL_PANEL, LOAD, DATASET, STOPPING, OUTPUT)


app.command("predict", cls=PredictCommand)(predict_command)


@app.command("validate", cls=GroupedCommand)
def validate(
    model: Annotated[Path, typer.Argument(help="A model file from `tokenbench model fit`.")],
    run: Annotated[Path, typer.Argument(help="A run the model was not fitted on.")],
    out: Annotated[
        Path | None, typer.Option("--out", help="Where the prediction goes (default: RUN/predicted).")
    ] = None,
    save: Annotated[bool, typer.Option(help="Write the validation into the model file.")] = True,
    knob: Annotated[
        list[str] | None,
        typer.Option(help="The run's batch limits where they differ from the model's: max_num_seqs=4, ..."),
    ] = None,
) -> None:
    """Predict a run the model has not seen (its own loads, dataset and stop) and compare, point by
    point: TTFT mean and p90, TPOT mean, output tok/s. The worst error becomes the model's last
    validation, which every later prediction carries. `tokenbench report RUN OUT` draws both."""
    from rich.table import Table

    from tokenbench.model.params import ServerModel
    from tokenbench.model.validate import FIGURES, fleet_of
    from tokenbench.model.validate import validate as validate_model
    from tokenbench.results.layout import CONFIG
    from tokenbench.results.manifest import load_manifest

    server = ServerModel.load(model)
    result = validate_model(_load_model(model, knob), str(model), run, out or run / "predicted")
    table = Table(title=f"{run}: predicted vs measured", title_justify="left")
    table.add_column("point")
    for _, title in FIGURES:
        table.add_column(title)
    for check in result.points:
        cells = []
        for key, _ in FIGURES:
            m, p = check.measured[key], check.predicted[key]
            scale, unit = (1e3, " ms") if key.startswith(("ttft", "tpot")) else (1.0, "")
            if m is None or p is None:
                cells.append("-")
            else:
                cells.append(f"{p * scale:.1f} vs {m * scale:.1f}{unit} {_pct(check.error[key])}")
        table.add_row(check.label, *cells)
    err.print(table)
    fleet = fleet_of(load_manifest(run / CONFIG).config.backend)
    if fleet.replicas > 1:  # the routing assumption, stated
        err.print(
            f"fleet: {fleet.replicas} replicas of the model; the router's {fleet.policy} predicted as {fleet.routing}"
        )
    worst = result.validation.max_abs_error
    err.print(f"largest error: {_pct(worst)}  prediction: {result.prediction_dir}/results.json")
    if save:
        server.model_copy(update={"validation": result.validation}).save(model)
        err.print(f"model: {model} (validation recorded)")


def predicted_capacity(
    model_path: Path,
    config: RunConfig,
    objectives: list[Objective],
    settings: CapacitySettings,
    replicas: int = 1,
    routing: str = "round-robin",
    knobs: list[str] | None = None,
) -> None:
    """`tokenbench capacity --predict MODEL`: the search's own plan (CapacityPlan), each probe
    simulated; capacity.json and results.json as a real search writes them."""
    from tokenbench.model.capacity import search

    server = _load_model(model_path, knobs)
    result, wall_s = search(server, str(model_path), config, objectives, settings, replicas, _routing(routing))
    err.print(f"capacity: {config.out_dir}/capacity.json  results: {config.out_dir}/results.json")
    err.print(f"{result.answer} (predicted in {wall_s:.1f} s)")
