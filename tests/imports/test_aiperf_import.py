"""``tokenbench import`` of AIPerf 0.13.0 artifacts directories made by real ``aiperf profile``
runs against the mock (benchmarks/conformance.py --save-fixtures): the requests become records,
results.json is tokenbench's over them, and AIPerf's own figures sit beside with the definition
that explains each difference."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tokenbench.errors import BadInput
from tokenbench.imports import read, write_run_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
# the mock streaming as vLLM does (its role-only opening chunk in the first token's write), at
# 4 req/s (Poisson) and at 4 concurrent requests, 40 requests each
AIPERF_RATE = FIXTURES / "aiperf-0.13.0-rate"
AIPERF_CAP = FIXTURES / "aiperf-0.13.0-concurrency"
# the mock's script when the files were made: TTFT 50 ms, a token every 20 ms, 20 tokens
TTFT_S, ITL_S, TOKENS = 0.050, 0.020, 20
E2E_S = TTFT_S + (TOKENS - 1) * ITL_S
# the figures whose definitions agree (AIPerf times only responses with content)
SAME = (
    "ttft_s_mean",
    "ttft_s_p50",
    "ttft_s_p99",
    "tpot_s_mean",
    "tpot_s_p50",
    "tpot_s_p99",
    "itl_s_mean",
    "e2e_s_mean",
    "e2e_s_p50",
    "e2e_s_p99",
)


def _lines(directory: Path) -> list[dict]:
    return [json.loads(line) for line in (directory / "profile_export.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module", params=[AIPERF_RATE, AIPERF_CAP], ids=["rate", "concurrency"])
def aiperf_run(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("aiperf") / request.param.name
    return request.param, write_run_dir(read(request.param), out), out


def test_aiperf_each_request_is_a_record_with_its_chunks(aiperf_run):
    source, results, out = aiperf_run
    lines = sorted(_lines(source), key=lambda r: r["metadata"]["request_start_ns"])
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == len(lines) == 40 == results.points[0].requests.total
    for r, line in zip(records, lines):
        m = line["metrics"]
        assert r["outcome"] == "ok" and r["output_tokens"] == m["output_sequence_length"]["value"] == TOKENS
        # one chunk a token: AIPerf times no role-only or finish-only chunk, none is dropped
        assert len(r["chunk_times_s"]) == len(m["inter_chunk_latency"]["value"]) + 1 == TOKENS
        assert r["chunk_times_s"][0] - r["sent_s"] == pytest.approx(m["time_to_first_token"]["value"] / 1e3, abs=1e-9)
        assert r["chunk_times_s"][-1] - r["sent_s"] == pytest.approx(m["request_latency"]["value"] / 1e3, abs=1e-6)
        assert r["prompt_tokens"] == m["input_sequence_length"]["value"]
    assert results.target.api == "chat" and results.target.model == "mock-model"
    assert results.imported is not None and results.imported.tool == "aiperf"
    assert results.imported.version == "0.13.0" and "finish_reason" in results.imported.not_recorded


def test_aiperf_agreeing_figures_match_within_half_a_percent(aiperf_run):
    """TTFT, TPOT (AIPerf's inter token latency), ITL (its inter chunk latency) and E2E (its
    request latency): the same definitions over the same requests."""
    _, results, _ = aiperf_run
    figures = {f.metric: f for f in results.imported.points[0].figures}
    for key in SAME:
        assert figures[key].same_definition, key
        assert abs(figures[key].difference) < 0.005, (key, figures[key])


def test_aiperf_throughputs_differ_by_their_named_period(aiperf_run):
    """AIPerf divides by its benchmark duration (first start to last response); tokenbench by its
    measurement window: the definition says so."""
    _, results, _ = aiperf_run
    figures = {f.metric: f for f in results.imported.points[0].figures}
    for key in ("requests_per_s", "output_tokens_per_s"):
        assert not figures[key].same_definition
        assert "benchmark duration" in figures[key].definition and "measurement window" in figures[key].definition


def test_aiperf_tokenbench_holds_the_mock_script(aiperf_run):
    _, results, _ = aiperf_run
    point = results.points[0]
    # AIPerf's clock starts before the connection: a few ms above the script's TTFT
    assert point.ttft_s.mean == pytest.approx(TTFT_S, abs=0.006)
    assert point.tpot_s.mean == pytest.approx(ITL_S, abs=0.001)
    assert point.itl_s.mean == pytest.approx(ITL_S, abs=0.001)
    assert point.e2e_s.mean == pytest.approx(E2E_S, abs=0.008)


def test_aiperf_loads_read_as_tokenbench_loads():
    (rate,) = read(AIPERF_RATE).points
    assert rate.load.kind == "rate" and rate.load.rate_per_s == 4 and rate.load.arrival == "poisson"
    (users,) = read(AIPERF_CAP).points
    assert users.load.kind == "users" and users.load.users == 4
    # either of the directory's files names the directory
    assert read(AIPERF_RATE / "profile_export_aiperf.json").source == AIPERF_RATE / "profile_export.jsonl"


def test_aiperf_bad_input_is_refused_naming_what_to_pass(tmp_path):
    no_records = tmp_path / "summary-only"
    no_records.mkdir()
    shutil.copy(AIPERF_RATE / "profile_export_aiperf.json", no_records)
    with pytest.raises(BadInput, match="--export-level records"):
        read(no_records)
    newer = tmp_path / "newer"
    shutil.copytree(AIPERF_RATE, newer)
    data = json.loads((newer / "profile_export_aiperf.json").read_text())
    data["aiperf_version"] = "9.9.9"
    (newer / "profile_export_aiperf.json").write_text(json.dumps(data))
    with pytest.raises(BadInput, match=r"AIPerf 9\.9\.9: tokenbench reads the files of AIPerf 0\.13\.0"):
        read(newer)
    with pytest.raises(BadInput, match="not a result file tokenbench can import"):
        read(tmp_path)
    with pytest.raises(BadInput, match="no such file or directory"):
        read(tmp_path / "absent")


def test_aiperf_cli_imports_a_directory(tmp_path):
    out = tmp_path / "imported"
    cmd = [sys.executable, "-m", "tokenbench", "import", str(AIPERF_RATE), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "aiperf's figures vs tokenbench's" in proc.stderr and "benchmark duration" in proc.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["imported"]["tool"] == "aiperf" and results["imported"]["file"] == "profile_export.jsonl"
