"""`tokenbench experiment`: run one (a YAML file or a preset), list the presets."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast, get_args

import typer

from tokenbench.cli.common import err, fail
from tokenbench.cli.help import GroupedCommand
from tokenbench.errors import BadInput

app = typer.Typer(
    help="Experiments: backends x knobs x loads x trials from a YAML file or a preset.", no_args_is_help=True
)


@app.command("run", cls=GroupedCommand)
def experiment_run(
    file: Annotated[Path | None, typer.Argument(help="Experiment YAML file.")] = None,
    preset: Annotated[
        str | None, typer.Option(help="A built-in experiment instead of a file (tokenbench experiment presets).")
    ] = None,
    scale: Annotated[
        str,
        typer.Option(
            help="Preset size: small (minutes on a CPU), full (the study, for GPUs) or ci (small with shorter "
            "points: the test suite's).",
            metavar="[small|full|ci]",
        ),
    ] = "small",
    out: Annotated[
        Path | None, typer.Option(help="Experiment directory (default runs/<name>); re-running resumes it.")
    ] = None,
    server_traces: Annotated[
        bool,
        typer.Option(
            "--server-traces",
            help="Every cell receives the server's OpenTelemetry spans, as tokenbench run --server-traces (a "
            "launched vLLM is pointed at the receiver; the file's server_traces: true says the same).",
        ),
    ] = False,
) -> None:
    """Run an experiment: each server configuration launched once, one run directory per cell,
    trials aggregated; finished cells are skipped when resumed."""
    from tokenbench.common.procs import Interrupts

    Interrupts.install()
    from tokenbench.experiments.runner import run_experiment
    from tokenbench.experiments.spec import load_spec

    if file is not None and preset is None:
        spec = load_spec(file)
    elif file is None and preset is not None:
        from tokenbench.experiments.presets import preset as load_preset

        spec = load_preset(preset, _scale(scale))
    else:
        fail("give an experiment FILE or --preset NAME (one of them)", 2)
    if server_traces:
        spec = spec.with_settings(server_traces=True)
    result = run_experiment(spec, out or Path("runs") / spec.name, err)
    err.print(f"experiment: {result.dir}/experiment.json   report: tokenbench report {result.dir}")
    if result.interrupted:
        err.print("[yellow]interrupted: run the same command again to resume[/]")
        raise typer.Exit(Interrupts.exit_code())
    failed = [c for c in result.state.cells.values() if c.status != "ok"]
    if failed:
        raise typer.Exit(1)


@app.command("presets", cls=GroupedCommand)
def experiment_presets(
    show: Annotated[str | None, typer.Option(help="Print this preset as YAML (copy it to start your own).")] = None,
    scale: Annotated[str, typer.Option(help="small, full or ci.", metavar="[small|full|ci]")] = "small",
) -> None:
    """List the built-in experiments, or print one as YAML."""
    import yaml  # type: ignore[import-untyped,unused-ignore]  # PyYAML ships no types

    from tokenbench.experiments.presets import PRESETS, preset_data

    if show is None:
        from tokenbench.experiments import presets as module

        typer.echo((module.__doc__ or "").strip())
        typer.echo("\npresets: " + ", ".join(PRESETS))
        return
    typer.echo(yaml.safe_dump(preset_data(show, _scale(scale)), sort_keys=False))


if TYPE_CHECKING:
    from tokenbench.experiments.presets import Scale


def _scale(text: str) -> Scale:
    """--scale's value, or bad input naming the choices (experiments.presets.Scale)."""
    from tokenbench.experiments.presets import Scale

    if text not in get_args(Scale):
        raise BadInput(f"--scale must be {', '.join(get_args(Scale))}, got {text!r}")
    return cast("Scale", text)
