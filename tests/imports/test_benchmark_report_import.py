"""``tokenbench import`` of llm-d's Benchmark Report v0.2.x: a report holds aggregates only, so
the import is a run whose points carry the report's load and the report's own figures
(results.json ``imported``, ``aggregate_only``), no records and no tokenbench figures; report,
compare and the gate read the tool's figures for it. The round trip: a native run against the
mock, exported as reports, imported back, gives the native run's figures."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tokenbench.errors import BadInput
from tokenbench.imports import read, write_run_dir
from tokenbench.metrics.catalogue import metric_of
from tokenbench.results.imported import NO_REQUESTS

DISTRIBUTIONS = ("ttft_s", "tpot_s", "itl_s", "e2e_s")
STATS = ("mean", "std", "min", "p50", "p90", "p95", "p99", "p999", "max")
RATES = ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokenbench", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "COLUMNS": "250"},
    )


@pytest.fixture(scope="module")
def native(module_mock_server, tmp_path_factory):
    """A native run against the mock (TTFT 20 ms, a chunk every 5 ms, 8 tokens) at 2 users and at
    20 req/s, exported as one Benchmark Report a point."""
    from run_helpers import quiet

    from tokenbench.config import DatasetConfig, RateLoad, RunConfig, StopConfig, TargetConfig, UsersLoad
    from tokenbench.run import run

    tmp = tmp_path_factory.mktemp("br")
    config = RunConfig(
        target=TargetConfig(url=module_mock_server(ttft_ms=20, itl_ms=5), api="chat"),
        loads=[UsersLoad(users=2), RateLoad(rate_per_s=20)],
        stop=StopConfig(max_requests=12, drain_timeout_s=10),
        dataset=DatasetConfig(input_tokens=16, output_tokens=8),
        live=False,
        out_dir=tmp / "native",
    )
    result = run(config, quiet())
    reports = tmp / "reports"
    proc = _cli("export", str(result.run_dir), "--format", "benchmark-report", "--out", str(reports))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return result.run_dir, reports


@pytest.fixture(scope="module")
def imported(native, tmp_path_factory):
    _, reports = native
    out = tmp_path_factory.mktemp("br-import") / "imported"
    proc = _cli("import", str(reports), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert NO_REQUESTS in proc.stderr and "benchmark-report" in proc.stderr
    return out


def _results(d: Path) -> dict:
    return json.loads((d / "results.json").read_text())


def test_the_round_trip_gives_the_native_runs_figures(native, imported):
    native_dir, _ = native
    ours, theirs = _results(native_dir), _results(imported)
    assert theirs["imported"]["aggregate_only"] is True
    assert theirs["imported"]["measured_by"].startswith("tokenbench ")
    assert theirs["target"]["model"] == ours["target"]["model"] and theirs["target"]["api"] == "chat"
    assert [p["load"]["kind"] for p in theirs["points"]] == ["users", "rate"]
    assert theirs["points"][0]["load"]["users"] == 2 and theirs["points"][1]["load"]["rate_per_s"] == 20
    for native_point, point, figures in zip(ours["points"], theirs["points"], theirs["imported"]["points"]):
        by_key = {f["metric"]: f for f in figures["figures"]}
        compared = 0
        for dist in DISTRIBUTIONS:
            for stat in STATS:
                value = native_point[dist][stat]
                if value is None:
                    assert f"{dist}_{stat}" not in by_key
                    continue
                assert by_key[f"{dist}_{stat}"]["tool_value"] == pytest.approx(value, rel=1e-12), (dist, stat)
                compared += 1
        for key in RATES:
            assert by_key[key]["tool_value"] == pytest.approx(native_point[key], rel=1e-12), key
        assert by_key["error_rate"]["tool_value"] == 0
        assert compared >= 30
        assert figures["requests"] == native_point["requests"]["total"] == 12 and figures["failures"] == 0
        # no records: tokenbench's own figures are absent, never the aggregates restated as its own
        assert point["requests"]["total"] == 0 and point["ttft_s"]["mean"] is None
        assert point["requests_per_s"] is None and point["output_tokens_per_s"] is None and point["timeseries"] == []
        for f in figures["figures"]:
            assert f["tokenbench_value"] is None and f["difference"] is None and f["same_definition"]
            assert f["definition"].startswith(NO_REQUESTS)
    assert (imported / "records.jsonl").read_text() == ""


def test_report_shows_the_reports_figures(native, imported, tmp_path):
    from tokenbench.report import write_report

    native_dir, _ = native
    files = write_report([imported, native_dir], tmp_path)
    markdown = files.markdown.read_text()
    ttft = _results(native_dir)["points"][0]["ttft_s"]["mean"] * 1e3
    # the headline table's TTFT mean of the imported run is the report's, as the native run's
    lines = [line for line in markdown.splitlines() if line.startswith("|") and "2 users" in line]
    assert sum(f"{ttft:.1f}" in line for line in lines) >= 2, lines
    assert NO_REQUESTS in markdown


def test_compare_reads_the_imported_figures(native, imported):
    native_dir, _ = native
    proc = _cli("compare", str(imported), str(native_dir))
    assert proc.returncode == 0, proc.stderr[-2000:]
    ttft = _results(native_dir)["points"][0]["ttft_s"]["mean"] * 1e3
    (row,) = [line for line in proc.stdout.splitlines() if "TTFT mean" in line and "2 users" in line]
    assert row.count(f"{ttft:.1f}") == 2, row  # the same figure on both sides
    assert "+0.0%" in row or "0.0%" in row


def test_the_gate_on_a_report_is_untested_never_a_silent_pass(native, imported):
    native_dir, _ = native
    proc = _cli("compare", str(imported), str(native_dir), "--fail-on", "ttft:p90:+5%,queue:p90:+5%")
    assert proc.returncode == 5, proc.stdout + proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("FAIL", "pass", "UNTESTED"))]
    assert lines and all(line.startswith("UNTESTED") for line in lines), lines
    ttft = [line for line in lines if "ttft:p90" in line and "2 users" in line]
    p90 = _results(native_dir)["points"][0]["ttft_s"]["p90"] * 1e3
    # the tool's figure against the native one, untested: one report a load has no values to test
    assert f"{p90:,.2f} -> {p90:,.2f}" in ttft[0] and "aggregates only" in ttft[0]
    # queue delay is no figure of a Benchmark Report
    assert any("queue:p90" in line and "not measured" in line for line in lines)


def _report(reports: Path, index: int = 0) -> dict:
    return json.loads((reports / f"benchmark_report_{index}.json").read_text())


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc) if path.suffix == ".json" else yaml.safe_dump(doc))
    return path


def test_trials_of_reports_are_gated_by_welchs_t(native, tmp_path):
    """Two reports at one load are its trials: the gate tests the tool's figures over them."""
    _, reports = native
    base, slow = tmp_path / "base", tmp_path / "slow"
    for d, factor in ((base, 1.0), (slow, 1.5)):
        d.mkdir()
        for trial, jitter in enumerate((1.0, 1.02)):
            doc = _report(reports)
            doc["scenario"]["load"]["standardized"]["stage"] = trial
            ttft = doc["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]
            ttft["p90"] = 0.1 * factor * jitter
            _write(d / f"benchmark_report_{trial}.json", doc)
        write_run_dir(read(d), d.parent / f"{d.name}-run")
    proc = _cli("compare", str(tmp_path / "base-run"), str(tmp_path / "slow-run"), "--fail-on", "ttft:p90:+5%")
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert "ttft:p90" in line and "Welch's t over trials, 2/2" in line and "+50.0%" in line
    same = _cli("compare", str(tmp_path / "base-run"), str(tmp_path / "base-run"), "--fail-on", "ttft:p90:+5%")
    assert same.returncode == 0, same.stdout + same.stderr[-2000:]


def test_units_are_converted_and_yaml_is_read(native, tmp_path):
    _, reports = native
    doc = _report(reports)
    latency = doc["results"]["request_performance"]["aggregate"]["latency"]
    ms = {k: v * 1e3 if k != "units" else "ms" for k, v in latency["time_to_first_token"].items()}
    latency["time_to_first_token"] = ms
    per_token = {k: v * 1e3 if k != "units" else "ms/token" for k, v in latency["time_per_output_token"].items()}
    latency["time_per_output_token"] = per_token
    run = read(_write(tmp_path / "report.yaml", doc))
    (point,) = run.points
    assert point.figures["ttft_s_mean"] == pytest.approx(ms["mean"] / 1e3)
    assert point.figures["tpot_s_p99"] == pytest.approx(per_token["p99"] / 1e3)
    assert point.figure_names["ttft_s_p99"] == "time_to_first_token.p99"
    assert metric_of("ttft_s_p90") is not None and metric_of("ttft_s_p90").scale == 1e3
    latency["request_latency"]["units"] = "tokens/s"
    with pytest.raises(BadInput, match=r"latency\.request_latency\.units is 'tokens/s'.*s, ms"):
        read(_write(tmp_path / "bad-unit.json", doc))


@pytest.mark.parametrize("version", ["0.1", "0.3", "1.0", "0.21"])
def test_unknown_versions_are_refused_in_one_line(native, tmp_path, version):
    _, reports = native
    doc = copy.deepcopy(_report(reports))
    doc["version"] = version
    path = _write(tmp_path / "report.json", doc)
    proc = _cli("import", str(path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert f"version {version}" in line and "0.2.x" in line


def test_a_report_without_a_load_is_refused(native, tmp_path):
    _, reports = native
    doc = _report(reports)
    standardized = doc["scenario"]["load"]["standardized"]
    standardized.pop("concurrency", None), standardized.pop("rate_qps", None)
    with pytest.raises(BadInput, match="neither rate_qps nor concurrency"):
        read(_write(tmp_path / "no-load.json", doc))
    for version in ("0.2", "0.2.0", "0.2.7"):
        doc = _report(reports)
        doc["version"] = version
        assert read(_write(tmp_path / "ok.json", doc)).version == version
