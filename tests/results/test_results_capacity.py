"""capacity.json as types (results/capacity.py): the committed schema is the types' (``python -m
tokenbench.results`` rewrites it); an objective and its check read as the console shows them."""

from __future__ import annotations

import json

from tokenbench.results import SCHEMA_PATH
from tokenbench.results.capacity import Objective, ObjectiveCheck, capacity_schema, show_seconds


def test_the_committed_capacity_schema_is_current():
    committed = json.loads((SCHEMA_PATH.parent / "capacity.schema.json").read_text())
    assert committed == capacity_schema(), "stale: run python -m tokenbench.results and commit schemas/"


def test_a_limit_is_shown_in_ms_under_a_second_else_seconds():
    assert show_seconds(0.5) == "500 ms"
    assert show_seconds(0.0125) == "12.5 ms"
    assert show_seconds(1) == "1 s"
    assert show_seconds(2.25) == "2.25 s"


def test_an_objective_reads_as_it_was_written():
    assert Objective(name="ttft", stat="p90", limit=0.5).label() == "ttft p90 ≤ 500 ms"
    assert Objective(name="e2e", stat="mean", limit=4).label() == "e2e mean ≤ 4 s"
    assert Objective(name="errors", stat="fraction", limit=0.01).label() == "errors ≤ 1%"


def test_a_check_shows_what_was_measured():
    def check(name, stat, measured):
        return ObjectiveCheck(name=name, stat=stat, limit=1, measured=measured, margin=None, passed=False)

    assert check("ttft", "p90", 0.8312).shown() == "ttft p90 0.831 s"
    assert check("errors", "fraction", 0.04).shown() == "errors 4%"
    assert check("tpot", "p99", None).shown() == "tpot p99 not measured"
