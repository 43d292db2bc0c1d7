"""A run directory as the report reads it (report/run_dir.py): one row per point with its load as
one number, the dataset as a line of text, the SLO and each point's span, with known answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_synthetic import point, results, write_run

from tokenbench.report.read.run_dir import dataset_text, facts_text, load_value, read_run
from tokenbench.results import DatasetFacts, RunResults
from tokenbench.rundir.read import StaleLayoutError


def test_dataset_text_names_only_what_was_not_the_default():
    assert dataset_text("sharegpt", "f.json", True, True, False) == (
        "sharegpt, from f.json, with system prompt, unique prefixes, approximate lengths"
    )
    assert dataset_text(None, None, False, False, None) == "?"  # exact_lengths unknown: not "approximate"
    assert dataset_text("synthetic", None, False, False, True) == "synthetic"


def test_facts_text_is_a_dash_without_facts():
    assert facts_text(None) == "–"
    facts = DatasetFacts(
        name="dolly", num_requests=4, exact_lengths=True, tokenizer=None, system_prompt=False,
        unique_prefix=True, source=None,
    )  # fmt: skip
    assert facts_text(facts) == "dolly, unique prefixes"


def test_a_run_is_one_row_per_point_its_load_one_number(tmp_path: Path):
    points = [point(0, "users", 4, ramp_s=2.0), point(1, "rate", 2.5, start_s=30.0)]
    run = write_run(tmp_path / "run-a", results(points, slo={"ttft_s": 0.5, "tpot_s": None, "e2e_s": None}))
    loaded = RunResults.from_json(json.loads((run / "results.json").read_text()))
    assert [load_value(p.load) for p in loaded.points] == [4.0, 2.5]
    part = read_run(run)
    assert part.name == "run-a" and part.configs() == ["vllm"]
    assert [(r.point, r.label, r.load_kind, r.load_value, r.num_trials) for r in part.rows] == [
        (0, "4 users", "users", 4.0, 1),
        (1, "2.5 req/s", "rate", 2.5, 1),
    ]
    assert part.rows[0].outcomes == {"ok": 20}
    assert part.slos[0]["ttft_s"] == 0.5 and part.slos[0]["tpot_s"] is None
    (series,) = part.series
    first, second = series.points
    assert (first.start_s, first.ramp_end_s, first.measure_start_s, first.load_end_s) == (0.0, 2.0, 2.0, 22.0)
    assert (second.start_s, second.load_end_s, second.end_s) == (30.0, 50.0, 55.0)
    assert part.turns == [] and part.capacities == []  # not multi-turn, not a capacity search


def test_a_results_json_of_another_layout_says_to_recompute(tmp_path: Path):
    data = results([point(0, "users", 1)])
    del data["points"][0]["label"]
    run = write_run(tmp_path / "old", data)
    with pytest.raises(StaleLayoutError, match="tokenbench recompute"):
        read_run(run)
