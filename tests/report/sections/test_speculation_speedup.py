"""Speculative decoding vs the same engine without it (report/sections/speculation_speedup.py): the
speedup and its CI with known answers (paired by trial, else the two CIs combined), the verdict, the
baseline found by the speculation tags, the sentence saying where a gain turns into none, and the
section of a report rendered from a synthetic experiment directory."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from report_synthetic import _ci, point, write_experiment

from tokenbench.metrics.catalogue import METRICS
from tokenbench.report import write_report
from tokenbench.report.read.data import ExperimentHeader, PointRow, ReportData
from tokenbench.report.read.load import load_inputs
from tokenbench.report.sections.speculation_speedup import (
    baselines,
    speculation_study,
    speedup_lines,
    speedup_of,
    speedups,
)
from tokenbench.results import TrialStat, mean_ci95

TPOT, E2E, TOKENS = METRICS["tpot_s_p50"], METRICS["e2e_s_p50"], METRICS["output_tokens_per_s"]


def _stat(*values: float) -> TrialStat:
    return mean_ci95(values)


def test_a_latency_speedup_is_baseline_over_speculating_paired_by_trial():
    base = _stat(0.030, 0.033, 0.027)
    spec = _stat(0.020, 0.0200, 0.0180)  # per trial: 1.5x, 1.65x, 1.5x faster
    value, ci, paired = speedup_of(TPOT, base, spec, trials=3)
    ratios = [0.030 / 0.020, 0.033 / 0.020, 0.027 / 0.018]
    assert paired
    assert value == pytest.approx(sum(ratios) / 3)
    assert ci == pytest.approx(mean_ci95(ratios).ci95)


def test_a_throughput_speedup_is_speculating_over_baseline():
    base = _stat(100.0, 110.0, 90.0)
    spec = _stat(80.0, 88.0, 72.0)  # 0.8x in every trial: a loss with no spread
    value, ci, paired = speedup_of(TOKENS, base, spec, trials=3)
    assert paired and value == pytest.approx(0.8) and ci == pytest.approx(0.0, abs=1e-12)


def test_without_every_trial_on_both_sides_the_ratio_of_the_means_and_the_cis_combined():
    base = _stat(0.030, 0.032, 0.028)
    spec = _stat(0.020, 0.022)  # a trial failed: trial k cannot be matched
    value, ci, paired = speedup_of(TPOT, base, spec, trials=3)
    assert not paired
    assert value == pytest.approx(0.030 / 0.021)
    assert ci == pytest.approx(math.hypot(base.ci95, spec.ci95) / 0.021)
    one = speedup_of(TPOT, _stat(0.03), _stat(0.02), trials=1)
    assert one[0] == pytest.approx(1.5) and one[1] is None and not one[2]


def _row(config: str, tags: dict, users: int = 1, backend: str = "vllm", **metrics: TrialStat) -> PointRow:
    return PointRow(
        source="exp",
        config=config,
        backend=backend,
        swept=dict(tags),
        variant="default",
        point=0,
        label=f"{users} users",
        load_kind="users",
        load_value=float(users),
        metrics=dict(metrics),
        outcomes={"ok": 10},
        num_trials=3,
    )


OFF = {"speculation": "off"}


def _draft(k: int) -> dict:
    return {"speculation": "draft_model", "speculative_tokens": k}


def test_the_baseline_is_the_configuration_tagged_off_of_the_same_backend():
    rows = [
        _row("off", OFF),
        _row("draft-k2", _draft(2)),
        _row("draft-k4", _draft(4)),
        _row("plain", {}),  # no tag: not in the study
        _row("sglang-ngram", {"speculation": "ngram", "speculative_tokens": 2}, backend="sglang"),  # no sglang off
    ]
    assert baselines(rows) == {"draft-k2": "off", "draft-k4": "off", "sglang-ngram": None}
    # two off configurations: the one with the same other knobs and tags (a max-num-seqs sweep)
    swept = [
        _row("off-16", {**OFF, "max_num_seqs": 16}),
        _row("off-64", {**OFF, "max_num_seqs": 64}),
        _row("draft-16", {**_draft(2), "max_num_seqs": 16}),
        _row("draft-32", {**_draft(2), "max_num_seqs": 32}),  # neither: none, not a guess
    ]
    assert baselines(swept) == {"draft-16": "off-16", "draft-32": None}


def _data(rows: list[PointRow], trials: int = 3) -> ReportData:
    header = ExperimentHeader(Path("exp"), "exp", "", True, trials, "users", None, "synthetic", {}, (), ())
    return ReportData(runs=(), experiments=(header,), rows=tuple(rows), series=())


def _study_rows(gains: dict[str, dict[int, float]], noise: tuple[float, ...] = (1.0, 1.0, 1.0)) -> list[PointRow]:
    """off and each speculating configuration at each user count: TPOT p50 = 30 ms x user count x
    a per-trial wobble for off, off's / the gain for the speculating one (the gain in every trial,
    unless ``noise`` moves it per trial)."""
    rows = []
    users = sorted({u for by in gains.values() for u in by})
    for u in users:
        base = [0.030 * u * w for w in (0.98, 1.0, 1.02)]
        rows.append(_row("off", OFF, u, tpot_s_p50=_stat(*base)))
    for config, by in gains.items():
        k = int(config.rsplit("k", 1)[1])
        for u, gain in by.items():
            base = [0.030 * u * w for w in (0.98, 1.0, 1.02)]
            rows.append(_row(config, _draft(k), u, tpot_s_p50=_stat(*(b / (gain * n) for b, n in zip(base, noise)))))
    return rows


def test_the_speedup_per_load_has_its_verdict():
    rows = _study_rows({"draft-k2": {1: 1.8, 4: 1.0, 16: 0.7}}, noise=(1.0, 1.02, 0.98))
    items = [s for s in speedups(_data(rows)) if s.metric == "tpot_s_p50"]
    assert [(s.load, s.baseline) for s in items] == [("1 user", "off"), ("4 users", "off"), ("16 users", "off")]
    assert [s.verdict for s in items] == ["gain", "no difference", "loss"]
    assert all(s.paired for s in items)
    gain = items[0]
    ratios = [1.8 * n for n in (1.0, 1.02, 0.98)]
    assert gain.speedup == pytest.approx(sum(ratios) / 3)
    assert gain.ci95 == pytest.approx(mean_ci95(ratios).ci95)
    # with no TPOT on either side there is no speedup, and no verdict
    assert {s.verdict for s in speedups(_data(rows)) if s.metric != "tpot_s_p50"} == {"unknown"}
    assert {s.speedup for s in speedups(_data(rows)) if s.metric != "tpot_s_p50"} == {None}


def test_the_sentence_says_where_the_gain_turns_into_none():
    rows = _study_rows(
        {
            "draft-k2": {1: 1.8, 4: 1.0, 16: 1.0},  # a gain at 1 user, none from 4
            "draft-k4": {1: 1.5, 4: 0.8, 16: 0.6},  # a gain at 1 user, a loss from 4
            "ngram-k2": {1: 1.4, 4: 1.2, 16: 1.1},  # a gain at every load
            "ngram-k4": {1: 1.3, 4: 1.0, 16: 1.2},  # gains again at 16 users
        },
        noise=(1.0, 1.001, 0.999),
    )
    lines = speedup_lines(speedups(_data(rows)))
    assert (
        lines[0]
        == "draft-k2: TPOT p50 1.80x faster at 1 user (CI 1.80–1.80), no gain from 4 users (1.00x, CI 1.00–1.00)."
    )
    assert (
        lines[1]
        == "draft-k4: TPOT p50 1.50x faster at 1 user (CI 1.50–1.50), a loss from 4 users (0.80x, CI 0.80–0.80)."
    )
    assert lines[2] == (
        "ngram-k2: TPOT p50 1.40x faster at 1 user (CI 1.40–1.40), 1.20x at 4 users (CI 1.20–1.20), "
        "1.10x at 16 users (CI 1.10–1.10) (a gain at every load)."
    )
    assert lines[3] == (
        "ngram-k4: TPOT p50 1.30x faster at 1 user (CI 1.30–1.30), no gain at 4 users (1.00x, CI 1.00–1.00); "
        "a gain again at 16 users."
    )
    assert len(lines) == 4  # E2E and throughput: none in these rows, nothing said of them


def test_a_configuration_that_gained_nowhere_is_said_to_with_its_losses():
    rows = _study_rows({"draft-k4": {1: 1.0, 4: 0.5}}, noise=(1.0, 1.01, 0.99))
    assert speedup_lines(speedups(_data(rows))) == [
        "draft-k4: TPOT p50 no gain at any load, a loss: 0.50x at 4 users (CI 0.49–0.51)."
    ]
    same = _study_rows({"draft-k4": {1: 1.0, 4: 1.0}}, noise=(1.0, 1.01, 0.99))
    assert speedup_lines(speedups(_data(same))) == [
        "draft-k4: no gain or loss over off beyond the 95% CI at any load, on any metric."
    ]
    # a gain first found above the lowest load
    late = _study_rows({"draft-k2": {1: 1.0, 4: 1.5}}, noise=(1.0, 1.01, 0.99))
    assert speedup_lines(speedups(_data(late))) == [
        "draft-k2: TPOT p50 no gain below 4 users, 1.50x faster at 4 users (CI 1.46–1.54)."
    ]
    single = [_row("off", OFF, tpot_s_p50=_stat(0.03)), _row("draft-k2", _draft(2), tpot_s_p50=_stat(0.02))]
    assert speedup_lines(speedups(_data(single, trials=1))) == [
        "draft-k2: one trial per configuration, so no CI: run trials to tell it from off."
    ]
    orphan = [_row("eagle-k2", {"speculation": "eagle"}), _row("off", OFF, backend="sglang")]
    assert speedup_lines([], _data(orphan)) == [
        "eagle-k2: no single configuration without speculation (tag speculation: off) to compare with."
    ]


def test_a_metric_that_lost_is_said_beside_one_that_gained():
    rows = []
    for u, gain in ((1, 1.5), (4, 0.8)):
        base = [0.030 * u * w for w in (0.98, 1.0, 1.02)]
        tokens = [100.0 * u * w for w in (1.0, 1.01, 0.99)]
        rows.append(_row("off", OFF, u, tpot_s_p50=_stat(*base), output_tokens_per_s=_stat(*tokens)))
        spec_tpot = _stat(*(b / 1.5 for b in base))  # faster per token at both loads
        spec_tokens = _stat(*(t * gain for t in tokens))  # but less throughput at 4 users
        rows.append(_row("draft-k2", _draft(2), u, tpot_s_p50=spec_tpot, output_tokens_per_s=spec_tokens))
    assert speedup_lines(speedups(_data(rows))) == [
        "draft-k2: TPOT p50 1.50x faster at 1 user (CI 1.50–1.50), 1.50x at 4 users (CI 1.50–1.50) "
        "(a gain at every load).",
        "draft-k2: output throughput 1.50x higher at 1 user (CI 1.50–1.50), a loss at 4 users (0.80x, CI 0.80–0.80).",
    ]


# ---------------------------------------------------------------------------------------------
# a report of a synthetic experiment directory

GAINS = {"off": {1: 1.0, 4: 1.0}, "draft-k2": {1: 1.6, 4: 1.0}, "draft-k4": {1: 1.3, 4: 0.7}}
TAGS = {"off": OFF, "draft-k2": _draft(2), "draft-k4": _draft(4)}


def _study(tmp_path: Path) -> Path:
    """off, draft-k2 and draft-k4 at 1 and 4 users, 3 trials: TPOT, E2E and throughput each
    speculating configuration's gain at that load times off's (within 1% of noise per trial)."""

    def points(label: str, trial: int) -> list[dict]:
        noise = {1: 0.99, 2: 1.0, 3: 1.01}[trial]
        out = []
        for i, users in enumerate((1, 4)):
            gain = GAINS[label][users] * (noise if label != "off" else 1.0)
            tpot = 0.030 * users / gain
            out.append(point(i, "users", users, tokens_per_s=100.0 * users * gain, tpot_s=tpot, ttft_s=0.1 + tpot))
        return out

    servers = {label: ("vllm", TAGS[label]) for label in GAINS}
    path = write_experiment(tmp_path / "study", "speculation", servers, {"users": [1, 4]}, 3, points)
    # the aggregates' medians, as the experiment runner writes them (the builder writes the headline's)
    state = json.loads((path / "experiment.json").read_text())
    for agg in state["aggregates"]:
        per_trial = []
        for cell in state["cells"].values():
            if cell["server"] == agg["server"]:
                res = json.loads((path / cell["run_dir"] / "results.json").read_text())
                per_trial.append(res["points"][agg["point"]])
        agg["metrics"]["tpot_s_p50"] = _ci([p["tpot_s"]["p50"] for p in per_trial])
        agg["metrics"]["e2e_s_p50"] = _ci([p["e2e_s"]["p50"] for p in per_trial])
    (path / "experiment.json").write_text(json.dumps(state))
    return path


def test_the_report_of_a_speculation_study_has_the_speedups_and_where_they_end(tmp_path):
    exp = _study(tmp_path)
    by = {(s.config, s.load, s.metric): s for s in speedups(load_inputs([exp]))}
    assert len(by) == 2 * 2 * 3  # 2 speculating configurations x 2 loads x 3 metrics
    assert by[("draft-k2", "1 user", "tpot_s_p50")].speedup == pytest.approx(1.6)
    assert by[("draft-k2", "1 user", "output_tokens_per_s")].speedup == pytest.approx(1.6)
    assert by[("draft-k4", "4 users", "output_tokens_per_s")].verdict == "loss"
    assert all(s.paired and s.ci95 is not None for s in by.values())
    md = write_report([exp], tmp_path / "out").markdown.read_text()
    assert "## Speculation speedup" in md
    assert "draft-k2: TPOT p50 1.60x faster at 1 user (CI 1.56–1.64), no gain at 4 users (1.00x, CI 0.98–1.02)." in md
    assert "| draft-k4 | off | 4 users | 0.70x (0.68–0.72) | loss (paired) |" in md
    html = (tmp_path / "out" / "report.html").read_text()
    assert 'id="speculation-speedup"' in html
    table, *sentences = speculation_study(exp)  # the console: a row per (configuration, load), then sentences
    assert table.row_count == 2 * 2
    assert [str(t).split(":")[0] for t in sentences] == [
        "draft-k2",
        "draft-k2",
        "draft-k2",
        "draft-k4",
        "draft-k4",
        "draft-k4",
    ]


def test_an_experiment_without_the_tags_has_no_speculation_study(rate_experiment, tmp_path):
    assert speculation_study(rate_experiment) == []
    md = write_report([rate_experiment], tmp_path / "out").markdown.read_text()
    assert "Speculation speedup" not in md


def test_tokenbench_report_prints_the_speedups(tmp_path):
    exp = _study(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "tokenbench", "report", str(exp), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "250"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "speculative decoding: speedup vs without it" in proc.stderr
    assert "draft-k4: TPOT p50 1.30x faster at 1 user" in proc.stderr
