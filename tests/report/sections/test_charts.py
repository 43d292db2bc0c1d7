"""The report's figures as data (report/charts.py; the timelines: test_timeseries_chart.py), from synthetic inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenbench.report.read.load import load_inputs
from tokenbench.report.sections.charts import build_charts
from tokenbench.report.sections.verdict import decide


def _charts(*dirs: Path):
    data = load_inputs(list(dirs))
    return {c.chart_id: c for c in build_charts(data, decide(data))}


def test_rate_sweep_charts(rate_experiment: Path) -> None:
    charts = _charts(rate_experiment)
    assert {"throughput-vs-rate", "knob-max-num-seqs", "pareto", "errors"} <= set(charts)
    assert "ttft-vs-users" not in charts
    rate = charts["throughput-vs-rate"]
    assert [p.y_label for p in rate.panels] == ["output tokens/s", "TTFT p50 (ms)", "achieved requests/s"]
    marks = [s for s in rate.panels[0].series if s.kind == "markers"]  # one ✕ per saturated configuration
    assert {s.name for s in marks} == {"saturation: vllm_max_num_seqs=16", "saturation: vllm_max_num_seqs=64"}
    assert "2x the lowest rate's" in rate.caption and "below 90%" in rate.caption
    knob = charts["knob-max-num-seqs"]
    assert all(s.x == [16, 64] for s in knob.panels[0].series)  # the two vLLM configurations joined
    assert [p.y_label for p in knob.panels] == ["output tokens/s", "server preemptions per point"]
    errors = charts["errors"].panels[0]
    assert [s.name for s in errors.series] == ["timeout"] and errors.stacked


def test_users_charts(users_experiments: tuple[Path, Path]) -> None:
    charts = _charts(*users_experiments)
    ttft = charts["ttft-vs-users"].panels[0]
    assert [s.name for s in ttft.series] == ["vllm (users-a)", "vllm (users-b)"]
    assert ttft.series[0].x == [1, 4, 16]
    assert ttft.series[0].y == pytest.approx([50.0, 200.0, 800.0])  # ms
    assert ttft.series[0].error is not None  # 3 trials: CIs drawn
