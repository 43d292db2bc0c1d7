"""The report's Agent programs section (report/sections/programs.py, report/read/programs.py) over
a real replay of a recorded Weka session against the mock: its tables hold results.json's
numbers, its slowest sessions are metrics.programs.sessions' over the records, and the session
timeline's bars are the records' times with exactly the critical path's calls highlighted; a run
without programs has no such section."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from program_runs import WEKA_CALLS, program_run
from report_synthetic import point, results, write_run

from tokenbench.common.procs import free_port
from tokenbench.metrics.programs import PARTS, SessionPath, anchor_s, sessions
from tokenbench.records import RequestRecord
from tokenbench.report import ReportFiles, write_report
from tokenbench.report.chart_spec import Chart, Series, span_bars
from tokenbench.report.read.data import ReportData
from tokenbench.report.read.load import load_inputs
from tokenbench.report.render.plotly_chart import plotly_figure
from tokenbench.report.sections.charts import build_charts
from tokenbench.report.sections.programs import (
    PART_COLORS,
    PART_TITLES,
    call_groups_table,
    call_label,
    parts_table,
    programs_table,
    sessions_table,
)
from tokenbench.report.sections.tables import Table
from tokenbench.report.sections.verdict import decide
from tokenbench.rundir import read_records

SESSIONS = 2  # the session replayed twice, one after the other


@pytest.fixture(scope="module")
def programs_run(module_mock_server, tmp_path_factory) -> Path:
    url = module_mock_server(ttft_ms=20, itl_ms=2, output_tokens=4)
    return program_run(url, tmp_path_factory.mktemp("programs") / "run", sessions=SESSIONS)


@pytest.fixture(scope="module")
def report(programs_run: Path, tmp_path_factory) -> ReportFiles:
    return write_report([programs_run], tmp_path_factory.mktemp("report"))


def _point(run: Path) -> dict:
    [p] = json.loads((run / "results.json").read_text())["points"]
    return p


def _records(run: Path) -> list[RequestRecord]:
    return list(read_records(run))


def _slowest(run: Path) -> SessionPath:
    done = [s for s in sessions(_records(run)) if s.ok and s.latency_s is not None]
    return max(done, key=lambda s: s.latency_s or 0.0)


def _n(v: float | None, digits: int, scale: float = 1.0) -> str:
    return "–" if v is None else f"{v * scale:,.{digits}f}"


def _row(table: Table | None) -> dict[str, str]:
    assert table is not None and len(table.rows) == 1
    return dict(zip(table.headers, table.rows[0]))


def test_the_section_shows_results_json_numbers(programs_run: Path) -> None:
    data = load_inputs([programs_run])
    p = _point(programs_run)["programs"]
    assert p["sessions"]["completed"] == SESSIONS and p["measured_sessions"] >= 1
    row = _row(programs_table(data))
    counts = p["sessions"]
    assert [row[k] for k in ("sessions started", "completed", "ended by error", "ended by stop", "measured")] == [
        str(v) for v in (counts["started"], counts["completed"], 0, 0, p["measured_sessions"])
    ]
    for stat in ("p50", "p90", "p99"):
        assert row[f"session {stat} (s)"] == _n(p["session_s"][stat], 3)
    assert row["sessions/s"] == _n(p["sessions_per_s"], 3)
    assert row["calls per session"] == _n(p["calls_per_session"]["mean"], 1) == f"{WEKA_CALLS:.1f}"
    assert row["critical-path calls"] == _n(p["critical_path"]["calls"]["mean"], 1)
    assert row["schedule lag p50 (ms)"] == _n(p["schedule_lag_s"]["p50"], 2, 1e3)
    assert row["schedule lag p99 (ms)"] == _n(p["schedule_lag_s"]["p99"], 2, 1e3)
    assert row["expected reuse (%)"] == _n(p["expected_reuse"], 1, 100) != "–"
    assert row["measured reuse (%)"] == _n(p["measured_reuse"], 1, 100)

    parts = _row(parts_table(data))
    cp = p["critical_path"]
    shown = [k for k in PARTS if cp["mean_s"][k]]  # no server spans: ttft, decode, tool, think, lag
    assert {"ttft", "decode", "think", "lag"} <= set(shown) and "prefill" not in shown
    for k in shown:
        assert parts[f"{PART_TITLES[k]} s (%)"] == f"{_n(cp['mean_s'][k], 3)} ({_n(cp['share'][k], 1, 100)}%)"
    assert sum(cp["mean_s"].values()) == pytest.approx(p["session_s"]["mean"], rel=1e-9)  # the parts add up

    groups = call_groups_table(data)
    assert groups is not None
    by = {(r[2], r[3]): dict(zip(groups.headers, r)) for r in groups.rows}
    for kind, key in (("role", "by_role"), ("depth", "by_depth")):
        assert {g for k, g in by if k == kind} == set(p[key])
        for name, g in p[key].items():
            cells = by[(kind, name)]
            assert (cells["calls"], cells["ok"]) == (str(g["count"]), str(g["ok"]))
            assert cells["TTFT p90 (ms)"] == _n(g["ttft_s"]["p90"], 1, 1e3)
            assert cells["E2E p50 (ms)"] == _n(g["e2e_s"]["p50"], 1, 1e3)
            assert cells["schedule lag p99 (ms)"] == _n(g["schedule_lag_s"]["p99"], 2, 1e3)
    assert sum(g["count"] for g in p["by_role"].values()) == sum(g["count"] for g in p["by_depth"].values())


def test_the_slowest_sessions_are_the_records_sessions(programs_run: Path) -> None:
    data = load_inputs([programs_run])
    found = [s for s in sessions(_records(programs_run)) if s.ok and s.latency_s is not None]
    assert len(found) == SESSIONS
    table = sessions_table(data)
    assert table is not None
    rows = [dict(zip(table.headers, r)) for r in table.rows]
    expected = sorted(found, key=lambda s: -(s.latency_s or 0.0))
    assert [r["session"] for r in rows] == [s.session for s in expected]
    for r, s in zip(rows, expected):
        assert r["latency (s)"] == _n(s.latency_s, 3) and r["calls"] == str(WEKA_CALLS)
        assert r["critical-path calls"] == str(len(s.path))
        assert r["think (s)"] == _n(s.parts["think"], 3)
    # the measured ones' parts are the results' critical path, session by session
    p = _point(programs_run)
    measured = [s for s in data.sessions if s.measured]
    assert len(measured) == p["programs"]["measured_sessions"]
    for k in PARTS:
        mean = sum(s.parts[k] for s in measured) / len(measured)
        assert mean == pytest.approx(p["programs"]["critical_path"]["mean_s"][k], abs=1e-12)


def test_with_server_spans_the_sessions_model_time_splits_as_the_results(mock_server, tmp_path: Path) -> None:
    port = free_port()
    url = mock_server(ttft_ms=20, itl_ms=2, output_tokens=4, otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces")
    run = program_run(url, tmp_path / "run", traces_port=port)
    p = _point(run)
    assert p["server_phases"]["joined"] == WEKA_CALLS
    data = load_inputs([run])
    [session] = data.sessions
    cp = p["programs"]["critical_path"]["mean_s"]
    assert cp["prefill"] > 0 and cp["ttft"] == 0  # every call's TTFT split by its span
    assert session.parts == pytest.approx(cp, abs=1e-12)  # the report joined the spans as the results did
    parts = _row(parts_table(data))
    assert {f"{PART_TITLES[k]} s (%)" for k in ("dispatch", "queue", "prefill", "delivery")} <= set(parts)
    assert f"{PART_TITLES['ttft']} s (%)" not in parts


def _timeline(data: ReportData) -> Chart:
    [chart] = [c for c in build_charts(data, decide(data)) if c.chart_id.startswith("session-timeline-")]
    return chart


def _bars(series: Series, rows: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    """A span series' bars by row label: (start, end)."""
    return {rows[int(row)]: (start, start + length) for _, row, start, length in span_bars(series)}


def test_the_timeline_draws_the_records_times_and_highlights_the_critical_path(programs_run: Path) -> None:
    data = load_inputs([programs_run])
    chart = _timeline(data)
    slowest = _slowest(programs_run)
    assert slowest.session in chart.title and chart.section == "programs"
    [panel] = chart.panels
    series = {s.name: s for s in panel.series}
    records = {
        r.program.program_call: r
        for r in _records(programs_run)
        if r.program and r.program.program_session == slowest.session
    }
    assert len(records) == len(panel.rows) == WEKA_CALLS
    [timeline] = data.timelines
    labels = {c.call: call_label(c) for c in timeline.calls}
    t0 = slowest.start_s
    path_calls = {step.record.program.program_call for step in slowest.path if step.record.program}
    on_path = _bars(series["call on the critical path"], panel.rows)
    off_path = _bars(series["call (sent → end)"], panel.rows)
    assert set(on_path) == {labels[c] for c in path_calls}  # exactly the critical path's calls
    assert set(off_path) == {labels[c] for c in records if c not in path_calls}
    lags, waits = _bars(series["schedule lag"], panel.rows), _bars(series["wait (tool, think)"], panel.rows)
    for call, r in records.items():
        p = r.program
        assert p is not None and r.sent_s is not None and r.closed_s is not None
        label = labels[call]
        assert (on_path | off_path)[label] == pytest.approx((r.sent_s - t0, r.closed_s - t0), abs=1e-12)
        assert lags[label] == pytest.approx((p.program_ready_s - t0, r.sent_s - t0), abs=1e-12)
        parent = records.get(p.program_after) if p.program_after else None
        waited = anchor_s(parent, p.program_anchor or "end") if parent is not None else t0
        assert waits[label] == pytest.approx((waited - t0, p.program_ready_s - t0), abs=1e-12)
    # the rows in the order the calls were sent, and the page's figure draws the same bars
    assert list(panel.rows) == [labels[c] for c in sorted(records, key=lambda c: records[c].sent_s or 0.0)]
    figure = plotly_figure(chart)
    [trace] = [t for t in figure.data if t.name == "call on the critical path"]
    assert trace.orientation == "h" and len(trace.base) == len(path_calls)
    assert sorted(trace.base) == pytest.approx(sorted(records[c].sent_s - t0 for c in path_calls), abs=1e-12)


def test_report_files_have_the_section_and_its_charts(report: ReportFiles) -> None:
    md, html = report.markdown.read_text(), report.html.read_text()
    assert "## Agent programs" in md and '<section id="programs">' in html
    for heading in ("Where the time went (critical path)", "Calls by role and depth", "Slowest sessions"):
        assert f"### {heading}" in md and heading in html
    names = {p.name for p in report.charts}
    assert "programs-critical-path.png" in names
    assert any(n.startswith("session-timeline-1-") for n in names)
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in report.charts)
    assert 'id="chart-programs-critical-path"' in html and 'id="chart-session-timeline-1-' in html


def test_every_part_of_a_critical_path_has_a_title_and_a_colour() -> None:
    assert list(PART_TITLES) == list(PART_COLORS) == list(PARTS)


def test_a_run_without_programs_has_no_programs_section(tmp_path: Path) -> None:
    run = write_run(tmp_path / "plain", results([point(0, "users", 2)]))
    files = write_report([run], tmp_path / "out")
    assert "Agent programs" not in files.markdown.read_text()
    assert 'id="programs"' not in files.html.read_text()
    assert not any("session-timeline" in p.name or "programs" in p.name for p in files.charts)
