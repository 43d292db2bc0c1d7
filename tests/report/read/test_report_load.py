"""Reading run and experiment directories (report/load.py, files.py, run_dir.py, experiment_dir.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenbench.report import write_report
from tokenbench.report.read.load import load_inputs
from tokenbench.rundir.read import ReportInputError


def test_experiment_reads_cells_outcomes(rate_experiment: Path) -> None:
    data = load_inputs([rate_experiment])
    row = next(r for r in data.rows if r.config == "sglang" and r.label == "8 req/s")
    assert row.outcomes == {"ok": 120, "timeout": 6}  # summed over 3 trials
    assert row.num_trials == 3
    exp = json.loads((rate_experiment / "experiment.json").read_text())
    assert len(data.series) == len(exp["cells"])


def test_not_a_result_directory(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match="neither a run directory"):
        write_report([tmp_path], tmp_path / "out")


def test_an_old_results_layout_says_to_recompute(tmp_path: Path) -> None:
    run = tmp_path / "old-run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"target": {"backend": "vllm"}, "points": []}))
    with pytest.raises(
        ReportInputError, match=r"old-run/results\.json: not in the layout .* run .tokenbench recompute .*old-run."
    ):
        load_inputs([run])


def test_an_old_cell_layout_says_to_recompute(rate_experiment: Path) -> None:
    cell = rate_experiment / "cells" / "sglang__default__t1" / "results.json"
    data = json.loads(cell.read_text())
    del data["points"][0]["requests_in_window"]  # written before it existed
    cell.write_text(json.dumps(data))
    with pytest.raises(ReportInputError, match="sglang__default__t1/results.json.*requests_in_window"):
        load_inputs([rate_experiment])


def test_a_cell_killed_mid_write_keeps_its_aggregate(rate_experiment: Path) -> None:
    (rate_experiment / "cells" / "sglang__default__t1" / "results.json").write_text('{"points": [')
    data = load_inputs([rate_experiment])
    row = next(r for r in data.rows if r.config == "sglang" and r.label == "8 req/s")
    assert row.num_trials == 3 and row.outcomes == {"ok": 80, "timeout": 4}  # two cells' outcomes left
