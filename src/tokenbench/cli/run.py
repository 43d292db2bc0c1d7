"""`tokenbench run`: flags -> RunConfig (cli/run_flags.py), then one call (runner.run). Its
options are the settings' flags (cli/flags.py), and the vllm-bench names it also takes, listed
in their own help group (vllm_flags.py rewrites them before the arguments are parsed)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tokenbench.cli.common import err, exit_codes, fail
from tokenbench.cli.flags import FlagCommand, run_options
from tokenbench.cli.help import Entry, GroupedCommand, reflow
from tokenbench.cli.run_flags import run_config
from tokenbench.cli.vllm_flags import FlagError, aliases, translate
from tokenbench.config import RunConfig
from tokenbench.config.flags import DATASET, LOAD, OUTPUT, RUN_FILE, STOPPING, TARGET, VLLM
from tokenbench.errors import SERVER_FAILED_EXIT


class RunCommand(GroupedCommand):
    """``tokenbench run``: vllm-bench flags rewritten before the arguments are parsed (vllm_flags);
    its --help shows the groups a first run needs."""

    first = (TARGET, LOAD, DATASET, STOPPING, OUTPUT, RUN_FILE)

    def rewrite(self, args: list[str]) -> list[str]:
        try:
            return translate(args)
        except FlagError as exc:
            fail(str(exc), 2)

    def extra_groups(self) -> dict[str, list[Entry]]:
        """The vllm-bench names run takes (not options of the command: ``translate`` has rewritten
        them before the arguments are parsed)."""
        from rich.text import Text

        ours = {o.name for o in run_options()}
        return {
            VLLM: [Entry(name, Text(reflow(meaning) or "")) for name, meaning in aliases().items() if name not in ours]
        }


def run(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Run file (YAML or TOML) whose keys are these flags without --, e.g. rate: 4; a run "
            "directory or its config.json runs its settings again. Flags given here override it.",
            rich_help_panel=RUN_FILE,
        ),
    ] = None,
    print_config: Annotated[
        bool,
        typer.Option(
            "--print-config",
            help="Write the resolved settings as a YAML run file to stdout and exit, running nothing.",
            rich_help_panel=RUN_FILE,
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Check the server (--url) and its model, build the dataset and the schedule, print the plan "
            "and exit: no request of the load is sent, no run directory made.",
            rich_help_panel=RUN_FILE,
        ),
    ] = False,
) -> None:
    """Benchmark a server (or, with no --url, the embedded llama.cpp backend).

    Ctrl-C or SIGTERM stops the run, keeps every record and exits with 130 or 143; a second
    signal exits at once (`tokenbench recompute DIR` then derives results.json)."""
    from tokenbench.cli.run_file import merged, run_file_yaml
    from tokenbench.common.procs import Interrupts

    settings = run_config(merged(ctx, config))
    if print_config:
        typer.echo(run_file_yaml(settings), nl=False)
        return
    if dry_run:
        _plan(settings)
        return
    Interrupts.install()
    _benchmark(settings)


command = FlagCommand(run, run_options())


def _plan(config: RunConfig) -> None:
    """--dry-run: the plan on stdout; an unreachable server exits 3, bad input 2, as a run would."""
    from tokenbench.console.plan import plan_lines
    from tokenbench.run import dry_run

    with exit_codes("interrupted while planning"):
        plan = dry_run(config)
    typer.echo("\n".join(plan_lines(plan)))


def _benchmark(config: RunConfig) -> None:
    """Run it; a failure exits 3 (the server unreachable) or 2 (bad input), an interrupt with its
    signal's code; a run whose server failed a point (results.failures) exits 4."""
    from tokenbench.common.procs import Interrupts
    from tokenbench.run import run as run_benchmark

    with exit_codes("interrupted before the load started or finished"):  # children are stopped by then
        result = run_benchmark(config, err)
    err.print(f"results: {result.run_dir}/results.json  records: {result.run_dir}/records.jsonl")
    if result.interrupted:
        err.print("[yellow]interrupted: in-flight requests were recorded as cancelled[/]")
        raise typer.Exit(Interrupts.exit_code())
    if result.failed:
        points = ", ".join(result.failed)
        fail(f"the server failed at {points}: what it said is above and in results.json", SERVER_FAILED_EXIT)
