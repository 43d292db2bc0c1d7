"""`tokenbench experiment`: run one (a YAML file or a preset), list the presets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .common import err, fail

app = typer.Typer(
    help="Experiments: backends x knobs x loads x trials from a YAML file or a preset.", no_args_is_help=True
)


@app.command("run")
def experiment_run(
    file: Annotated[Path | None, typer.Argument(help="Experiment YAML file.")] = None,
    preset: Annotated[
        str | None, typer.Option(help="A built-in experiment instead of a file (tokenbench experiment presets).")
    ] = None,
    scale: Annotated[
        str, typer.Option(help="Preset size: small (minutes on a CPU) or full (the study, for GPUs).")
    ] = "small",
    out: Annotated[
        Path | None, typer.Option(help="Experiment directory (default runs/<name>); re-running resumes it.")
    ] = None,
) -> None:
    """Run an experiment: each server configuration launched once, one run directory per cell,
    trials aggregated; finished cells are skipped when resumed."""
    from ..procs import Interrupts

    Interrupts.install()
    from ..experiments.presets import preset as load_preset
    from ..experiments.runner import run_experiment
    from ..experiments.spec import ExperimentError, load_spec

    try:
        if (file is None) == (preset is None):
            raise ExperimentError("give an experiment FILE or --preset NAME (one of them)")
        if scale not in ("small", "full"):
            raise ExperimentError(f"--scale must be small or full, got {scale!r}")
        spec = load_spec(file) if file is not None else load_preset(preset, scale)  # type: ignore[arg-type]
        result = run_experiment(spec, out or Path("runs") / spec.name, err)
    except ExperimentError as exc:
        fail(str(exc), 2)
    err.print(f"experiment: {result.dir}/experiment.json   report: tokenbench report {result.dir}")
    if result.interrupted:
        err.print("[yellow]interrupted: run the same command again to resume[/]")
        raise typer.Exit(Interrupts.exit_code())
    failed = [c for c in result.state.cells.values() if c.status != "ok"]
    if failed:
        raise typer.Exit(1)


@app.command("presets")
def experiment_presets(
    show: Annotated[str | None, typer.Option(help="Print this preset as YAML (copy it to start your own).")] = None,
    scale: Annotated[str, typer.Option(help="small or full.")] = "small",
) -> None:
    """List the built-in experiments, or print one as YAML."""
    import yaml

    from ..experiments.presets import PRESETS, preset_data
    from ..experiments.spec import ExperimentError

    if show is None:
        from ..experiments import presets as module

        typer.echo((module.__doc__ or "").strip())
        typer.echo("\npresets: " + ", ".join(PRESETS))
        return
    try:
        typer.echo(yaml.safe_dump(preset_data(show, scale), sort_keys=False))  # type: ignore[arg-type]
    except ExperimentError as exc:
        fail(str(exc), 2)
