"""The report's "Stages" section: a staged point's ``stages`` become one row a stage in report.md
and report.html, with the backlog (a drain that never came reads "never"); a run without a staged
point has no such section."""

from __future__ import annotations

from pathlib import Path

from report_synthetic import point, results, write_run

from tokenbench.report import write_report


def _dist(p50: float | None) -> dict:
    keys = ("mean", "std", "min", "p90", "p95", "p99", "p999", "max")
    return {"count": 0 if p50 is None else 3, "p50": p50, **dict.fromkeys(keys, p50)}


def _stage(i: int, start: float, rate: float, good: float, backlog: tuple[int, int, int], drain: float | None) -> dict:
    at_start, at_end, peak = backlog
    return {
        "index": i,
        "start_s": start,
        "end_s": start + 10,
        "target_rate_per_s": rate,
        "ramp_s": 0.0,
        "population": "the requests scheduled in the stage",
        "requests": int(rate * 10),
        "ok": int(rate * 10),
        "failed": 0,
        "offered_per_s": rate,
        "requests_per_s": min(rate, 30.0),
        "output_tokens_per_s": min(rate, 30.0) * 10,
        "good_fraction": good,
        "ttft_s": _dist(0.02 if good > 0.5 else 0.9),
        "itl_s": _dist(0.005),
        "e2e_s": _dist(0.07),
        "backlog": {
            "at_start": at_start,
            "at_end": at_end,
            "peak": peak,
            "growth_per_s": (at_end - at_start) / 10,
            **({"drain_s": drain} if i == 2 else {}),
        },
    }


def _section(md: str, title: str) -> list[str]:
    """The lines of report.md's section ``title`` (to the next section)."""
    after = md.split(f"## {title}\n", 1)[1]
    return after.split("\n## ", 1)[0].splitlines()


def _staged_point(drain: float | None) -> dict:
    p = point(0, "rate", 10)
    p["stages"] = [
        _stage(0, 0, 10, 1.0, (1, 1, 2), None),
        _stage(1, 10, 50, 0.1, (1, 200, 200), None),
        _stage(2, 20, 10, 0.5, (200, 0, 200), drain),
    ]
    return p


def test_a_staged_run_gets_a_row_per_stage_with_its_backlog(tmp_path: Path) -> None:
    run = write_run(tmp_path / "staged", results([_staged_point(9.6)]))
    md = write_report([run], tmp_path / "out").markdown.read_text()
    assert "## Stages" in md
    rows = [line for line in _section(md, "Stages") if line.startswith("| vllm |")]
    assert len(rows) == 3, rows
    assert "| 2 | 10–20 | 50 req/s | 500 | 0 | 30.00 | 300.0 | 10 | 900 |" in rows[1]
    assert "| 1 → 200 | 200 | 19.90 |" in rows[1]
    assert rows[2].endswith("| 200 → 0 | 200 | -20.00 | 9.60 |")


def test_a_backlog_that_never_drained_says_so(tmp_path: Path) -> None:
    run = write_run(tmp_path / "staged", results([_staged_point(None)]))
    files = write_report([run], tmp_path / "out")
    rows = [line for line in _section(files.markdown.read_text(), "Stages") if "200 → 0" in line]
    assert rows and rows[0].endswith("| never |")
    assert "Stages" in files.html.read_text()


def test_a_run_without_a_staged_point_has_no_stages_section(tmp_path: Path) -> None:
    run = write_run(tmp_path / "plain", results([point(0, "users", 2)]))
    assert "## Stages" not in write_report([run], tmp_path / "out").markdown.read_text()
