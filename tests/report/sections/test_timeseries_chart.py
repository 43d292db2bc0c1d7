"""One run's timeline (report/timeseries_chart.py): every point's windows, ramps shaded, point
starts and degraded points marked; a run without windows has no timeline."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from report_synthetic import point, results, write_run

from tokenbench.report.read.load import load_inputs
from tokenbench.report.read.run_dir import read_run
from tokenbench.report.sections.charts import build_charts
from tokenbench.report.sections.timeseries_chart import timeseries_chart
from tokenbench.report.sections.verdict import decide


def _charts(*dirs: Path):
    data = load_inputs(list(dirs))
    return {c.chart_id: c for c in build_charts(data, decide(data))}


def test_timeseries_marks_the_degraded_point(rate_experiment: Path) -> None:
    charts = _charts(rate_experiment)
    timelines = [c for c in charts.values() if c.section == "timeseries"]
    assert len(timelines) == 9  # 3 configurations x 3 trials
    first = next(c for c in timelines if "vllm_max_num_seqs=16" in c.title)
    assert any("DEGRADED" in m.label and "8 req/s" in m.label for m in first.marks)
    assert "Degraded: 8 req/s steady-state output rate fell 15.0%" in first.caption
    assert [p.y_label for p in first.panels][:2] == ["output tokens/s", "TTFT (ms)"]
    assert "GPU utilization (%)" not in [p.y_label for p in first.panels]  # never measured: left out


def test_a_run_timeline_has_its_index_title_and_panels(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", results([point(0, "users", 4, ramp_s=5.0), point(1, "users", 8, start_s=30.0)]))
    (series,) = read_run(run).series
    chart = timeseries_chart(series, 1)
    assert chart is not None
    assert (chart.chart_id, chart.title, chart.section) == ("timeseries-2", "Over time: vllm", "timeseries")
    assert chart.panels[0].y_label == "output tokens/s"
    # each 5 s window at its middle: a 5 s ramp (5 tok/s), 4 steady windows, a drain (2 tok/s); a gap
    # (None at the next point's start) keeps the two points' lines apart
    tokens = chart.panels[0].series[0]
    assert tokens.x == [2.5, 7.5, 12.5, 17.5, 22.5, 27.5, 30.0, 32.5, 37.5, 42.5, 47.5, 52.5]
    assert tokens.y == [5.0, 100.0, 100.0, 100.0, 100.0, 2.0, None, 100.0, 100.0, 100.0, 100.0, 2.0]
    assert [(s.x0, s.x1, s.kind) for s in chart.spans] == [
        (0.0, 5.0, "ramp"),
        (25.0, 30.0, "drain"),
        (50.0, 55.0, "drain"),
    ]
    assert [m.label for m in chart.marks] == ["4 users (+0.0%)", "8 users (+0.0%)"]  # steady: not degraded


def test_no_windows_no_timeline(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", results([point(0, "rate", 1.0)]))
    (series,) = read_run(run).series
    bare = replace(series, points=tuple(replace(p, windows=()) for p in series.points))
    assert timeseries_chart(bare, 0) is None
