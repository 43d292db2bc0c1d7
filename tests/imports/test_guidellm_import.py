"""``tokenbench import`` of GuideLLM 0.8.1's benchmarks.json, files made by real ``guidellm run``s
against the mock (benchmarks/conformance.py --save-fixtures): each request a record with its first
and last content chunk (all GuideLLM keeps), results.json tokenbench's over them, and GuideLLM's
own summaries beside with the definition that explains each difference."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tokenbench.errors import BadInput
from tokenbench.imports import read, write_run_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
# the mock streaming as vLLM does (--opening-chunk with-first-token), at Poisson 4 req/s and at 4
# concurrent streams, 40 requests of ~32 prompt tokens and 20 output tokens
RATE = FIXTURES / "guidellm-0.8.1-rate.json"
CONCURRENT = FIXTURES / "guidellm-0.8.1-concurrency.json"
# the mock's script when the files were made: TTFT 50 ms, a token every 20 ms, 20 tokens
TTFT_S, ITL_S, TOKENS = 0.050, 0.020, 20


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module", params=[RATE, CONCURRENT], ids=["rate", "concurrent"])
def imported(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("guidellm") / request.param.stem
    return request.param, write_run_dir(read(request.param), out), out


def test_guidellm_requests_are_records_with_their_first_and_last_token(imported):
    source_path, results, out = imported
    (benchmark,) = json.loads(source_path.read_text())["benchmarks"]
    source = sorted(benchmark["requests"]["successful"], key=lambda r: r["info"]["timings"]["request_start"])
    records = _records(out)
    assert len(records) == len(source) == results.points[0].requests.total == 40
    for r, s in zip(records, source):
        t = s["info"]["timings"]
        assert r["outcome"] == "ok" and r["output_tokens"] == s["output_tokens"] == TOKENS
        assert r["prompt_tokens"] == s["prompt_tokens"] and r["output_tokens_source"] == "server"
        # GuideLLM keeps the first and last content chunk, none between
        assert len(r["chunk_times_s"]) == 2
        assert r["chunk_times_s"][0] - r["sent_s"] == pytest.approx(t["first_token_iteration"] - t["request_start"])
        assert r["chunk_times_s"][1] - r["sent_s"] == pytest.approx(t["last_token_iteration"] - t["request_start"])
        assert r["closed_s"] - r["sent_s"] == pytest.approx(s["request_latency"])
    assert results.target.api == "chat" and results.target.model == "mock-model"
    assert results.imported is not None and results.imported.tool == "guidellm"
    assert results.imported.version == "0.8.1" and "finish_reason" in results.imported.not_recorded
    # no gaps between chunks were recorded: no ITL, rather than one gap spanning each reply
    assert results.points[0].itl_s.count == 0 and results.points[0].fluidity is None


def test_guidellm_figures_match_where_the_definitions_agree(imported):
    """TTFT's mean is the same moments in both; TPOT's mean too while every reply has 20 tokens
    (GuideLLM weights each request by its tokens - 1); the rates agree over these runs (no warmup,
    every request in the window); medians differ by the percentile method only."""
    _, results, _ = imported
    figures = {f.metric: f for f in results.imported.points[0].figures}
    assert figures["ttft_s_mean"].same_definition
    for key in ("ttft_s_mean", "ttft_s_p50", "tpot_s_mean", "tpot_s_p50", "requests_per_s", "output_tokens_per_s"):
        assert abs(figures[key].difference) < 0.005, (key, figures[key])


def test_guidellm_differences_name_their_definition(imported):
    _, results, _ = imported
    figures = {f.metric: f for f in results.imported.points[0].figures}
    e2e = figures["e2e_s_mean"]
    # GuideLLM's request latency ends at the stream's close, after the last token
    assert not e2e.same_definition and "[DONE]" in e2e.definition
    assert 0 < e2e.difference < 0.01
    tpot = figures["tpot_s_mean"]
    assert not tpot.same_definition and "inter_token_latency_ms" in tpot.tool_name
    assert "normalized latency" in tpot.definition and "weights" in tpot.definition
    assert "interpolate" in figures["ttft_s_p99"].definition
    assert "warmup" in figures["requests_per_s"].definition


def test_tokenbench_holds_the_mocks_script_over_guidellms_requests(imported):
    _, results, _ = imported
    point = results.points[0]
    assert point.ttft_s.mean == pytest.approx(TTFT_S, abs=0.004)
    assert point.tpot_s.mean == pytest.approx(ITL_S, abs=0.001)
    assert point.e2e_s.mean == pytest.approx(TTFT_S + (TOKENS - 1) * ITL_S, abs=0.005)
    # GuideLLM's TPOT is E2E / output tokens: tokenbench's normalized latency
    (benchmark,) = json.loads(imported[0].read_text())["benchmarks"]
    theirs = benchmark["metrics"]["time_per_output_token_ms"]["successful"]["mean"] / 1e3
    assert point.normalized_latency_s.mean == pytest.approx(theirs, rel=0.005)


def test_guidellm_loads_are_tokenbenchs():
    (rate,) = read(RATE).points
    assert rate.load.kind == "rate" and rate.load.rate_per_s == 4 and rate.load.arrival == "poisson"
    assert rate.load.max_concurrency is None  # GuideLLM's worker limit is not a cap asked for
    (users,) = read(CONCURRENT).points
    assert users.load.kind == "users" and users.load.users == 4


def test_guidellm_bad_input_is_refused_naming_what_to_pass(tmp_path):
    data = json.loads(RATE.read_text())
    data["metadata"]["guidellm_version"] = "0.3.0"
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    with pytest.raises(BadInput, match=r"GuideLLM 0\.3\.0.*guidellm==0\.8\.1"):
        read(old)
    data = json.loads(RATE.read_text())
    for status in ("successful", "errored", "incomplete"):
        data["benchmarks"][0]["requests"][status] = []
    empty = tmp_path / "no-requests.json"
    empty.write_text(json.dumps(data))
    with pytest.raises(BadInput, match="without its requests.*--output kind=json"):
        read(empty)


def test_guidellm_errored_and_incomplete_requests_are_failed(tmp_path):
    data = json.loads(RATE.read_text())
    requests = data["benchmarks"][0]["requests"]
    errored, cut = requests["successful"][:2]
    errored["info"]["status"], errored["info"]["error"] = "errored", "HTTP 500"
    cut["info"]["status"] = "cancelled"
    requests["successful"], requests["errored"], requests["incomplete"] = requests["successful"][2:], [errored], [cut]
    path = tmp_path / "failures.json"
    path.write_text(json.dumps(data))
    results = write_run_dir(read(path), tmp_path / "out")
    outcomes = [r["outcome"] for r in _records(tmp_path / "out")]
    assert len(outcomes) == 40 and outcomes.count("stream_error") == 2
    errors = {r["error"] for r in _records(tmp_path / "out") if r["outcome"] != "ok"}
    assert errors == {"HTTP 500", "GuideLLM status cancelled"}
    assert results.points[0].requests.total == 40


def test_a_poisson_schedule_that_started_at_the_epoch_is_warned_of(tmp_path):
    """GuideLLM 0.8.1's Poisson start race, as seen here in two of five runs: every target time
    seconds after the Unix epoch, and the requests sent as fast as the workers went (the same
    file with its targets and sends moved to that shape)."""
    assert write_run_dir(read(RATE), tmp_path / "good").imported.points[0].warnings == []
    data = json.loads(RATE.read_text())
    benchmark = data["benchmarks"][0]
    start = benchmark["start_time"]
    for i, r in enumerate(benchmark["requests"]["successful"]):
        timings = r["info"]["timings"]
        timings["targeted_start"] = 0.25 * i  # from the epoch, not from the benchmark's start
        shift = start + 0.02 * i - timings["request_start"]  # 50 req/s: each as a worker frees
        for name in ("request_start", "first_token_iteration", "last_token_iteration", "request_end"):
            timings[name] += shift
    path = tmp_path / "raced.json"
    path.write_text(json.dumps(data))
    warnings = write_run_dir(read(path), tmp_path / "raced").imported.points[0].warnings
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("GuideLLM's schedule did not start with the benchmark: 40 of 40 requests")
    assert "GuideLLM sent 50.00 req/s for the 4 req/s asked" in warnings[1]
    out = tmp_path / "cli"
    cmd = [sys.executable, "-m", "tokenbench", "import", str(path), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "250"})
    assert proc.returncode == 0 and "warning, point 0: GuideLLM sent 50.00 req/s" in proc.stderr, proc.stderr[-2000:]
    report = tmp_path / "report"
    cmd = [sys.executable, "-m", "tokenbench", "report", str(out), "--out", str(report)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "GuideLLM sent 50.00 req/s" in (report / "report.md").read_text()


def test_guidellm_cli_import(tmp_path):
    out = tmp_path / "imported"
    cmd = [sys.executable, "-m", "tokenbench", "import", str(CONCURRENT), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "guidellm's figures vs tokenbench's" in proc.stderr and "[DONE]" in proc.stderr
    assert json.loads((out / "results.json").read_text())["imported"]["tool"] == "guidellm"
