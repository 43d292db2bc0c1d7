"""A run directory's results, read through their types: a run's results.json (``read_results``:
``RunResults``) and an experiment's experiment.json (``read_experiment``: ``Experiment``), the one
reader every command uses. Only these are read, never samples.jsonl:
the report shows what the run wrote. One exception: a run with server spans has its slowest
requests read from records.jsonl and server_spans.jsonl (run_dir.slow_rows, by spans.phases' join).

A file that is missing, is not JSON, or does not validate raises ``ReportInputError`` naming it;
one written in an older layout says to run ``tokenbench recompute`` on its directory.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from tokenbench.errors import BadInput
from tokenbench.results.experiment import Experiment
from tokenbench.results.layout import EXPERIMENT, RESULTS
from tokenbench.results.run import RunResults

T = TypeVar("T")


class ReportInputError(BadInput):
    """A directory that is neither a run nor an experiment, or a file that does not parse."""


class StaleLayoutError(ReportInputError):
    """A file that parses but is not in the layout this version reads."""


def is_experiment_dir(path: Path) -> bool:
    return (path / EXPERIMENT).is_file()


def is_run_dir(path: Path) -> bool:
    return (path / RESULTS).is_file()


def read_json(path: Path) -> dict[str, Any]:  # a file's JSON object, any shape: the callers validate it
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ReportInputError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ReportInputError(f"{path}: expected a JSON object at the top level")
    return data


def _stale(path: Path, exc: ValidationError) -> StaleLayoutError:
    first = exc.errors()[0]
    where = ".".join(str(x) for x in first["loc"]) or "top level"
    return StaleLayoutError(
        f"{path}: not in the layout this tokenbench reads ({where}: {first['msg']}; "
        f"{exc.error_count()} problem(s)); run `tokenbench recompute {path.parent}` to rewrite it"
    )


def read_typed(path: Path, parse: Callable[[dict[str, Any]], T]) -> T:
    """A results file read through its type (``parse``: e.g. ``RunResults.from_json``,
    ``Experiment.from_json``); one that does not validate is in an older layout: recompute it."""
    data = read_json(path)
    try:
        return parse(data)
    except ValidationError as exc:
        raise _stale(path, exc) from None


def read_results(run_dir: Path) -> RunResults:
    """A run directory's results.json, typed: ``ReportInputError`` naming the file when it is
    missing or not JSON, ``StaleLayoutError`` (recompute it) when it is in an older layout."""
    return read_typed(run_dir / RESULTS, RunResults.from_json)


def read_experiment(experiment_dir: Path) -> Experiment:
    """An experiment directory's experiment.json, typed (the errors as ``read_results``')."""
    return read_typed(experiment_dir / EXPERIMENT, Experiment.from_json)
