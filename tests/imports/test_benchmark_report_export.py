"""``tokenbench export DIR --format benchmark-report``: each point of a run as llm-d's Benchmark
Report v0.2.1, valid against llm-d-benchmark's own JSON schema (tests/fixtures/benchmark_report),
its figures the run's own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from tokenbench.imports import read, write_run_dir

SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "benchmark_report" / "br_v0_2_1_json_schema.json"
IMPORTED = Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "vllm-bench-serve-0.32-vllm-rate.json"


def test_a_native_runs_points_are_valid_reports_with_its_figures(mock_server, tmp_path):
    from run_helpers import quiet

    from tokenbench.config import DatasetConfig, RateLoad, RunConfig, StopConfig, TargetConfig, UsersLoad
    from tokenbench.run import run

    config = RunConfig(
        target=TargetConfig(url=mock_server(ttft_ms=20, itl_ms=5), api="chat"),
        loads=[UsersLoad(users=2), RateLoad(rate_per_s=20)],
        stop=StopConfig(max_requests=8, drain_timeout_s=10),
        dataset=DatasetConfig(input_tokens=16, output_tokens=8),
        live=False,
        out_dir=tmp_path / "run",
    )
    result = run(config, quiet())
    proc = subprocess.run(
        [sys.executable, "-m", "tokenbench", "export", str(result.run_dir), "--format", "benchmark-report"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    schema = json.loads(SCHEMA.read_text())
    for point in result.results["points"]:
        report = json.loads((result.run_dir / f"benchmark_report_{point['index']}.json").read_text())
        jsonschema.validate(report, schema)
        assert report["version"] == "0.2.1"
        aggregate = report["results"]["request_performance"]["aggregate"]
        assert aggregate["latency"]["time_to_first_token"]["mean"] == point["ttft_s"]["mean"]
        assert aggregate["latency"]["time_to_first_token"]["units"] == "s"
        assert aggregate["latency"]["time_per_output_token"]["p99"] == point["tpot_s"]["p99"]
        assert aggregate["throughput"]["output_token_rate"]["mean"] == point["output_tokens_per_s"]
        assert aggregate["requests"]["total"] == point["requests"]["total"]
        assert aggregate["requests"]["output_length"]["mean"] == pytest.approx(8)
        load = report["scenario"]["load"]["standardized"]
        assert load["tool"] == "tokenbench" and load["stage"] == point["index"]
        assert load.get("concurrency") == (2 if point["load"]["kind"] == "users" else None)
        assert load.get("rate_qps") == (20 if point["load"]["kind"] == "rate" else None)
        # the mock speaks vLLM's metric names only with --backend vllm: no observability here
        assert "observability" not in report["results"]


def test_an_imported_run_exports_too(tmp_path):
    """vLLM bench's file, through tokenbench, to llm-d's report: its failures counted per request."""
    from tokenbench.history.benchmark_report import benchmark_reports

    run_dir = tmp_path / "imported"
    write_run_dir(read(IMPORTED), run_dir)
    (report,) = benchmark_reports(run_dir).values()
    jsonschema.validate(report, json.loads(SCHEMA.read_text()))
    requests = report["results"]["request_performance"]["aggregate"]["requests"]
    assert requests == {**requests, "total": 40, "failures": 0, "incomplete": 0}
    # its wall clock from vLLM bench's date (when it saved the file) less its duration
    saved = json.loads(IMPORTED.read_text())["date"]
    assert report["run"]["time"]["start"][:10] == f"{saved[:4]}-{saved[4:6]}-{saved[6:8]}"
