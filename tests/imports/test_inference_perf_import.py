"""``tokenbench import`` of inference-perf 0.7.0 report directories made by real
``inference-perf`` runs against the mock (tests/fixtures/imports/inference_perf/README.md): each
stage a point, each request a record with its chunks, results.json tokenbench's over them, and
inference-perf's own figures beside with the definition that explains each difference."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.errors import BadInput
from tokenbench.imports import read, write_run_dir
from tokenbench.run import run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "inference_perf"
RATE = FIXTURES / "rate"  # two constant stages: 2 req/s (20 requests), 4 req/s (32)
CAP = FIXTURES / "concurrency"  # 24 requests, concurrency 4
ERRORS = FIXTURES / "errors"  # 12 requests, concurrency 2, every 4th answered 500
# the mock's script when the files were made: TTFT 50 ms, a token every 20 ms; inference-perf's
# mock data asks max_tokens 30
TTFT_S, ITL_S, TOKENS = 0.050, 0.020, 30
E2E_S = TTFT_S + (TOKENS - 1) * ITL_S
# TTFT, TPOT and ITL: the same definitions over one-token chunks (the mock's)
SAME = ("ttft_s_mean", "ttft_s_p50", "ttft_s_p99", "tpot_s_mean", "tpot_s_p50", "tpot_s_p99", "itl_s_mean")


def _entries(directory: Path) -> list[dict]:
    entries = json.loads((directory / "per_request_lifecycle_metrics.json").read_text())
    return sorted(entries, key=lambda e: e["start_time"])


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module", params=[RATE, CAP, ERRORS], ids=["rate", "concurrency", "errors"])
def imported(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("inference-perf") / request.param.name
    return request.param, write_run_dir(read(request.param), out), out


def test_inference_perf_each_request_is_a_record_with_its_chunks(imported):
    source, results, out = imported
    entries, records = _entries(source), _records(out)
    assert len(records) == len(entries) == sum(p.requests.total for p in results.points)
    for r, e in zip(records, entries):
        if e["error"] is not None:
            continue
        metrics = e["info"]["response_metrics"]
        chunks = metrics["chunk_times"]
        assert r["outcome"] == "ok" and r["output_tokens"] == metrics["server_usage"]["completion_tokens"] == TOKENS
        assert r["output_tokens_source"] == "server"
        # every content chunk's time kept (the role-only opening chunk was never timed)
        assert len(r["chunk_times_s"]) == len(chunks) == TOKENS
        assert r["chunk_times_s"][0] - r["sent_s"] == pytest.approx(chunks[0] - e["start_time"], abs=1e-9)
        # E2E ends at the last chunk; the record's close is inference-perf's end_time, after it
        assert r["end_s"] - r["sent_s"] == pytest.approx(chunks[-1] - e["start_time"], abs=1e-6)
        assert r["closed_s"] - r["sent_s"] == pytest.approx(e["end_time"] - e["start_time"], abs=1e-6)
        assert r["closed_s"] > r["end_s"]
        assert r["prompt_tokens"] == metrics["server_usage"]["prompt_tokens"]
    assert results.target.api == "chat" and results.target.model == "mock-model"
    assert results.imported is not None and results.imported.tool == "inference-perf"
    assert results.imported.version == "0.7.0"
    assert results.imported.file == "per_request_lifecycle_metrics.json"


def test_inference_perf_not_recorded_names_what_it_keeps_nothing_of(imported):
    _, results, _ = imported
    assert results.imported.not_recorded == [
        "scheduled_s",
        "finish_reason",
        "cached_prompt_tokens",
        "chunk_tokens",
        "response_id",
        "status",
    ]


def test_inference_perf_agreeing_figures_match_within_half_a_percent(imported):
    """TTFT, TPOT (its time_per_output_token) and ITL (its inter_token_latency) re-derived from
    the records match inference-perf's own stage figures."""
    _, results, _ = imported
    for point in results.imported.points:
        figures = {f.metric: f for f in point.figures}
        for key in SAME:
            assert figures[key].same_definition, key
            assert abs(figures[key].difference) < 0.005, (key, figures[key])


def test_inference_perf_request_latency_ends_at_the_streams_close(imported):
    """Its request latency ends after [DONE] and the response's release: above tokenbench's E2E
    (to the last content chunk) on every stage, and the definition says so."""
    _, results, _ = imported
    for point in results.imported.points:
        figures = {f.metric: f for f in point.figures}
        e2e = figures["e2e_s_mean"]
        assert not e2e.same_definition and "close" in e2e.definition and "last content chunk" in e2e.definition
        assert e2e.tool_value > e2e.tokenbench_value
        for key in ("requests_per_s", "output_tokens_per_s"):
            assert not figures[key].same_definition and "benchmark_time_seconds" in figures[key].definition


def test_inference_perf_tokenbench_holds_the_mock_script(imported):
    _, results, _ = imported
    for point in results.points:
        # inference-perf's clock starts before the connection: a few ms above the script's TTFT
        assert point.ttft_s.mean == pytest.approx(TTFT_S, abs=0.008)
        assert point.tpot_s.mean == pytest.approx(ITL_S, abs=0.001)
        assert point.itl_s.mean == pytest.approx(ITL_S, abs=0.001)
        assert point.e2e_s.mean == pytest.approx(E2E_S, abs=0.012)


def test_inference_perf_stages_read_as_tokenbench_loads():
    slow, fast = read(RATE).points
    assert (slow.load.kind, slow.load.rate_per_s, slow.load.arrival, len(slow.requests)) == ("rate", 2, "constant", 20)
    assert (fast.load.kind, fast.load.rate_per_s, len(fast.requests)) == ("rate", 4, 32)
    # stages run one after another: the second's requests all start after the first's
    assert max(r.start_s for r in slow.requests) < min(r.start_s for r in fast.requests)
    (users,) = read(CAP).points
    assert users.load.kind == "users" and users.load.users == 4 and len(users.requests) == 24
    # any of its lifecycle files names the directory
    assert read(RATE / "stage_1_lifecycle_metrics.json").source == RATE / "per_request_lifecycle_metrics.json"


def test_inference_perf_errors_are_failed_requests(tmp_path):
    """The mock answered every 4th request 500: inference-perf's "HTTP Error 500" requests are
    http_error records, left out of the latencies."""
    out = tmp_path / "errors"
    results = write_run_dir(read(ERRORS), out)
    failed = [r for r in _records(out) if r["outcome"] != "ok"]
    assert len(failed) == 3 == results.points[0].requests.by_outcome["http_error"]
    assert all(r["error"].startswith("HTTP Error 500") and r["chunk_times_s"] == [] for r in failed)
    assert all(r["prompt_tokens"] is None and r["output_tokens"] is None for r in failed)
    assert results.points[0].ttft_s.count == 9


def _copy(tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    shutil.copytree(RATE, out)
    return out


def test_inference_perf_other_versions_and_missing_files_are_refused(tmp_path):
    older = _copy(tmp_path, "older")
    config = yaml.safe_load((older / "config.yaml").read_text())
    del config["load"]["stage_teardown_grace_seconds"]
    (older / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(BadInput, match=r"inference-perf report of another version .*stage_teardown_grace_seconds"):
        read(older)
    summary_only = _copy(tmp_path, "summary-only")
    (summary_only / "per_request_lifecycle_metrics.json").unlink()
    with pytest.raises(BadInput, match=r"report.request_lifecycle.per_request: true"):
        read(summary_only)
    unary = _copy(tmp_path, "unary")
    config = yaml.safe_load((unary / "config.yaml").read_text())
    config["api"]["streaming"] = False
    (unary / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(BadInput, match="api.streaming: true"):
        read(unary)


def test_inference_perf_does_not_claim_other_files(tmp_path):
    from tokenbench.imports import inference_perf

    assert inference_perf.read(RATE / "config.yaml") is None
    other = tmp_path / "summary_lifecycle_metrics.json"
    other.write_text(json.dumps({"benchmarks": []}))
    (tmp_path / "config.yaml").write_text("api: {}\n")
    assert inference_perf.read(other) is None and inference_perf.read(tmp_path) is None
    aiperf = FIXTURES.parent / "aiperf-0.13.0-rate"
    assert inference_perf.read(aiperf) is None
    assert inference_perf.read(FIXTURES.parent / "guidellm-0.8.1-rate.json") is None
    with pytest.raises(BadInput, match="not a result file tokenbench can import"):
        read(tmp_path)


def test_inference_perf_cli_import_then_report_and_compare(module_mock_server, tmp_path):
    """The CLI imports the directory; report reads the imported run; compare matches it with a
    native run of the same load (4 users)."""
    env = {**os.environ, "COLUMNS": "250"}
    out = tmp_path / "imported"
    cmd = [sys.executable, "-m", "tokenbench", "import", str(CAP), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "inference-perf's figures vs tokenbench's" in proc.stderr and "benchmark_time_seconds" in proc.stderr
    report = subprocess.run(
        [sys.executable, "-m", "tokenbench", "report", str(out)], capture_output=True, text=True, timeout=300
    )
    assert report.returncode == 0, report.stderr[-2000:]
    md = (out / "report.md").read_text()
    assert "## Imported" in md and "successes.latency.request_latency.mean" in md
    native = tmp_path / "native"
    config = RunConfig(
        target=TargetConfig(url=module_mock_server(ttft_ms=50, itl_ms=20, output_tokens=TOKENS), api="chat"),
        loads=[UsersLoad(users=4)],
        stop=StopConfig(max_requests=8, drain_timeout_s=10),
        dataset=DatasetConfig(input_tokens=8, output_tokens=TOKENS),
        live=False,
        out_dir=native,
    )
    run(config, Console(file=io.StringIO()))
    compare = subprocess.run(
        [sys.executable, "-m", "tokenbench", "compare", str(out), str(native), "--out", str(tmp_path / "c.md")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert compare.returncode == 0, compare.stderr[-2000:]
    table = (tmp_path / "c.md").read_text()
    assert "4 users" in table and "imported" in table and "native" in table


def test_inference_perf_malformed_files_are_bad_input(tmp_path):
    broken = _copy(tmp_path, "broken")
    (broken / "per_request_lifecycle_metrics.json").write_text(json.dumps([{"info": {}}]))
    with pytest.raises(BadInput, match="each with start_time and end_time"):
        read(broken)
    (broken / "config.yaml").write_text("api: [unclosed\n")
    with pytest.raises(BadInput, match="not inference-perf's config.yaml"):
        read(broken)
