"""Serving layers vs the engine alone (report/layers.py): the overhead and its CI with known
answers, the verdict (helped / hurt / no difference / unknown), the baseline match, the sentences,
and the section of a report rendered from a synthetic experiment directory."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from report_synthetic import point, write_experiment

from tokenbench.metrics.catalogue import METRICS
from tokenbench.report import write_report
from tokenbench.report.read.data import ExperimentHeader, PointRow, ReportData
from tokenbench.report.read.load import load_inputs
from tokenbench.report.sections.layers import baselines, difference, layer_lines, layer_study, overheads, verdict
from tokenbench.results import TrialStat, mean_ci95

T2 = 4.302652729749462  # 3 trials: Student's t 97.5% quantile at 2 degrees of freedom (scipy.stats.t.ppf)


def _stat(*values: float) -> TrialStat:
    return mean_ci95(values)


def test_a_slower_layer_adds_10_ms_and_10_percent_paired_by_trial():
    engine = _stat(0.099, 0.100, 0.101)
    layer = _stat(0.1095, 0.110, 0.1105)  # per trial: +10.5, +10, +9.5 ms
    diff = difference(engine, layer, trials=3)
    assert diff.paired
    assert diff.delta == pytest.approx(0.010)
    assert diff.delta_ci95 == pytest.approx(T2 * 0.0005 / math.sqrt(3))
    rel = [0.0105 / 0.099, 0.010 / 0.100, 0.0095 / 0.101]
    assert diff.pct == pytest.approx(sum(rel) / 3)  # +10%
    assert diff.pct == pytest.approx(0.10, abs=0.001)
    assert diff.pct_ci95 == pytest.approx(mean_ci95(rel).ci95)
    assert verdict(METRICS["ttft_s_p50"], diff) == "hurt"


def test_a_layer_faster_beyond_the_ci_helped_and_within_it_made_no_difference():
    engine = _stat(100.0, 101.0, 99.0)
    faster = _stat(112.0, 113.12, 110.88)  # 12% more throughput in every trial
    diff = difference(engine, faster, trials=3)
    assert diff.pct == pytest.approx(0.12) and diff.pct_ci95 == pytest.approx(0.0, abs=1e-12)
    assert verdict(METRICS["output_tokens_per_s"], diff) == "helped"
    # lower latency is better: a layer 5 ms faster in every trial helped
    assert verdict(METRICS["ttft_s_p50"], difference(_stat(0.1, 0.11, 0.12), _stat(0.095, 0.105, 0.115), 3)) == "helped"
    noisy = difference(engine, _stat(102.0, 95.0, 104.0), trials=3)  # +2, -6, +5: the CI spans 0
    assert noisy.delta == pytest.approx(1 / 3)
    assert verdict(METRICS["output_tokens_per_s"], noisy) == "no difference"


def test_without_every_trial_on_both_sides_the_two_cis_are_combined():
    engine = _stat(100.0, 102.0, 98.0)
    layer = _stat(110.0, 112.0)  # a trial failed: trial k cannot be matched
    diff = difference(engine, layer, trials=3)
    assert not diff.paired
    assert diff.delta == pytest.approx(11.0)
    assert diff.delta_ci95 == pytest.approx(math.hypot(engine.ci95, layer.ci95))
    assert diff.pct == pytest.approx(0.11) and diff.pct_ci95 == pytest.approx(diff.delta_ci95 / 100.0)


def test_one_trial_has_no_ci_and_no_verdict():
    diff = difference(_stat(0.1), _stat(0.2), trials=1)
    assert diff.delta == pytest.approx(0.1) and diff.delta_ci95 is None and diff.pct == pytest.approx(1.0)
    assert verdict(METRICS["ttft_s_p50"], diff) == "unknown"
    assert difference(TrialStat(mean=None, ci95=None, n=0, values=[]), _stat(0.1), 1).delta is None


def _row(config: str, backend: str, upstream: str | None = None, rate: float = 1.0, **metrics: TrialStat) -> PointRow:
    return PointRow(
        source="exp",
        config=config,
        backend=backend,
        swept={},
        variant="default",
        point=0,
        label=f"{rate:g} req/s poisson",
        load_kind="rate",
        load_value=rate,
        metrics=dict(metrics),
        outcomes={"ok": 10},
        num_trials=3,
        upstream=upstream,
    )


def test_the_baseline_is_the_same_engine_without_a_layer():
    rows = [
        _row("llamacpp", "xllamacpp"),  # the in-process llama.cpp server is llamacpp
        _row("triton-llamacpp", "triton", "llamacpp"),
        _row("vllm-a", "vllm"),
        _row("vllm-b", "vllm"),
        _row("ray-vllm", "ray", "vllm"),  # two vLLM configurations, neither preferred: none
        _row("ray-sglang", "ray", "sglang"),  # no sglang alone
    ]
    assert baselines(rows) == {"triton-llamacpp": "llamacpp", "ray-vllm": None, "ray-sglang": None}
    rows.append(_row("vllm", "vllm"))  # one labelled as the engine: that one
    assert baselines(rows)["ray-vllm"] == "vllm"


def _data(rows: list[PointRow], trials: int = 3) -> ReportData:
    header = ExperimentHeader(Path("exp"), "exp", "", True, trials, "rates", None, "synthetic", {}, (), ())
    return ReportData(runs=(), experiments=(header,), rows=tuple(rows), series=())


def test_the_sentence_says_where_a_layer_helped():
    rows = []
    for rate, gain in ((1, 1.0), (8, 1.0), (32, 1.12), (64, 1.20)):
        base = (100.0 * rate, 101.0 * rate, 99.0 * rate)
        rows.append(_row("trtllm", "trtllm", rate=rate, output_tokens_per_s=_stat(*base)))
        layer = _stat(*(b * gain for b in base)) if gain != 1.0 else _stat(*(b + d for b, d in zip(base, (2, -6, 5))))
        rows.append(_row("triton-trtllm", "triton", "trtllm", rate=rate, output_tokens_per_s=layer))
    items = [o for o in overheads(_data(rows)) if o.metric == "output_tokens_per_s"]
    assert [o.verdict for o in items] == ["no difference", "no difference", "helped", "helped"]
    lines = layer_lines(items)
    assert lines == [
        "triton-trtllm beat the engine alone (trtllm) on output throughput at 32+ req/s "
        "(+12.0% ± 0.0% at 32 req/s; +20.0% ± 0.0% at 64 req/s)."
    ]


def test_no_difference_and_one_trial_are_said_too():
    same = [_row("llamacpp", "xllamacpp", ttft_s_p50=_stat(0.1, 0.12, 0.11))]
    same.append(_row("ray-llamacpp", "ray", "llamacpp", ttft_s_p50=_stat(0.11, 0.1, 0.12)))
    assert layer_lines(overheads(_data(same))) == [
        "ray-llamacpp made no difference beyond the 95% CI to the engine alone (llamacpp) on any metric."
    ]
    single = [_row("llamacpp", "xllamacpp", ttft_s_p50=_stat(0.1)), _row("ray-llamacpp", "ray", "llamacpp")]
    assert "one trial" in layer_lines(overheads(_data(single, trials=1)))[0]


def _study(tmp_path: Path) -> Path:
    """trtllm alone and behind Triton at 1 and 32 req/s, 3 trials: Triton adds 10 ms of TTFT p50
    at both rates (within 1 ms of noise) and 12% more throughput at 32 req/s."""

    def points(label: str, trial: int) -> list[dict]:
        noise = {1: -0.001, 2: 0.0, 3: 0.001}[trial]
        layer = label == "triton-trtllm"
        out = []
        for i, rate in enumerate((1.0, 32.0)):
            tokens = 100.0 * rate * (1 + noise) * (1.12 if layer and rate == 32.0 else 1.0)
            ttft = 0.100 + noise + (0.010 if layer else 0.0)
            out.append(point(i, "rate", rate, tokens_per_s=tokens, ttft_s=ttft, ttft_p50_s=ttft))
        return out

    servers = {"trtllm": ("trtllm", {}), "triton-trtllm": ("triton", {})}
    path = write_experiment(tmp_path / "study", "server-overhead", servers, {"rates": [1, 32]}, 3, points)
    state = json.loads((path / "experiment.json").read_text())
    state["servers"][1]["upstream"] = "trtllm"
    (path / "experiment.json").write_text(json.dumps(state))
    return path


def test_the_report_of_a_layer_study_has_the_overhead_and_where_it_helped(tmp_path):
    exp = _study(tmp_path)
    data = load_inputs([exp])
    assert {r.config: r.upstream for r in data.rows} == {"trtllm": None, "triton-trtllm": "trtllm"}
    by = {(o.label.split()[0], o.metric): o for o in overheads(data)}
    ttft = by[("1", "ttft_s_p50")]
    assert ttft.diff.paired and ttft.diff.delta == pytest.approx(0.010) and ttft.verdict == "hurt"
    assert by[("32", "output_tokens_per_s")].diff.pct == pytest.approx(0.12)
    files = write_report([exp], tmp_path / "out")
    md = files.markdown.read_text()
    assert "## Serving layers" in md
    assert (
        "triton-trtllm beat the engine alone (trtllm) on output throughput at 32+ req/s (+12.0% ± 0.0% at 32 req/s)."
    ) in md
    assert "triton-trtllm was slower than the engine alone (trtllm) on TTFT p50 at every load" in md
    assert "| triton-trtllm | trtllm | 1 req/s | TTFT p50 (ms) | 100.0 ± 2.5 | 110.0 ± 2.5 | +10.0 ± 0.0 |" in md
    html = files.html.read_text()
    assert 'id="layers"' in html and "Serving layers vs the engine alone" in html
    table, *sentences = layer_study(exp)  # the console: the table, then one sentence per finding
    assert table.row_count == 2 * 8  # 2 loads x the compared metrics
    assert [str(t).split(" on ")[1].split(" at ")[0] for t in sentences] == [
        "output throughput",  # helped
        "TTFT p50",  # hurt: +10 ms
        "TTFT p99",  # hurt: the synthetic p99 is twice the mean, +20 ms
    ]


def test_an_experiment_without_layers_has_no_layer_section(rate_experiment, tmp_path):
    assert layer_study(rate_experiment) == []
    md = write_report([rate_experiment], tmp_path / "out").markdown.read_text()
    assert "Serving layers" not in md


def test_tokenbench_report_prints_where_each_layer_helped(tmp_path):
    exp = _study(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "tokenbench", "report", str(exp), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "250"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "serving layers: overhead = layer − engine alone" in proc.stderr
    assert "triton-trtllm beat the engine alone (trtllm) on output throughput at 32+ req/s" in proc.stderr


def test_a_layer_that_fell_behind_at_some_loads_lists_them():
    rows = []
    for rate, loss in ((1, 0.9), (8, 1.0), (32, 0.8)):
        base = (100.0 * rate, 101.0 * rate, 99.0 * rate)
        rows.append(_row("vllm", "vllm", rate=rate, output_tokens_per_s=_stat(*base)))
        layer = _stat(*(b * loss for b in base)) if loss != 1.0 else _stat(*base)
        rows.append(_row("ray-vllm", "ray", "vllm", rate=rate, output_tokens_per_s=layer))
    assert layer_lines(overheads(_data(rows))) == [
        "ray-vllm fell behind the engine alone (vllm) on output throughput at 1 req/s, 32 req/s "
        "(-10.0% ± 0.0% at 1 req/s; -20.0% ± 0.0% at 32 req/s)."
    ]
