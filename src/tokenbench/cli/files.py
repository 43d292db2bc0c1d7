"""The after-the-fact commands over run and experiment directories: report, recompute, export,
compare, agree (paired outputs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer
from pydantic import ValidationError
from rich.text import Text

from tokenbench.cli.common import err, fail
from tokenbench.console.terminal import console
from tokenbench.errors import BadInput

if TYPE_CHECKING:
    from tokenbench.history.export import Format

# A directory's files that cannot be read as a run's: bad input, named with the directory.
_UNREADABLE = (BadInput, OSError, ValidationError, json.JSONDecodeError, UnicodeDecodeError)


def _require_result_dirs(dirs: list[Path]) -> None:
    from tokenbench.rundir.read import is_experiment_dir, is_run_dir

    for d in dirs:
        if not (is_run_dir(d) or is_experiment_dir(d)):
            fail(f"{d}: not a run directory (results.json) or an experiment directory (experiment.json)", 2)


def report(
    dirs: Annotated[list[Path], typer.Argument(help="Run or experiment directories.")],
    out: Annotated[
        Path | None,
        typer.Option(help="Where to write report.html, report.md and charts/ (default: the first directory)."),
    ] = None,
) -> None:
    """Write a self-contained HTML report (plus PNG charts and a Markdown summary)."""
    from tokenbench.report import write_report

    _require_result_dirs(dirs)
    files = write_report(dirs, out or dirs[0])
    from tokenbench.report.sections.layers import layer_study
    from tokenbench.report.sections.speculation_speedup import speculation_study
    from tokenbench.rundir.read import is_experiment_dir

    # a serving-layer study (each layer's overhead and where it helped) and a speculation study (each
    # configuration's speedup and where it ends), in the terminal too
    for d in dirs:
        for renderable in [*layer_study(d), *speculation_study(d)] if is_experiment_dir(d) else []:
            err.print(renderable)
    err.print(
        f"report: {files.html}  markdown: {files.markdown}  charts: {len(files.charts)} PNG in {files.html.parent / 'charts'}"
    )


def recompute(
    dirs: Annotated[list[Path], typer.Argument(help="Run or experiment directories.")],
) -> None:
    """Derive results.json again from a run's records.jsonl, samples.jsonl and config.json (after
    a crash, or after an upgrade that fixed a metric), with this version's definitions; for an
    experiment, every cell and then the aggregates. The previous file is kept as *.previous.json."""
    from tokenbench.console.tables import summary_table
    from tokenbench.experiments.recompute import recompute_experiment
    from tokenbench.rundir.derive import recompute_run
    from tokenbench.rundir.read import is_experiment_dir

    for d in dirs:
        try:
            if is_experiment_dir(d):
                state = recompute_experiment(d)
                err.print(f"experiment: {d}/experiment.json ({len(state['aggregates'])} aggregate rows)")
            elif (imported := _imported_from(d)) is not None:
                # its results hold what the import knows beyond the records (the tool's figures,
                # the gaps it never timed): derived again only by importing the file again
                fail(
                    f"{d}: imported from {imported} (results.json imported); import the file again: tokenbench import",
                    2,
                )
            else:
                results = recompute_run(d)
                err.print(summary_table(results))
                err.print(
                    f"results: {d}/results.json (computed by tokenbench {results.computed_by.version}"
                    f"{', interrupted run' if results.interrupted else ''})"
                )
        except _UNREADABLE as exc:
            fail(_naming(d, exc), 2)


def import_results(
    file: Annotated[
        Path,
        typer.Argument(
            help=(
                "Another tool's result file or directory (vllm bench serve --save-detailed JSON, aiperf "
                "--artifact-dir, GuideLLM benchmarks.json, inference-perf's report directory, llm-d "
                "Benchmark Reports v0.2.x)."
            )
        ),
    ],
    out: Annotated[Path | None, typer.Option(help="The run directory to write (default runs/<file name>).")] = None,
) -> None:
    """Import another tool's per-request results as a tokenbench run directory: its records, and
    results.json by tokenbench's definitions, with the tool's own figures beside them and what
    explains each difference (results.json ``imported``). report, compare, history and export
    then read it as any run. A Benchmark Report holds aggregates only: its run has no records,
    and report and compare show the report's own figures for it."""
    from tokenbench.console.tables import imported_table, summary_table
    from tokenbench.imports import read, write_run_dir

    target = out or Path("runs") / file.stem
    try:
        run = read(file)
        results = write_run_dir(run, target)
    except _UNREADABLE as exc:
        fail(_naming(file, exc), 2)
    err.print(summary_table(results))
    err.print(imported_table(results))
    for point in results.imported.points if results.imported else ():
        for warning in point.warnings:
            err.print(Text(f"warning, point {point.index}: {warning}", style="yellow"))
    err.print(
        f"imported {run.tool} ({len(results.points)} points): {target}/results.json  records: {target}/records.jsonl"
    )


def _imported_from(d: Path) -> str | None:
    """The file an imported run directory came from (results.json ``imported``), else None."""
    from tokenbench.results.layout import RESULTS

    try:
        imported = json.loads((d / RESULTS).read_text()).get("imported")
    except (OSError, ValueError):
        return None
    return f"{imported.get('tool')}'s {imported.get('file')}" if isinstance(imported, dict) else None


def _naming(d: Path, exc: BaseException) -> str:
    """The error with the directory named once (most messages already start with it)."""
    text = str(exc)
    return text if text.startswith(str(d)) else f"{d}: {text}"


def export(
    dirs: Annotated[list[Path], typer.Argument(help="Run or experiment directories.")],
    format: Annotated[
        str,
        typer.Option(
            help="parquet or csv tables, or benchmark-report: each point as llm-d's Benchmark Report v0.2.1 JSON.",
            metavar="[parquet|csv|benchmark-report]",
        ),
    ] = "parquet",
    out: Annotated[Path | None, typer.Option(help="Where to write (default: each directory itself).")] = None,
) -> None:
    """Write records, points and time series as tables (records.parquet, points.parquet,
    timeseries.parquet, or .csv): one row per request / point / window, the run's facts as columns;
    or a run's points as llm-d Benchmark Reports (benchmark_report_<point>.json)."""
    from tokenbench.history.export import export as export_dir

    fmt = cast("Format", format)  # export() refuses any other, naming --format
    for d in dirs:
        try:
            files = export_dir(d, fmt, out / d.name if out is not None and len(dirs) > 1 else out)
        except _UNREADABLE as exc:
            fail(_naming(d, exc), 2)
        err.print("  ".join(f"{name}: {path}" for name, path in files.items()))


def compare(
    dirs: Annotated[list[Path], typer.Argument(help="Two or more run or experiment directories.")],
    out: Annotated[Path | None, typer.Option(help="Also write the comparison as Markdown here.")] = None,
    fail_on: Annotated[
        str | None,
        typer.Option(
            "--fail-on",
            help="Regression gates, e.g. 'ttft:p90:+5%,output_tokens_per_s:-3%': exit 1 when a change is "
            "significant (Holm-adjusted p<0.05) and beyond its limit in the bad direction (docs/usage.md).",
            metavar="GATES",
        ),
    ] = None,
    fail_on_model_change: Annotated[
        bool,
        typer.Option(
            "--fail-on-model-change",
            help="Exit 1 when the runs did not serve the same model (a different name, identity or fingerprint); "
            "without it a warning line.",
        ),
    ] = False,
) -> None:
    """Side by side with deltas, and whether each difference is significant across trials.

    With --fail-on, a regression gate for CI: one line per gate and load (FAIL, pass, UNTESTED).
    Exit codes: 0 no gate failed (or no --fail-on), 1 a gate failed, 2 bad input (a directory,
    the --fail-on spec), 5 no gate failed but one could not be tested (too few trials or values).
    Runs that did not serve the same model (name, the server's identity fields, the fingerprint of
    its greedy answers: results.json target.served_model) get one warning line each; exit 1 with
    --fail-on-model-change.
    """
    from tokenbench import compare as cmp

    if len(dirs) < 2:
        fail("compare needs at least two directories", 2)
    gates = None
    if fail_on is not None:
        from tokenbench.compare import gate

        gates = gate.parse_fail_on(fail_on)  # a bad spec: BadInput, exit 2, before anything is read
    _require_result_dirs(dirs)
    result = cmp.comparison(dirs)  # no load in common: BadInput, exit 2
    console().print(cmp.compare_table(result))
    from tokenbench.compare.served_models import model_warnings, served_of

    served = [s for s in (served_of(d) for d in dirs) if s is not None]
    changed = model_warnings(served)
    for line in changed:  # one line each: which model each run served
        console().print(Text(line, style="yellow"))
    if out is not None:
        out.write_text(cmp.compare_markdown(result))
        err.print(f"comparison: {out}")
    if gates is not None:
        from tokenbench.compare import gate

        results = gate.gate_dirs(dirs, gates)
        for r in results:
            style = {"fail": "bold red", "pass": "green", "untested": "yellow"}[r.verdict]
            console().print(Text(r.line(), style=style))
        code = gate.exit_code(results)
        failed = sum(r.verdict == "fail" for r in results)
        untested = sum(r.verdict == "untested" for r in results)
        err.print(
            f"gates: {failed} failed, {untested} untested, {len(results) - failed - untested} passed (exit {code})"
        )
        if code:
            raise typer.Exit(code)
    if changed and fail_on_model_change:
        err.print(f"--fail-on-model-change: {len(changed)} run(s) served another model (exit 1)")
        raise typer.Exit(1)


def agree(
    a: Annotated[Path, typer.Argument(help="A run directory (--keep-text).")],
    b: Annotated[Path, typer.Argument(help="Another run that sent the same prompts (--keep-text).")],
    out: Annotated[
        Path | None, typer.Option(help="Where to write the paired outputs as JSON (default: A/agreement.json).")
    ] = None,
) -> None:
    """Paired outputs: did two runs that sent the same prompts (temperature 0, --keep-text) give
    the same answers? Each request matched to its twin by prompt_hash, point by point: identical
    or not, where they first differ, how alike the rest is, the share identical with its Wilson
    95% interval. Speed is compare's question; this is the answers'."""
    from tokenbench.compare.agreement import agreement_of, agreement_table, write_agreement
    from tokenbench.results.layout import AGREEMENT
    from tokenbench.rundir.read import is_run_dir

    for d in (a, b):
        if not is_run_dir(d):
            fail(f"{d}: not a run directory (results.json)", 2)
    try:
        agreement = agreement_of(a, b)
    except _UNREADABLE as exc:
        fail(str(exc), 2)
    console().print(agreement_table(agreement))
    path = out or a / AGREEMENT
    write_agreement(agreement, path)
    err.print(f"paired outputs: {path}")


def history(
    dirs: Annotated[
        list[Path], typer.Argument(help="Run or experiment directories, or folders holding them (searched).")
    ],
    out: Annotated[Path, typer.Option(help="Where to write history.parquet and history.html.")] = Path("history"),
) -> None:
    """Gather many runs and experiments into one table (history.parquet: a row per point and
    trial, keyed by engine, version, model, knobs, dataset, load and date, every headline metric a
    column) and a trend page (history.html): each headline metric over time per configuration,
    change points marked (binary segmentation on the mean, BIC-style penalty; docs/usage.md)."""
    from tokenbench.history import history as gather_history

    try:
        made = gather_history(dirs, out)
    except _UNREADABLE as exc:
        fail(str(exc), 2)
    err.print(f"history: {made.table} ({made.rows} rows from {made.runs} runs)  trends: {made.page}")
    for c in made.changes:
        err.print(Text(f"change point: {c.config}: {c.text()} at {c.at.source} ({c.at.date:%Y-%m-%d %H:%M})"))
