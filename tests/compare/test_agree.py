"""`tokenbench agree A B`: two runs against the mock that sent the same prompts, one scripted to
change a share of its answers from output token N on: the pairs, the changed ones and where they
diverge are the script's."""

from __future__ import annotations

import json

import pytest
from run_helpers import config, quiet
from typer.testing import CliRunner

from tokenbench.cli import app
from tokenbench.compare.agreement import agreement_of
from tokenbench.config import DatasetConfig, StopConfig, UsersLoad
from tokenbench.mock.divergence import prompt_diverges
from tokenbench.run import run
from tokenbench.rundir import read_records

SHARE, AT, PROMPTS = 0.3, 3, 20


def _run(url: str, out, keep_text: bool = True):
    c = config(url, out, [UsersLoad(users=1)], StopConfig(max_requests=PROMPTS), keep_text=keep_text)
    c = c.model_copy(update={"dataset": DatasetConfig(input_tokens=8, output_tokens=6, num_prompts=PROMPTS)})
    return run(c, console=quiet()).run_dir


@pytest.fixture
def paired_runs(mock_server, tmp_path):
    usual = _run(mock_server(ttft_ms=0, itl_ms=0), tmp_path / "a")
    changed = _run(mock_server(ttft_ms=0, itl_ms=0, diverge_share=SHARE, diverge_at=AT), tmp_path / "b")
    return usual, changed


def test_the_changed_answers_and_where_they_diverge_are_the_scripts(paired_runs):
    a, b = paired_runs
    picked = {r.prompt_hash for r in read_records(b) if prompt_diverges(r.prompt_hash or "", SHARE)}
    (point,) = agreement_of(a, b).points
    assert point.pairs == PROMPTS and (point.unpaired_a, point.unpaired_b) == (0, 0)
    assert 0 < len(picked) < PROMPTS  # the hash picks a share of these 20 prompts
    assert point.changed == len(picked)
    assert {p.prompt_hash for p in point.requests if not p.identical} == picked
    assert {p.first_diff_word for p in point.requests if not p.identical} == {AT}
    assert {p.rest_similarity for p in point.requests if not p.identical} == {0.0}  # "ho" after, "hi" before
    assert point.share_identical == pytest.approx((PROMPTS - len(picked)) / PROMPTS)
    low, high = point.share_ci95
    assert low < point.share_identical < high


def test_agree_prints_the_table_and_writes_the_json(paired_runs, tmp_path):
    a, b = paired_runs
    out = tmp_path / "paired.json"
    result = CliRunner().invoke(app, ["agree", str(a), str(b), "--out", str(out)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "paired outputs" in result.output and "share identical" in result.output
    data = json.loads(out.read_text())
    assert data["points"][0]["pairs"] == PROMPTS and len(data["points"][0]["requests"]) == PROMPTS


def test_runs_without_kept_text_are_refused_naming_the_flag(mock_server, tmp_path):
    url = mock_server(ttft_ms=0, itl_ms=0)
    a, b = _run(url, tmp_path / "a", keep_text=False), _run(url, tmp_path / "b")
    result = CliRunner().invoke(app, ["agree", str(a), str(b)], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and "--keep-text" in result.output


def test_the_report_of_the_first_run_shows_its_paired_outputs(paired_runs):
    from tokenbench.report import write_report

    a, b = paired_runs
    assert CliRunner().invoke(app, ["agree", str(a), str(b)]).exit_code == 0
    files = write_report([a], a)
    md = files.markdown.read_text()
    assert "Paired outputs" in md and f"{a} vs {b}" in md
