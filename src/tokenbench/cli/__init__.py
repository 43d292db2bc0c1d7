"""Command line: flags -> config, then one call. Nothing else lives here.

One module per group of commands: run.py (`run`), capacity.py (`capacity`: run's flags and the
search's), backends.py, experiment.py, files.py (`report`, `recompute`, `export`, `compare`, `agree`, `history`),
tools.py (`mock`, `calibrate`), completion.py (`completion SHELL`); flags.py builds the options
from the settings' own flags, run_flags.py and engine.py turn their values into settings; help.py
renders every command's --help (options by group, --help GROUP); common.py holds the error
console, the one error formatter and the exit code of each kind of failure (tokenbench/errors.py).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
import typer.core
from pydantic import ValidationError

from tokenbench.cli import backends, capacity, completion, experiment, files, model, run, tools
from tokenbench.cli.common import bad_input, bug
from tokenbench.cli.help import GroupedCommand, reflow_all
from tokenbench.errors import BadInput


class Commands(typer.core.TyperGroup):
    """Every command's failures by kind (tokenbench/errors.py): bad input exits 2 with one line,
    an expected failure with its own code (cli/common.exit_codes), anything else is a bug. Every
    command's description is reflowed into paragraphs (cli/help.py)."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        reflow_all(self)

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:  # --version, --help, --install-completion: a switch shows no <bool>
            if getattr(param, "is_flag", False):
                param.metavar = ""
        return list(params)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise  # the parser's own: --help, a usage error (exit 2), an exit code chosen already
        except (BadInput, ValidationError) as exc:
            bad_input(exc)
        except Exception as exc:
            bug(exc)


def _version(value: bool) -> None:
    if value:
        from tokenbench import __version__  # read only when asked: the package metadata costs every start ~20 ms

        typer.echo(f"tokenbench {__version__}")
        raise typer.Exit()


app = typer.Typer(
    cls=Commands,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Benchmark LLM inference servers: realistic load, every streamed chunk timed.",
)


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print tokenbench's version and exit.", is_eager=True, callback=_version),
    ] = False,
) -> None:
    """Benchmark LLM inference servers: realistic load, every streamed chunk timed."""


app.command("run", cls=run.RunCommand)(run.command)
app.command("capacity", cls=capacity.CapacityCommand)(capacity.command)
app.command("import", cls=GroupedCommand)(files.import_results)
app.add_typer(backends.app, name="backends")
app.add_typer(experiment.app, name="experiment")
app.add_typer(model.app, name="model")
for command in (
    files.report,
    files.recompute,
    files.export,
    files.compare,
    files.agree,
    files.history,
):
    app.command(cls=GroupedCommand)(command)
app.command("mock", cls=GroupedCommand)(tools.mock)
app.command(cls=GroupedCommand)(tools.calibrate)
app.command(cls=GroupedCommand)(completion.completion)


def main() -> None:  # pragma: no cover
    app()
