"""What the report concludes (report/verdict.py): saturation, Pareto front, the verdict's picks."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_synthetic import point, results, write_run

from tokenbench.report.read.load import load_inputs
from tokenbench.report.sections.tables import verdict_lines
from tokenbench.report.sections.verdict import decide, pareto_front, saturation_point


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


def test_pareto_front() -> None:
    xs = [100.0, 200.0, 150.0, 200.0, None, 50.0]
    ys = [50.0, 80.0, 90.0, 70.0, 10.0, 50.0]
    assert pareto_front(xs, ys) == [True, False, False, True, False, False]


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


def test_a_hit_rate_more_than_ten_points_from_the_expected_reuse_is_flagged(tmp_path: Path) -> None:
    from tokenbench.report.sections.tables import verdict_lines

    points = [point(i, "users", u, rps=1.0, ttft_s=0.1) for i, u in enumerate((1, 2, 4))]
    for p, hit in zip(points, (0.59, 0.885, 0.40)):
        p["prefix_cache"] = {"reset": "not_requested", "hit_rate": hit, "hit_rate_source": "server_counters",
                             "expected_reuse": 0.59}  # fmt: skip
    data = load_inputs([write_run(tmp_path / "r", results(points))])
    flags = decide(data).cache
    assert [(f.label, f.above) for f in flags] == [(points[1]["label"], True), (points[2]["label"], False)]
    lines = [line for line in verdict_lines(decide(data), data) if "prefix-cache hit rate" in line]
    assert len(lines) == 2
    assert "88.5% vs the workload's expected reuse 59.0%" in lines[0] and "--prefix-cache reset" in lines[0]
    assert "40.0%" in lines[1] and "evictions" in lines[1]


def _priced(path: Path, backend: str, usd_per_hour: float | None, tokens_per_s: float) -> Path:
    p = point(0, "rate", 2.0, tokens_per_s=tokens_per_s)
    if usd_per_hour is not None:
        per_million = usd_per_hour / 3600 / tokens_per_s * 1e6
        p["cost"] = {"usd_per_gpu_hour": usd_per_hour, "gpus": 1, "usd_per_hour": usd_per_hour,
                     "usd_per_million_output_tokens": per_million, "usd_per_million_total_tokens": None}  # fmt: skip
    return write_run(path, results([p], backend=backend))


def test_the_cheapest_per_output_token_is_picked_where_runs_were_priced(tmp_path: Path) -> None:
    from tokenbench.report.sections.tables import best_table

    # vllm: $3.60/h at 100 tok/s = $10 per million; sglang: $7.20/h at 400 tok/s = $5 per million
    data = load_inputs([_priced(tmp_path / "a", "vllm", 3.6, 100.0), _priced(tmp_path / "b", "sglang", 7.2, 400.0)])
    (lv,) = decide(data).loads
    assert lv.cheapest is not None and lv.cheapest.config.startswith("sglang")
    assert lv.cheapest.stat.mean == pytest.approx(5.0) and lv.cheapest.runner_up_stat.mean == pytest.approx(10.0)
    table = best_table(decide(data))
    assert table is not None and table.headers[-1] == "cheapest (USD per 1M output tokens)"
    assert table.rows[0][-1].startswith("sglang") and "5.000" in table.rows[0][-1]

    unpriced = load_inputs([_priced(tmp_path / "c", "vllm", None, 100.0)])
    assert decide(unpriced).loads[0].cheapest is None
    table = best_table(decide(unpriced))
    assert table is not None and not any("cheapest" in h for h in table.headers)


def test_a_point_the_client_limited_is_flagged_in_the_verdict(tmp_path: Path) -> None:
    """The verdict says plainly that the client, not the server, set a limited point's numbers;
    a point under both limits, and one from a run before the client was sampled, are not flagged."""
    from tokenbench.report.sections.tables import verdict_lines

    points = [point(i, "users", u, rps=1.0, ttft_s=0.1) for i, u in enumerate((1, 2, 4))]
    for p, (cpu, lag, limited) in zip(points[:2], ((0.3, 0.001, False), (0.95, 0.012, True))):
        p["client"] = {"workers": 1, "period_s": [0.0, 20.0], "samples": 40, "ticks": 400, "cpu_util_max": cpu,
                       "cpu_util_mean": cpu / 2, "loop_lag_p99_s": lag, "loop_lag_max_s": lag * 2,
                       "connections_max": 2, "limited": limited,
                       "limited_by": ["loop_lag", "cpu"] if limited else []}  # fmt: skip
    data = load_inputs([write_run(tmp_path / "r", results(points))])
    flags = decide(data).client
    assert [(f.label, f.share, f.cpu_util_max, f.loop_lag_p99_s) for f in flags] == [("2 users", 1.0, 0.95, 0.012)]
    [line] = [line for line in verdict_lines(decide(data), data) if "the client, not the server" in line]
    assert line.startswith(f"{flags[0].config} at 2 users: the client, not the server, set these numbers")
    assert (
        "client CPU max 95% of a core, loop lag p99 12.0 ms; limits 90%, 6 ms" in line
    )  # A new user's report: the margin
    assert line.endswith(
        "rerun with fewer users (or a lower rate) per client process, or spread the load over processes with --workers N."
    )


def test_a_run_whose_every_point_failed_says_so_with_the_servers_error(tmp_path: Path) -> None:
    """Not "One configuration: nothing to pick between": the run failed, and what the server said."""
    from tokenbench.report.sections.tables import verdict_lines

    failed = point(0, "users", 4, outcomes={"http_error": 20}, tokens_per_s=None, ttft_s=None)
    failed["errors_seen"] = [{"outcome": "http_error", "status": 400, "text": "HTTP 400: no such model", "count": 20}]
    failed["stopped_early"] = {"by": "circuit_breaker", "reason": "20 requests in a row failed", "at_s": 1.0}
    data = load_inputs([write_run(tmp_path / "r", results([failed]))])
    lines = verdict_lines(decide(data), data)
    assert lines[0] == "Every point failed: the server did not serve the load, so nothing was measured."
    assert lines[1] == (
        "4 users failed: 20 of 20 finished requests failed (http_error 20); stopped early by the circuit "
        "breaker: 20 requests in a row failed; the server said: HTTP 400: no such model."
    )
    assert not any("nothing to pick between" in line for line in lines)


def test_a_point_fails_past_half_its_finished_requests_failed_cancelled_ones_aside(tmp_path: Path) -> None:
    from tokenbench.report.sections.tables import verdict_lines

    half = point(0, "users", 4, outcomes={"ok": 10, "timeout": 10, "cancelled": 50})  # 50%: not past half
    most = point(1, "users", 8, outcomes={"ok": 9, "timeout": 11, "cancelled": 1})
    data = load_inputs([write_run(tmp_path / "r", results([half, most]))])
    verdict = decide(data)
    assert [f.label for f in verdict.failed] == ["8 users"]
    lines = verdict_lines(verdict, data)
    assert lines[0] == "8 users failed: 11 of 20 finished requests failed (timeout 11)."
    assert "One configuration: nothing to pick between; its numbers are in the headline table." in lines


def _graded_point(tokens_per_s: float, ttft_s: float, correct: int, graded: int = 40) -> dict:
    p = point(0, "users", 4, tokens_per_s=tokens_per_s, ttft_s=ttft_s)
    p["accuracy"] = {
        "grader": "numeric",
        "requests": graded,
        "graded": graded,
        "not_graded": 0,
        "correct": correct,
        "accuracy": correct / graded,
        "ci_low": None,
        "ci_high": None,
        "interval": "wilson 95%",
    }
    return p


def test_a_faster_configuration_that_answers_worse_is_not_called_simply_better(tmp_path: Path) -> None:
    """Two engines at 4 users: the faster (2x the tokens/s, half the TTFT) answers 20/40 graded
    rows right, the slower 36/40: the verdict says the pick for speed answers worse, with both
    counts and the two-proportion test (p = 9.48e-5, scipy's chi2_contingency without correction)."""
    fast = write_run(tmp_path / "fast", results([_graded_point(200.0, 0.05, 20)], backend="sglang"))
    slow = write_run(tmp_path / "slow", results([_graded_point(100.0, 0.10, 36)], backend="vllm"))
    data = load_inputs([fast, slow])
    verdict = decide(data)
    assert [(q.picked_for, q.fast.config, q.accurate.config) for q in verdict.quality] == [
        ("best throughput", data.rows[0].config, data.rows[1].config),
        ("best TTFT", data.rows[0].config, data.rows[1].config),
    ]
    q = verdict.quality[0]
    assert (q.fast.correct, q.fast.graded, q.accurate.correct, q.accurate.graded) == (20, 40, 36, 40)
    assert q.p == pytest.approx(9.477e-5, rel=1e-3)
    lines = [line for line in verdict_lines(verdict, data) if "answers worse" in line]
    assert len(lines) == 2 and "20/40 right (50.0%)" in lines[0] and "36/40 (90.0%" in lines[0], lines
    assert lines[0].endswith("faster, not better.")
    # the same counts on both sides, or a difference within chance: no flag
    same = write_run(tmp_path / "same", results([_graded_point(100.0, 0.10, 34)], backend="vllm"))
    near = load_inputs(
        [write_run(tmp_path / "fast2", results([_graded_point(200.0, 0.05, 33)], backend="sglang")), same]
    )
    assert decide(near).quality == ()
