"""Trials -> aggregate rows (experiments/aggregate.py): only finished cells, one row per server,
variant and point, every metric of the catalogue's aggregates view as mean ± 95% CI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_synthetic import point, results, write_run

from tokenbench.experiments.aggregate import aggregate
from tokenbench.metrics.catalogue import shown_in
from tokenbench.results import CellRow, Experiment, ServerRow


def _experiment(tmp_path: Path, rates: dict[str, float | None]) -> Experiment:
    """One server, one cell per trial (status ok unless its rate is None: failed, no results)."""
    cells = {}
    for i, (cell_id, rate) in enumerate(rates.items(), start=1):
        if rate is not None:
            pts = [point(0, "users", 4, tokens_per_s=rate), point(1, "users", 8, tokens_per_s=2 * rate)]
            write_run(tmp_path / "cells" / cell_id, results(pts))
        status = "ok" if rate is not None else "failed"
        cells[cell_id] = CellRow(
            server="s", variant="default", trial=i, status=status, error=None, run_dir=f"cells/{cell_id}"
        )
    server = ServerRow(label="s", backend="vllm", swept={"max_num_seqs": 8}, status="ok", error=None)
    return Experiment(name="e", spec={}, servers=[server], cells=cells, aggregates=[])


def test_rows_per_point_over_the_finished_trials(tmp_path: Path) -> None:
    state = _experiment(tmp_path, {"t1": 100.0, "t2": 110.0, "t3": None})
    rows = aggregate(tmp_path, state)
    assert [(r.server, r.variant, r.point, r.label) for r in rows] == [
        ("s", "default", 0, "4 users"),
        ("s", "default", 1, "8 users"),
    ]
    first = rows[0]
    assert first.backend == "vllm" and first.swept == {"max_num_seqs": 8} and first.load.users == 4
    assert list(first.metrics) == [m.key for m in shown_in("aggregates")]
    tput = first.metrics["output_tokens_per_s"]
    assert tput.n == 2 and tput.values == [100.0, 110.0] and tput.mean == pytest.approx(105.0)
    assert tput.ci95 == pytest.approx(12.706205 * 5.0, rel=1e-5)  # t(0.975, 1) * s / √2, s = 5√2
    assert rows[1].metrics["output_tokens_per_s"].mean == pytest.approx(210.0)


def test_a_metric_no_trial_has_is_none_never_zero(tmp_path: Path) -> None:
    state = _experiment(tmp_path, {"t1": 100.0})
    [row, _] = aggregate(tmp_path, state)
    offered = row.metrics["offered_per_s"]  # closed loop: never offered a rate
    assert offered.mean is None and offered.n == 0
    assert row.metrics["output_tokens_per_s"].ci95 is None  # one trial: unknown, not 0


def test_the_rows_are_written_as_experiment_json_holds_them(tmp_path: Path) -> None:
    state = _experiment(tmp_path, {"t1": 100.0, "t2": 110.0})
    state.aggregates = aggregate(tmp_path, state)
    written = json.loads(json.dumps(state.to_json()))
    row = written["aggregates"][0]
    assert list(row) == ["server", "backend", "swept", "variant", "point", "label", "load", "metrics"]
    assert row["load"] == results([point(0, "users", 4)])["points"][0]["load"]  # as the cell wrote it
    assert row["metrics"]["output_tokens_per_s"]["values"] == [100.0, 110.0]
    assert Experiment.from_json(written).to_json() == written


def test_no_finished_cell_no_rows(tmp_path: Path) -> None:
    assert aggregate(tmp_path, _experiment(tmp_path, {"t1": None})) == []
