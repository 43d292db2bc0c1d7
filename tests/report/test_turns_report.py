"""TTFT by turn index in the report: a session run's ``by_turn`` becomes a table in report.md and
report.html; a run without sessions has no such section."""

from __future__ import annotations

from pathlib import Path

from report_synthetic import point, results, write_run

from tokenbench.report import write_report


def _dist(mean: float | None, p90: float | None = None, count: int = 3) -> dict:
    keys = ("std", "min", "p50", "p95", "p99", "p999", "max")
    return {"count": count, "mean": mean, "p90": p90, **dict.fromkeys(keys)}


def _session_point() -> dict:
    p = point(0, "users", 2)
    p["by_turn"] = [
        {"turn_index": k, "count": 3, "ttft_s": _dist(t, t * 2), "e2e_s": _dist(1.0), "prompt_tokens": _dist(n)}
        for k, (t, n) in enumerate([(0.2, 40), (0.05, 120.4)])
    ]
    p["sessions"] = {"started": 3, "completed": 3, "ended_by_error": 0, "ended_by_history_limit": 0, "ended_by_stop": 0}
    return p


def test_a_session_run_gets_a_ttft_by_turn_table(tmp_path: Path) -> None:
    run = write_run(tmp_path / "sessions", results([_session_point()]))
    files = write_report([run], tmp_path / "out")
    md = files.markdown.read_text()
    assert "## TTFT by turn (multi-turn sessions)" in md
    assert "| vllm | 2 users | 0 | 3 | 200.0 | 400.0 | 40 |" in md
    assert "| vllm | 2 users | 1 | 3 | 50.0 | 100.0 | 120 |" in md
    assert "TTFT by turn (multi-turn sessions)" in files.html.read_text()


def test_a_run_without_sessions_has_no_turn_section(tmp_path: Path) -> None:
    run = write_run(tmp_path / "plain", results([point(0, "users", 2)]))
    files = write_report([run], tmp_path / "out")
    assert "TTFT by turn" not in files.markdown.read_text()
