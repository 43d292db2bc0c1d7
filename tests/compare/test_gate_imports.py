"""The regression gate (`compare --fail-on`) on imported runs: vLLM bench, AIPerf and GuideLLM
files (tests/fixtures/imports, real runs against the mock) keep their requests, so an imported run
is gated as a native one, by tokenbench's figures and the per-request values behind them: it
passes against itself, fails against a slower copy of itself and against a slower native mock
run. (A Benchmark Report, aggregates only, is gated in tests/imports/test_benchmark_report_import.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_helpers import quiet
from typer.testing import CliRunner

from tokenbench.cli import app
from tokenbench.compare.gate import gate_dirs, parse_fail_on
from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.imports import read, write_run_dir
from tokenbench.run import run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
# each at 4 concurrent requests, 40 of them, the mock's TTFT 50 ms and a token every 20 ms, 20 tokens
CONCURRENT = {
    "vllm-bench-serve": FIXTURES / "vllm-bench-serve-0.32-vllm-concurrency.json",
    "aiperf": FIXTURES / "aiperf-0.13.0-concurrency",
    "guidellm": FIXTURES / "guidellm-0.8.1-concurrency.json",
}
GATES = "ttft:p90:+5%,e2e:p50:+5%,tpot:mean:+5%"


def _gate(base: Path, new: Path, spec: str = GATES) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, ["compare", str(base), str(new), "--fail-on", spec], env={"COLUMNS": "400"})
    lines = [line for line in result.stdout.splitlines() if line.startswith(("FAIL", "pass", "UNTESTED"))]
    return result.exit_code, lines


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("gate-imports")
    runs = {}
    for tool, source in CONCURRENT.items():
        write_run_dir(read(source), out / tool)
        runs[tool] = out / tool
    return runs


@pytest.mark.parametrize("tool", list(CONCURRENT))
def test_an_imported_run_passes_against_itself(imported, tool):
    code, lines = _gate(imported[tool], imported[tool])
    assert code == 0, lines
    assert len(lines) == 3 and all(line.startswith("pass") for line in lines), lines
    # tested over the tool's requests, as a native run's
    assert all("40/40 requests" in line for line in lines), lines


def test_a_slower_copy_of_an_import_fails(imported, tmp_path):
    """vLLM bench's file with every TTFT 50% longer (the rest of each reply as it was)."""
    data = json.loads(CONCURRENT["vllm-bench-serve"].read_text())
    extra = [t * 0.5 for t in data["ttfts"]]
    data["ttfts"] = [t + e for t, e in zip(data["ttfts"], extra)]
    data["latencies"] = [lat + e for lat, e in zip(data["latencies"], extra)]
    slower = tmp_path / "slower.json"
    slower.write_text(json.dumps(data))
    write_run_dir(read(slower), tmp_path / "slower")
    code, lines = _gate(imported["vllm-bench-serve"], tmp_path / "slower", "ttft:p90:+5%,tpot:mean:+5%")
    assert code == 1, lines
    (fail,) = [line for line in lines if line.startswith("FAIL")]
    assert "ttft:p90" in fail and "beyond +5.0%" in fail and "significant" in fail
    # TPOT is (E2E - TTFT) / (tokens - 1): unchanged, so its gate passes
    assert any(line.startswith("pass tpot:mean") for line in lines), lines


def test_an_import_against_a_slower_native_run_fails(imported, mock_server, tmp_path):
    """The same load (4 users, 40 requests) on the mock with twice the TTFT the files were made at."""
    config = RunConfig(
        target=TargetConfig(url=mock_server(ttft_ms=100, itl_ms=20), api="chat"),
        loads=[UsersLoad(users=4)],
        stop=StopConfig(max_requests=40, drain_timeout_s=10),
        dataset=DatasetConfig(input_tokens=32, output_tokens=20),
        live=False,
        out_dir=tmp_path / "native",
    )
    native = run(config, quiet()).run_dir
    for tool in CONCURRENT:
        results = gate_dirs([imported[tool], native], parse_fail_on("ttft:p90:+5%"))
        (ttft,) = results
        assert ttft.verdict == "fail", ttft.line()
        assert ttft.baseline == pytest.approx(0.050, abs=0.01) and ttft.other > 0.095, ttft.line()
    # and the other way round: the native run as the baseline, the import faster: a pass
    (back,) = gate_dirs([native, imported["aiperf"]], parse_fail_on("ttft:p90:+5%"))
    assert back.verdict == "pass", back.line()
