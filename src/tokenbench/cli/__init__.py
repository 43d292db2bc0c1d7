"""Command line: flags -> config, then one call. Nothing else lives here.

One module per group of commands: run.py (`run`), capacity.py (`capacity`: run's options and the search's), backends.py, experiment.py, files.py
(`report`, `recompute`, `export`, `compare`), tools.py (`mock`, `calibrate`); common.py holds
the error console, the one error formatter and the shared engine options.
"""

from __future__ import annotations

import typer

from . import backends, capacity, experiment, files, run, tools

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    help="Benchmark LLM inference servers: realistic load, every streamed chunk timed.",
)
app.command(cls=run.RunCommand)(run.run)
app.command()(capacity.capacity)
app.add_typer(backends.app, name="backends")
app.add_typer(experiment.app, name="experiment")
for command in (files.report, files.recompute, files.export, files.compare, tools.mock, tools.calibrate):
    app.command()(command)


def main() -> None:  # pragma: no cover
    app()
