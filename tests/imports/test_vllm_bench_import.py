"""``tokenbench import`` of ``vllm bench serve --save-result --save-detailed`` files made by real
runs of vLLM 0.32's bench against the mock (benchmarks/conformance.py --save-fixtures): the
requests become records, results.json is tokenbench's over them, and vLLM bench's own figures
sit beside with the definition that explains each difference."""

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
# the mock streaming as vLLM does (its role-only opening chunk in the first token's write), at
# 4 req/s and at 4 concurrent requests; and opening each stream at once (--opening-chunk at-once)
RATE = FIXTURES / "vllm-bench-serve-0.32-vllm-rate.json"
CAP = FIXTURES / "vllm-bench-serve-0.32-vllm-concurrency.json"
AT_ONCE = FIXTURES / "vllm-bench-serve-0.32-opening-at-once-rate.json"
# the mock's script when the files were made: TTFT 50 ms, a token every 20 ms, 20 tokens
TTFT_S, ITL_S, TOKENS = 0.050, 0.020, 20


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def rate_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("import") / "rate"
    return write_run_dir(read(RATE), out), out


def test_each_request_is_a_record_with_its_chunks(rate_run):
    results, out = rate_run
    source = json.loads(RATE.read_text())
    records = _records(out)
    assert len(records) == len(source["start_times"]) == results.points[0].requests.total
    for r, ttft, itls, n in zip(records, source["ttfts"], source["itls"], source["output_lens"]):
        assert r["outcome"] == "ok" and r["output_tokens"] == n == TOKENS
        # vLLM bench timed the role-only opening chunk and the finish-only closing one as tokens:
        # two events more than tokens, both dropped from the record
        assert len(itls) == n + 1 and len(r["chunk_times_s"]) == n
        assert r["chunk_times_s"][0] - r["sent_s"] == pytest.approx(ttft + itls[0], abs=1e-9)
        assert r["chunk_times_s"][-1] - r["sent_s"] == pytest.approx(ttft + sum(itls[:-1]), abs=1e-9)
    assert results.target.api == "chat" and results.imported is not None
    assert results.imported.tool == "vllm-bench-serve" and "finish_reason" in results.imported.not_recorded


def test_where_the_definitions_agree_the_figures_do_within_half_a_percent(rate_run):
    """Streamed as vLLM streams, the opening chunk rides with the first token and the closing one
    with the last: TTFT, TPOT and E2E are the same moments by either definition."""
    results, _ = rate_run
    figures = {f.metric: f for f in results.imported.points[0].figures}
    for key in ("ttft_s_mean", "ttft_s_p50", "tpot_s_mean", "e2e_s_mean", "requests_per_s", "output_tokens_per_s"):
        assert abs(figures[key].difference) < 0.005, (key, figures[key])
    assert figures["e2e_s_mean"].tokenbench_value == pytest.approx(TTFT_S + (TOKENS - 1) * ITL_S, abs=0.010)
    # ITL differs by definition: vLLM bench pools the opening chunk's ~0 gap (and the closing one's)
    itl = figures["itl_s_mean"]
    assert not itl.same_definition and "opening chunk" in itl.definition
    assert itl.difference == pytest.approx(-2 / (TOKENS + 1), abs=0.01)  # 2 of 21 gaps ~0: -9.5%


def test_where_they_do_not_the_definition_is_named_and_tokenbench_holds_the_script(tmp_path):
    """A server that sends its role chunk at once: vLLM bench's TTFT is that chunk's (~2 ms), the
    prefill unseen; tokenbench's over the same requests is the first token's."""
    results = write_run_dir(read(AT_ONCE), tmp_path / "at-once")
    point = results.points[0]
    figures = {f.metric: f for f in results.imported.points[0].figures}
    ttft = figures["ttft_s_mean"]
    assert not ttft.same_definition and "opening chunk" in ttft.definition
    # the mock opens each stream at once: vLLM bench's TTFT is that chunk's, tokenbench's the token's
    assert ttft.tool_value < 0.010 and point.ttft_s.mean == pytest.approx(TTFT_S, abs=0.005)
    itl = figures["itl_s_mean"]
    assert not itl.same_definition and itl.tool_value > point.itl_s.mean  # its gaps include the first token's
    assert point.itl_s.mean == pytest.approx(ITL_S, abs=0.002) and point.tpot_s.mean == pytest.approx(ITL_S, abs=0.002)


def test_an_infinite_rate_with_a_cap_is_users():
    run = read(CAP)
    (point,) = run.points
    assert point.load.kind == "users" and point.load.users == 4


def test_the_cli_imports_and_the_run_reads_as_any(tmp_path):
    out = tmp_path / "imported"
    cmd = [sys.executable, "-m", "tokenbench", "import", str(RATE), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "vllm-bench-serve's figures vs tokenbench's" in proc.stderr and "opening chunk" in proc.stderr
    report = subprocess.run(
        [sys.executable, "-m", "tokenbench", "report", str(out)], capture_output=True, text=True, timeout=300
    )
    assert report.returncode == 0, report.stderr[-2000:]
    md = (out / "report.md").read_text()
    assert "## Imported" in md and "mean_ttft_ms" in md and "opening chunk" in md


def test_a_file_without_its_requests_is_refused_naming_the_flag(tmp_path):
    data = json.loads(RATE.read_text())
    for key in ("ttfts", "itls", "start_times"):
        del data[key]
    path = tmp_path / "summary-only.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BadInput, match="--save-detailed"):
        read(path)
    other = tmp_path / "other.json"
    other.write_text("{}")
    with pytest.raises(BadInput, match="not a result file tokenbench can import"):
        read(other)


def test_an_imported_run_compares_with_a_native_one_and_exports(mock_server, tmp_path):
    """compare matches the imported run and a native one by load (4 req/s); export writes its
    records and points as any run's."""
    import io

    from rich.console import Console

    from tokenbench.config import DatasetConfig, RateLoad, RunConfig, StopConfig, TargetConfig
    from tokenbench.run import run

    imported = tmp_path / "imported"
    write_run_dir(read(RATE), imported)
    native = tmp_path / "native"
    config = RunConfig(
        target=TargetConfig(url=mock_server(ttft_ms=50, itl_ms=20, output_tokens=TOKENS), api="chat"),
        loads=[RateLoad(rate_per_s=4)],
        stop=StopConfig(max_requests=6, drain_timeout_s=10),
        dataset=DatasetConfig(input_tokens=32, output_tokens=TOKENS),
        live=False,
        out_dir=native,
    )
    run(config, Console(file=io.StringIO()))
    env = {**os.environ, "COLUMNS": "250"}
    compare = subprocess.run(
        [sys.executable, "-m", "tokenbench", "compare", str(imported), str(native), "--out", str(tmp_path / "c.md")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert compare.returncode == 0, compare.stderr[-2000:]
    table = (tmp_path / "c.md").read_text()
    assert "4 req/s" in table and "imported" in table and "native" in table
    export = subprocess.run(
        [sys.executable, "-m", "tokenbench", "export", str(imported), "--format", "csv"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert export.returncode == 0, export.stderr[-2000:]
    assert len((imported / "records.csv").read_text().splitlines()) == 41  # a header and 40 requests


def test_failed_requests_are_records_typed_by_vllm_benchs_error_text(tmp_path):
    """vLLM bench keeps an HTTP reason phrase, a traceback or its no-chunk message: each failed
    request is a record of the matching outcome, left out of the latencies."""
    data = json.loads(RATE.read_text())
    errors = {
        0: "Internal Server Error",
        1: "Traceback (most recent call last):\n  ...\nasyncio.exceptions.TimeoutError\n",
        2: "Traceback (most recent call last):\n  ...\naiohttp.client_exceptions.ClientConnectorError: ...",
        3: "Never received a valid chunk to calculate TTFT.This response will be marked as failed!",
        4: "Traceback (most recent call last):\n  ...\naiohttp.client_exceptions.ClientPayloadError: ...",
    }
    for i, text in errors.items():
        data["errors"][i] = text
        data["ttfts"][i], data["itls"][i], data["output_lens"][i] = 0.0, [], 0
    path = tmp_path / "failed.json"
    path.write_text(json.dumps(data))
    results = write_run_dir(read(path), tmp_path / "run")
    outcomes = [r["outcome"] for r in _records(tmp_path / "run")][:5]
    assert outcomes == ["http_error", "timeout", "connect_error", "no_output", "stream_error"]
    assert results.points[0].requests.by_outcome["ok"] == 35 and results.points[0].ttft_s.count == 35


def test_recompute_of_an_imported_run_says_to_import_again(rate_run):
    """Its results hold what only the import knows (the tool's figures, the events it dropped):
    recompute refuses rather than lose them."""
    _, out = rate_run
    proc = subprocess.run(
        [sys.executable, "-m", "tokenbench", "recompute", str(out)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and "import the file again" in proc.stderr
    assert "vllm-bench-serve's vllm-bench-serve-0.32-vllm-rate.json" in proc.stderr
