"""An experiment directory as the report reads it (report/experiment_dir.py): one row per
(server, variant, point) with the trials' mean and CI, one timeline per cell, the header from
experiment.json; known answers from the synthetic rate sweep (report_synthetic.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenbench.report.read.experiment_dir import read_experiment_dir


def test_rows_are_the_trials_mean_per_server_and_point(rate_experiment: Path) -> None:
    part = read_experiment_dir(rate_experiment)
    assert part.name == "rate-sweep"
    assert part.configs() == ["vllm_max_num_seqs=16", "vllm_max_num_seqs=64", "sglang"]
    assert len(part.rows) == 3 * 4  # servers x rates
    first = part.rows[0]
    assert (first.config, first.backend, first.swept, first.variant) == (
        "vllm_max_num_seqs=16", "vllm", {"max_num_seqs": 16}, "default",
    )  # fmt: skip
    assert (first.point, first.label, first.load_kind, first.load_value) == (0, "1 req/s", "rate", 1.0)
    assert first.num_trials == 3 and first.outcomes == {"ok": 120}  # 3 trials' outcomes summed
    tokens = first.metrics["output_tokens_per_s"]
    assert tokens.values == pytest.approx([118.8, 120.0, 121.2]) and tokens.mean == pytest.approx(120.0)
    assert tokens.n == 3 and tokens.ci95 is not None


def test_one_timeline_per_cell_and_the_header(rate_experiment: Path) -> None:
    part = read_experiment_dir(rate_experiment)
    assert len(part.series) == 9  # 3 servers x 3 trials
    assert [(s.title, s.trial) for s in part.series[:2]] == [
        ("vllm_max_num_seqs=16 · trial 1", 1),
        ("vllm_max_num_seqs=16 · trial 2", 2),
    ]
    (header,) = part.experiments
    assert (header.name, header.complete, header.trials) == ("rate-sweep", True, 3)
    assert header.load == "rates 1, 2, 4, 8 req/s" and header.dataset == "synthetic, unique prefixes"
    assert [s.backend for s in header.servers] == ["vllm", "vllm", "sglang"]
    assert len(header.cells) == 9 and all(c.status == "ok" for c in header.cells)
    assert part.slos == [{"ttft_s": 0.5, "tpot_s": 0.05, "e2e_s": None}]
