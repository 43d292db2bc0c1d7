"""experiments/recompute.py: `tokenbench recompute` of an experiment directory. Every cell with
records gets its results.json again (the same numbers), a cell killed while it ran becomes
``interrupted``, the aggregates are computed again from the cells, and the file it replaced is
kept as experiment.previous.json. (Named like test_experiment_run.py: pytest imports test files by basename.)"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from tokenbench.experiments.recompute import recompute_experiment
from tokenbench.experiments.runner import run_experiment
from tokenbench.experiments.spec import parse_spec


@pytest.fixture(scope="module")
def finished(module_mock_server, tmp_path_factory) -> Path:
    """One experiment, run once: two trials of one point, both finished."""
    out = tmp_path_factory.mktemp("recompute") / "exp"
    _experiment(module_mock_server(ttft_ms=5, itl_ms=2), out)
    return out


def _copy(finished: Path, tmp_path: Path) -> tuple[Path, dict]:
    out = tmp_path / "exp"
    shutil.copytree(finished, out)
    return out, json.loads((out / "experiment.json").read_text())


def _experiment(url: str, out: Path) -> None:
    spec = parse_spec(
        {
            "name": "recompute-exp",
            "backends": [{"label": "mock", "url": url}],
            "load": {"users": [1]},
            "stop": {"max_requests": 4},
            "dataset": {"input_tokens": 8, "output_tokens": 4, "num_prompts": 8},
            "trials": 2,
            "api": "chat",
        }
    )
    run_experiment(spec, out, Console(file=io.StringIO()))


def test_recompute_gives_the_same_numbers_and_marks_a_killed_cell(finished, tmp_path):
    out, before = _copy(finished, tmp_path)
    assert [c["status"] for c in before["cells"].values()] == ["ok", "ok"]
    killed, finished = list(before["cells"])
    results_before = json.loads((out / before["cells"][finished]["run_dir"] / "results.json").read_text())

    edited = json.loads(json.dumps(before))
    edited["cells"][killed]["status"] = "running"  # as if the experiment died during this cell
    (out / "experiment.json").write_text(json.dumps(edited))

    state = recompute_experiment(out)

    assert state["cells"][killed]["status"] == "interrupted"
    assert state["cells"][killed]["error"] == "the experiment was killed during this cell; recomputed from its records"
    assert state["cells"][finished]["status"] == "ok"
    assert state["computed_by"]["how"] == "recompute"
    assert json.loads((out / "experiment.json").read_text()) == state
    assert json.loads((out / "experiment.previous.json").read_text()) == edited
    results_after = json.loads((out / before["cells"][finished]["run_dir"] / "results.json").read_text())
    assert results_after["points"] == results_before["points"]  # the same records: the same numbers
    assert results_after["computed_by"]["how"] == "recompute"
    # the interrupted cell's trial no longer counts among the finished ones
    (row,) = state["aggregates"]
    (row_before,) = before["aggregates"]
    assert row_before["metrics"]["requests_per_s"]["n"] == 2
    assert row["metrics"]["requests_per_s"]["n"] == 1
    assert row["metrics"]["requests_per_s"]["values"] == [results_after["points"][0]["requests_per_s"]]


def test_a_cell_without_records_is_left_as_it_was(finished, tmp_path):
    out, before = _copy(finished, tmp_path)
    first = next(iter(before["cells"].values()))
    (out / first["run_dir"] / "records.jsonl").unlink()
    edited = json.loads(json.dumps(before))
    next(iter(edited["cells"].values()))["status"] = "running"
    (out / "experiment.json").write_text(json.dumps(edited))

    state = recompute_experiment(out)

    assert [c["status"] for c in state["cells"].values()] == ["running", "ok"]
