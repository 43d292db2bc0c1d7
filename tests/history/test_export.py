"""tokenbench export: records, points and windows as Parquet/CSV tables with the run's facts."""

from __future__ import annotations

import io
import json
import shutil

import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.history.export import ExportError, export
from tokenbench.run import run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, module_mock_server):
    url = module_mock_server(ttft_ms=10, itl_ms=2)
    out = tmp_path_factory.mktemp("export") / "run"
    cfg = RunConfig(
        target=TargetConfig(url=url),
        loads=[UsersLoad(users=1), UsersLoad(users=2)],
        stop=StopConfig(duration_s=1.5),
        dataset=DatasetConfig(input_tokens=4, output_tokens=6),
        window_s=0.5,
        live=False,
        out_dir=out,
    )
    run(cfg, Console(file=io.StringIO()))
    return out


def test_parquet_tables_hold_every_request_point_and_window(run_dir, tmp_path):
    files = export(run_dir, "parquet", tmp_path / "pq")
    records = pq.read_table(files["records"]).to_pylist()
    lines = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    assert len(records) == len(lines)
    by_id = {r["id"]: r for r in records}
    for line in lines:
        row = by_id[line["id"]]
        assert row["chunk_times_s"] == line["chunk_times_s"] and row["outcome"] == line["outcome"]
        assert row["run_dir"] == str(run_dir) and row["api"] == "chat" and row["tool_version"]
        if line["outcome"] == "ok":
            assert row["ttft_s"] == pytest.approx(line["chunk_times_s"][0] - line["sent_s"])
            assert row["ttfo_s"] == row["ttft_s"]  # no reasoning: the first chunk is the first output
            assert row["chunks"] == len(line["chunk_times_s"])
    results = json.loads((run_dir / "results.json").read_text())
    points = pq.read_table(files["points"]).to_pylist()
    assert [p["point"] for p in points] == [0, 1]
    for row, point in zip(points, results["points"]):
        assert row["ttft_s_p99"] == point["ttft_s"]["p99"]
        assert row["requests_by_outcome_ok"] == point["requests"]["by_outcome"].get("ok")
        assert row["output_tokens_per_s"] == point["output_tokens_per_s"]
        assert row["load_users"] == point["load"]["users"]
    windows = pq.read_table(files["timeseries"]).to_pylist()
    assert len(windows) == sum(len(p["timeseries"]) for p in results["points"])
    assert {w["point"] for w in windows} == {0, 1}


def test_csv_tables_and_an_experiment(run_dir, tmp_path):
    experiment = tmp_path / "exp"
    shutil.copytree(run_dir, experiment / "cells" / "a")
    shutil.copytree(run_dir, experiment / "cells" / "b")
    (experiment / "experiment.json").write_text(
        json.dumps(
            {
                "name": "e",
                "cells": {
                    "a": {"run_dir": "cells/a", "server": "s1", "variant": "v", "trial": 0, "status": "ok"},
                    "b": {"run_dir": "cells/b", "server": "s1", "variant": "v", "trial": 1, "status": "ok"},
                },
            }
        )
    )
    files = export(experiment, "csv")
    assert files["records"] == experiment / "records.csv"
    records = pa_csv.read_csv(files["records"]).to_pylist()
    n = len((run_dir / "records.jsonl").read_text().splitlines())
    assert len(records) == 2 * n and {r["trial"] for r in records} == {0, 1}
    assert json.loads(records[0]["chunk_times_s"])  # a list is a JSON string in CSV
    points = pa_csv.read_csv(files["points"]).to_pylist()
    assert len(points) == 4 and {p["experiment"] for p in points} == {"e"}


def test_a_directory_without_results_is_refused(tmp_path):
    with pytest.raises(ExportError, match="no results.json"):
        export(tmp_path, "parquet")
    with pytest.raises(ExportError, match="parquet, csv or benchmark-report"):
        export(tmp_path, "xlsx")  # type: ignore[arg-type]
