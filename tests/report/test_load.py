"""Reading run and experiment directories (report/load.py, files.py, run_dir.py, experiment_dir.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenbench.report import write_report
from tokenbench.report.files import ReportInputError
from tokenbench.report.load import load_inputs


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
