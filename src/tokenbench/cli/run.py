"""`tokenbench run`: flags -> RunConfig (cli/run_flags.py), then one call (runner.run). Its
options are the settings' flags (cli/flags.py), and the vllm-bench names it also takes, listed
in their own help group (vllm_flags.py rewrites them before the arguments are parsed)."""

from __future__ import annotations

import typer

from tokenbench.cli.common import err, exit_codes, fail
from tokenbench.cli.flags import FlagCommand, run_options
from tokenbench.cli.help import Entry, GroupedCommand, reflow
from tokenbench.cli.run_flags import run_config
from tokenbench.cli.vllm_flags import FlagError, aliases, translate
from tokenbench.config import RunConfig
from tokenbench.config.flags import DATASET, LOAD, OUTPUT, STOPPING, TARGET, VLLM
from tokenbench.errors import SERVER_FAILED_EXIT


class RunCommand(GroupedCommand):
    """``tokenbench run``: vllm-bench flags rewritten before the arguments are parsed (vllm_flags);
    its --help shows the groups a first run needs."""

    first = (TARGET, LOAD, DATASET, STOPPING, OUTPUT)

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


def run(ctx: typer.Context) -> None:
    """Benchmark a server (or, with no --url, the embedded llama.cpp backend).

    Ctrl-C or SIGTERM stops the run, keeps every record and exits with 130 or 143; a second
    signal exits at once (`tokenbench recompute DIR` then derives results.json)."""
    from tokenbench.common.procs import Interrupts

    Interrupts.install()
    _benchmark(run_config(ctx.params))


command = FlagCommand(run, run_options())


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
