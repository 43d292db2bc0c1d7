"""`tokenbench history` (history/): 12 run directories with a planted 15% throughput drop at the
7th run (an engine upgrade) -> one Parquet table keyed by engine, version, model, knobs, load and
date, and a trend page marking the change at the right run; the change-point rule's known answers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tokenbench.cli import app
from tokenbench.errors import BadInput
from tokenbench.history import KEY_COLUMNS, change_points, history

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "rundirs" / "0.2.1-workers" / "results.json"
DAY_S = 86400.0
RUNS, STEP_AT = 12, 6


def write_runs(root: Path) -> list[Path]:
    """12 nightly runs of one server (2 loads each): at 4 req/s output throughput ~100 tok/s with 1%
    noise, 85 from run 6 on (version 0.10.0); 6 req/s unchanged."""
    template = json.loads(FIXTURE.read_text())
    rng = np.random.default_rng(5)
    dirs = []
    for i in range(RUNS):
        data = json.loads(json.dumps(template))
        data["target"].update(
            engine="vllm", engine_version="0.9.0" if i < STEP_AT else "0.10.0", knobs={"max_num_seqs": 8}
        )
        data["clock"]["origin_unix_s"] = 1.79e9 + i * DAY_S
        low, high = data["points"]
        low["output_tokens_per_s"] = 100.0 * (0.85 if i >= STEP_AT else 1.0) * (1 + 0.01 * rng.standard_normal())
        high["output_tokens_per_s"] = 150.0 * (1 + 0.01 * rng.standard_normal())
        d = root / "nightly" / f"run-{i:02d}"
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps(data))
        dirs.append(d)
    return dirs


def test_history_table_and_the_planted_change(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    write_runs(tmp_path)
    made = history([tmp_path / "nightly"], tmp_path / "out")  # a folder of runs: searched
    table = pq.read_table(made.table)
    assert table.num_rows == 2 * RUNS and made.runs == RUNS
    assert set(KEY_COLUMNS) <= set(table.column_names) and "output_tokens_per_s" in table.column_names
    assert str(table.schema.field("date").type).startswith("timestamp")
    rows = table.to_pylist()
    assert {r["version"] for r in rows} == {"0.9.0", "0.10.0"} and rows[0]["knobs"] == '{"max_num_seqs": 8}'
    assert [r["date"] for r in rows] == sorted(r["date"] for r in rows)

    # the only change: the planted one (the other metrics are the same in every run)
    assert len(made.changes) == 1, [c.text() for c in made.changes]
    [change] = made.changes
    assert change.metric.key == "output_tokens_per_s"
    assert change.config.endswith("4 req/s poisson") and change.at.source.endswith("run-06")
    assert change.previous_version == "0.9.0" and change.at.version == "0.10.0"
    assert change.point.change == pytest.approx(-0.15, abs=0.01)

    page = made.page.read_text()
    assert 'id="trend-output_tokens_per_s"' in page and 'id="change-points"' in page
    assert "run-06" in page and "0.9.0 → 0.10.0" in page and "Plotly" in page


def test_cli_writes_both_and_names_the_change(tmp_path: Path) -> None:
    dirs = write_runs(tmp_path)
    result = CliRunner().invoke(app, ["history", *map(str, dirs), "--out", str(tmp_path / "h")], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert (tmp_path / "h" / "history.parquet").is_file() and (tmp_path / "h" / "history.html").is_file()
    assert "change point:" in result.output and "run-06" in result.output
    result = CliRunner().invoke(app, ["history", str(tmp_path / "h")])  # no run in it
    assert result.exit_code == 2 and "no run (results.json) or experiment" in result.output


def test_change_points_known_answers() -> None:
    [cp] = change_points([1.0] * 5 + [2.0] * 5)
    assert (cp.index, cp.before, cp.after) == (5, 1.0, 2.0)
    assert change_points([3.0] * 10) == [] and change_points([1.0, 2.0, 1.0]) == []
    assert change_points([0.1 + 0.2, 0.3] * 6) == []  # equal up to rounding: no change
    assert change_points([1.0] * 6 + [9.0] + [1.0] * 6) == []  # one odd run is not a change (segments >= 2)
    two = change_points([10.0] * 6 + [12.0] * 6 + [9.0] * 6)
    assert [c.index for c in two] == [6, 12]
    # flat noise: a change in few of 100 seeded 12-run series (4% of 300 measured)
    false = sum(bool(change_points(1 + 0.02 * np.random.default_rng(s).standard_normal(12))) for s in range(100))
    assert false <= 10


def test_not_a_directory_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="not a directory"):
        history([tmp_path / "missing"], tmp_path / "out")
