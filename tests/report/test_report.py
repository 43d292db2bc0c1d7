"""The report's data shaping and rendering, with known answers from synthetic directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_synthetic import EVIL, WINDOW_S, point, results, windows, write_run
from rich.console import Console

from tokenbench.report.compare import compare, compare_markdown, compare_table, welch_p
from tokenbench.report.fmt import NULL_TEXT
from tokenbench.report.html import plot_text, write_report
from tokenbench.report.load import PointSpan, ReportInputError, Stat, load_inputs
from tokenbench.report.tables import headline_table
from tokenbench.report.verdict import decide, pareto_front, saturation_point, stability


def _span(rates: list[float], ramp_s: float = 10.0, drain: int = 1) -> PointSpan:
    ws = windows(0.0, ramp_s, rates, drain=drain)
    load_end = ramp_s + WINDOW_S * len(rates)
    return PointSpan(
        index=0,
        label="4 users",
        load_kind="users",
        start_s=0.0,
        ramp_end_s=ramp_s,
        measure_start_s=ramp_s,
        load_end_s=load_end,
        end_s=load_end + WINDOW_S * drain,
        windows=tuple(ws),
    )


# ---------------------------------------------------------------------------------------------
# saturation


def test_saturation_by_ttft_growth(rate_experiment: Path) -> None:
    data = load_inputs([rate_experiment])
    rows = [r for r in data.rows if r.config == "vllm_max_num_seqs=16"]
    sat = saturation_point(rows)
    assert sat is not None and sat.rate_per_s == 4.0 and sat.label == "4 req/s"
    assert sat.ttft_ratio == pytest.approx(2.5)
    assert "TTFT p50 2.5x" in sat.reason


def test_saturation_by_achieved_throughput(rate_experiment: Path) -> None:
    rows = [r for r in load_inputs([rate_experiment]).rows if r.config == "vllm_max_num_seqs=64"]
    sat = saturation_point(rows)
    assert sat is not None and sat.rate_per_s == 8.0
    assert sat.achieved_fraction == pytest.approx(0.81)
    assert "achieved 81%" in sat.reason


def test_saturation_compares_with_the_arrivals_scheduled_in_the_window(tmp_path: Path) -> None:
    """Poisson at 0.25/s for 20 s realised 3 arrivals (0.15/s) and all were served: achieved 0.15
    is 60% of the nominal rate but 100% of what was offered; not saturated."""

    low = point(0, "rate", 0.25, rps=0.15, ttft_s=0.1)
    low["offered_per_s"] = 0.15
    high = point(1, "rate", 1.0, rps=1.0, ttft_s=0.1)
    high["offered_per_s"] = 1.0
    run = write_run(tmp_path / "r", results([low, high]))
    assert saturation_point(load_inputs([run]).rows) is None
    low["offered_per_s"] = 0.25  # the same rate realised exactly: 60% achieved is saturated
    run = write_run(tmp_path / "r2", results([low, high]))
    sat = saturation_point(load_inputs([run]).rows)
    assert sat is not None and sat.achieved_fraction == pytest.approx(0.6)


def test_no_saturation(rate_experiment: Path) -> None:
    rows = [r for r in load_inputs([rate_experiment]).rows if r.config == "sglang"]
    assert saturation_point(rows) is None
    assert saturation_point([]) is None


# ---------------------------------------------------------------------------------------------
# degradation


def test_degradation_first_vs_last_minute() -> None:
    # 5 minutes steady: first minute 100 tok/s, last minute 90 tok/s -> -10%, flagged
    rates = [100.0] * 12 + [95.0] * 36 + [90.0] * 12
    s = stability(_span(rates))
    assert s is not None and s.basis == "first vs last minute"
    assert s.head_tokens_per_s == pytest.approx(100.0) and s.tail_tokens_per_s == pytest.approx(90.0)
    assert s.change == pytest.approx(-0.10)
    assert s.degraded


def test_degradation_thirds_for_short_runs_and_threshold() -> None:
    s = stability(_span([100.0, 100.0, 98.0, 97.0, 96.0, 95.0]))
    assert s is not None and s.basis == "first vs last third"
    assert s.change == pytest.approx(-0.045)
    assert not s.degraded  # 4.5% is within the 5% tolerance
    assert s.cv == pytest.approx(0.0191, abs=1e-3)


def test_degradation_ignores_ramp_and_drain() -> None:
    # ramp windows (5 tok/s) and the drain window (2 tok/s) would make a flat run look degraded
    s = stability(_span([100.0] * 6, ramp_s=20.0, drain=2))
    assert s is not None and s.change == pytest.approx(0.0) and not s.degraded and s.cv == pytest.approx(0.0)


def test_degradation_needs_three_windows() -> None:
    assert stability(_span([100.0, 50.0])) is None


# ---------------------------------------------------------------------------------------------
# Pareto front


def test_pareto_front() -> None:
    xs = [100.0, 200.0, 150.0, 200.0, None, 50.0]
    ys = [50.0, 80.0, 90.0, 70.0, 10.0, 50.0]
    assert pareto_front(xs, ys) == [True, False, False, True, False, False]


# ---------------------------------------------------------------------------------------------
# verdict


def test_verdict_picks(rate_experiment: Path) -> None:
    data = load_inputs([rate_experiment])
    v = decide(data)
    loads = {lv.label: lv for lv in v.loads}
    assert list(loads) == ["1 req/s", "2 req/s", "4 req/s", "8 req/s"]

    one = loads["1 req/s"]
    assert one.best_ttft.config == "sglang"
    assert one.best_ttft.stat.mean == pytest.approx(0.088)
    assert one.best_ttft.stat.ci95 is not None and one.best_ttft.stat.n == 3
    assert one.best_ttft.clear is True  # 88 vs 110 ms, CIs of ±1% noise do not overlap
    assert one.best_throughput.config == "vllm_max_num_seqs=64"
    assert one.best_throughput.stat.mean == pytest.approx(125.0)
    assert one.best_throughput.clear is False  # 125 vs 120 tok/s: within the CIs

    eight = loads["8 req/s"]
    assert eight.best_throughput.config == "vllm_max_num_seqs=16"
    assert eight.most_stable is not None and eight.most_stable.config != "vllm_max_num_seqs=16"
    assert eight.most_stable.cv.mean == pytest.approx(0.0)

    degraded = [s for s in v.stability if s.degraded]
    assert {(s.config, s.label) for s in degraded} == {("vllm_max_num_seqs=16", "8 req/s")}
    assert len(degraded) == 3  # every trial
    assert all(s.change == pytest.approx(-0.15) for s in degraded)

    assert v.highest_load_meeting_slo == {
        "vllm_max_num_seqs=16": "2 req/s",
        "vllm_max_num_seqs=64": "4 req/s",
        "sglang": "8 req/s",
    }
    missed = {(s.config, s.label) for s in v.slo if s.met is False}
    assert missed == {
        ("vllm_max_num_seqs=16", "4 req/s"),
        ("vllm_max_num_seqs=16", "8 req/s"),
        ("vllm_max_num_seqs=64", "8 req/s"),
    }
    assert {s.config: s.label for s in v.saturation} == {
        "vllm_max_num_seqs=16": "4 req/s",
        "vllm_max_num_seqs=64": "8 req/s",
    }


# ---------------------------------------------------------------------------------------------
# the written report


def test_write_report_experiment(rate_experiment: Path, tmp_path: Path) -> None:
    files = write_report([rate_experiment], tmp_path / "out")
    html = files.html.read_text()
    assert html.count('<script type="text/javascript">') == 1  # plotly.js inlined once
    body = html.split("</head>")[1]
    assert "<script src" not in html and "https://" not in body  # nothing fetched: works offline
    names = {p.name for p in files.charts}
    assert {"throughput-vs-rate.png", "knob-max-num-seqs.png", "pareto.png", "errors.png"} <= names
    assert all(p.stat().st_size > 5_000 for p in files.charts)
    for p in files.charts:  # every PNG has a div in the page
        assert f'id="chart-{p.stem}"' in html
    # the knob chart joins the two vLLM configurations on max_num_seqs
    assert "Throughput vs max_num_seqs" in html
    assert "saturates at 4 req/s" in html and "TTFT p50 2.5x the lowest rate" in html

    md = files.markdown.read_text()
    assert md.startswith("# tokenbench report")
    for heading in (
        "## Inputs",
        "## Verdict",
        "### Best at each load",
        "### Service-level objectives",
        "### Saturation",
        "## Headline numbers",
        "## Stability over time",
        "## Charts",
    ):
        assert heading in md
    assert "vllm_max_num_seqs=16 saturates at 4 req/s" in md
    assert "sglang meets the SLO (≥ 90% good requests) up to 8 req/s" in md
    assert "SLO: TTFT ≤ 500 ms, TPOT ≤ 50 ms" in md
    assert "DEGRADED in 3 of 3" in md and "fell in 3 of 3 trials, by 15.0% on average" in md
    assert "± " in md  # CIs from 3 trials
    for p in files.charts:
        assert f"](charts/{p.name})" in md


def test_users_report_has_the_studys_figures(users_experiments: tuple[Path, Path], tmp_path: Path) -> None:
    files = write_report(list(users_experiments), tmp_path / "out")
    names = {p.name for p in files.charts}
    assert {"ttft-vs-users.png", "throughput-vs-users.png"} <= names
    assert "throughput-vs-rate.png" not in names
    html = files.html.read_text()
    # same server label in two experiments: told apart by the experiment's name
    assert "vllm (users-a)" in html and "vllm (users-b)" in html


def test_escaping(evil_run: Path, tmp_path: Path) -> None:
    files = write_report([evil_run], tmp_path / "out")
    html = files.html.read_text()
    assert EVIL not in html
    assert "<b>evil</b>" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;evil&lt;/b&gt;" in html
    # plotly titles/legends get the escaped text too (inside JSON, "/" and "<" are \u-escaped)
    assert "&lt;b&gt;evil&lt;\\u002fb&gt;" in html
    md = files.markdown.read_text()
    assert EVIL not in md and "&lt;script&gt;" in md
    assert plot_text("$x$").startswith("\u200b")  # not read as LaTeX


def test_nulls_are_dashes_never_zero(evil_run: Path, tmp_path: Path) -> None:
    data = load_inputs([evil_run])
    table = headline_table(data)
    dead = next(row for row in table.rows if row[1] == "8 users")
    col = {h: i for i, h in enumerate(table.headers)}
    for header in (
        "output throughput (tok/s)",
        "TTFT mean (ms)",
        "TTFT p50 (ms)",
        "TPOT mean (ms)",
        "E2E mean (ms)",
        "goodput (req/s)",
        "server preemptions",
        "server KV usage max (%)",
    ):
        assert dead[col[header]] == NULL_TEXT, header
    assert dead[col["errors (%)"]] == "100.0"
    files = write_report([evil_run], tmp_path / "out")
    md = files.markdown.read_text()
    line = next(ln for ln in md.splitlines() if "| 8 users |" in ln)
    assert "| – |" in line and "| 0.0 |" not in line
    # the all-null series (output rate, TTFT, server gauges of the dead point) draw no zero line
    data_json = files.html.read_text()
    assert "GPU util" not in data_json  # never available: series left out


def test_not_a_result_directory(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match="neither a run directory"):
        write_report([tmp_path], tmp_path / "out")


def test_real_schema_run(tmp_path: Path) -> None:
    """A run with one point and no SLO: no verdict picks, no crash, header facts shown."""
    run = write_run(
        tmp_path / "r", results([point(0, "users", 16, steady_rates=[60.0, 62.0, 61.0])], engine_version="9.9.9")
    )
    files = write_report([run], tmp_path / "out")
    html = files.html.read_text()
    assert "9.9.9" in html and "25.5 s" in html and "smollm2" in html and "synthetic" in html
    assert "One configuration" in html and "No SLO was set" in html


# ---------------------------------------------------------------------------------------------
# compare


def test_compare_deltas_and_significance(users_experiments: tuple[Path, Path]) -> None:
    a, b = users_experiments
    rows = compare([a, b])
    by = {(r.label, r.metric): r for r in rows}
    tput = by[("4 users", "output_tokens_per_s")]
    assert tput.baseline.mean == pytest.approx(400.0) and tput.other.mean == pytest.approx(440.0)
    assert tput.delta == pytest.approx(40.0) and tput.delta_pct == pytest.approx(0.10)
    assert tput.significant is True and tput.p_adjusted < 0.05 and tput.better is True
    assert tput.p_adjusted >= tput.p_value  # Holm never lowers a p-value
    ttft = by[("4 users", "ttft_s_mean")]
    assert ttft.delta == pytest.approx(0.0, abs=1e-12)
    assert ttft.significant is False and ttft.p_value == pytest.approx(1.0)
    assert tput.baseline_config == tput.other_config == "vllm"

    md = compare_markdown(rows)
    assert "+10.0%" in md and "yes (p=" in md and "no (p=1.000, Holm 1.000)" in md
    console = Console(record=True, width=220)
    console.print(compare_table(rows))
    assert "+10.0%" in console.export_text()


def test_compare_single_trial_is_na(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", results([point(0, "users", 4, tokens_per_s=100.0)], backend="vllm"))
    b = write_run(tmp_path / "b", results([point(0, "users", 4, tokens_per_s=80.0)], backend="sglang"))
    rows = compare([a, b])
    tput = next(r for r in rows if r.metric == "output_tokens_per_s")
    # different backends, one configuration each: matched by load
    assert (tput.baseline_config, tput.other_config) == ("vllm", "sglang")
    assert tput.delta == pytest.approx(-20.0) and tput.delta_pct == pytest.approx(-0.2)
    assert tput.significant is None and tput.p_value is None and tput.better is False
    assert "n/a" in compare_markdown(rows)


def test_compare_needs_two() -> None:
    with pytest.raises(ValueError):
        compare([Path(".")])


def test_welch_without_variance() -> None:
    same = Stat(1.0, 0.0, 3, (1.0, 1.0, 1.0))
    other = Stat(2.0, 0.0, 3, (2.0, 2.0, 2.0))
    assert welch_p(same, same) == 1.0
    assert welch_p(same, other) is None  # two constants: untestable, never p = 0
    assert welch_p(same, Stat(1.0, None, 1, (1.0,))) is None


def test_holm_bonferroni_adjusts_many_tests() -> None:
    from tokenbench.report.compare import holm

    # m = 4: 0.01 x 4, 0.02 x 3, 0.03 x 2 -> monotone, 0.04 x 1 -> 0.06 (kept monotone), None stays
    assert holm([0.03, None, 0.01, 0.04, 0.02]) == pytest.approx([0.06, None, 0.04, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_experiment_reads_cells_outcomes(rate_experiment: Path) -> None:
    data = load_inputs([rate_experiment])
    row = next(r for r in data.rows if r.config == "sglang" and r.label == "8 req/s")
    assert row.outcomes == {"ok": 120, "timeout": 6}  # summed over 3 trials
    assert row.num_trials == 3
    exp = json.loads((rate_experiment / "experiment.json").read_text())
    assert len(data.series) == len(exp["cells"])


def test_experiment_where_every_server_failed(tmp_path: Path) -> None:
    exp_dir = tmp_path / "failed"
    exp_dir.mkdir()
    error = "vLLM did not become ready: exited with code 1 <see log>"
    (exp_dir / "experiment.json").write_text(
        json.dumps(
            {
                "name": "all-failed",
                "description": "",
                "complete": False,
                "spec": {
                    "name": "all-failed",
                    "load": {"rates": [1.0]},
                    "trials": 2,
                    "backends": [{"backend": "vllm", "model": "m"}],
                    "slo": {"ttft_s": 1.0},
                },
                "servers": [
                    {
                        "label": "vllm",
                        "backend": "vllm",
                        "swept": {},
                        "status": "failed",
                        "error": error,
                        "cold_start_s": None,
                        "engine_version": None,
                    }
                ],
                "cells": {
                    f"vllm__default__t{t}": {
                        "server": "vllm",
                        "variant": "default",
                        "trial": t,
                        "status": "failed",
                        "error": "server did not start",
                        "run_dir": f"cells/vllm__default__t{t}",
                    }
                    for t in (1, 2)
                },
                "aggregates": [],
            }
        )
    )
    files = write_report([exp_dir], tmp_path / "out")
    assert files.charts == []
    md = files.markdown.read_text()
    assert "No load point finished" in md and "6 failed" not in md and "2 failed" in md
    assert "vLLM did not become ready: exited with code 1 &lt;see log&gt;" in md
    html = files.html.read_text()
    assert "No requests were measured" in html and "TTFT ≤ 1000 ms" in html
