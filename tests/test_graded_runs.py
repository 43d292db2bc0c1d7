"""Graded runs against the mock's answers by prompt (`tokenbench mock --answers`): a dataset of N
rows served the right reply for K of them grades K/N exactly, in the records, results.json (its
Wilson interval against scipy's), the console table, the report's section and history's export;
failed requests are not graded; the real GSM8K sample grades by its '#### N' answers; compare
tests accuracy as two proportions and the gate fails a drop beyond the limit and the test, and
passes one within the test."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console
from run_helpers import quiet, records_of
from scipy.stats import binomtest, chi2_contingency
from typer.testing import CliRunner

from tokenbench.cli import app
from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.results import SCHEMA_PATH, RunResults
from tokenbench.run import run

GSM8K = Path(__file__).resolve().parent / "fixtures" / "gsm8k" / "test.first20.jsonl"


def _files(tmp_path: Path, n: int, right: int, wrong: int = 0) -> tuple[Path, Path]:
    """A dataset of ``n`` rows ("question i", answer 3i) and answers: the right reply for the first
    ``right``, a wrong number for the next ``wrong``; the rest get the mock's usual words."""
    dataset, answers = tmp_path / f"data{n}_{right}.jsonl", tmp_path / f"answers{n}_{right}.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": f"question {i}", "answer": str(3 * i)}) + "\n" for i in range(n)))
    replies = [{"prompt": f"question {i}", "reply": f"Working... the answer is {3 * i}."} for i in range(right)]
    replies += [{"prompt": f"question {i}", "reply": "It is 999999."} for i in range(right, right + wrong)]
    answers.write_text("".join(json.dumps(r) + "\n" for r in replies))
    return dataset, answers


def _run(url: str, out: Path, dataset: Path, n: int, console: Console | None = None, grader: str | None = "numeric"):
    cfg = RunConfig(
        target=TargetConfig(url=url),
        loads=[UsersLoad(users=4)],
        stop=StopConfig(max_requests=n, drain_timeout_s=5),
        dataset=DatasetConfig(name="jsonl", path=dataset, output_tokens=8, num_prompts=n, grader=grader),
        live=False,
        out_dir=out,
    )
    return run(cfg, console or quiet())


def test_k_right_answers_of_n_grade_k_over_n(mock_server, tmp_path: Path) -> None:
    dataset, answers = _files(tmp_path, n=10, right=7, wrong=2)  # 7 right, 2 wrong numbers, 1 words
    url = mock_server(ttft_ms=1, itl_ms=1, answers=str(answers))
    text = io.StringIO()
    result = _run(url, tmp_path / "run", dataset, 10, Console(file=text, width=400))
    records = records_of(result.run_dir)
    assert len(records) == 10 and all(r["graded"] is True and r["grader"] == "numeric" for r in records)
    assert sum(r["correct"] for r in records) == 7
    assert "output_text" not in records[0]  # graded on arrival: no --keep-text needed
    read = {r["graded_answer"] for r in records if not r["correct"]}
    assert read == {"999999", None}  # the wrong number, and nothing read from the usual words
    a = result.results["points"][0]["accuracy"]
    ci = binomtest(7, 10).proportion_ci(confidence_level=0.95, method="wilson")
    assert (a["requests"], a["graded"], a["not_graded"], a["correct"], a["accuracy"]) == (10, 10, 0, 7, 0.7)
    assert (a["ci_low"], a["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert a["interval"] == "wilson 95%" and a["grader"] == "numeric"
    jsonschema.validate(result.results, json.loads(SCHEMA_PATH.read_text()))
    assert RunResults.from_json(result.results).to_json() == result.results
    shown = text.getvalue()  # the console table: the accuracy, its interval and counts
    assert "accuracy (%)" in shown and f"[{ci.low * 100:.1f}, {ci.high * 100:.1f}] (7/10, 0)" in shown
    from tokenbench.report.read.load import load_inputs
    from tokenbench.report.render.outline import build_outline
    from tokenbench.report.sections.charts import build_charts
    from tokenbench.report.sections.verdict import decide

    data = load_inputs([result.run_dir])
    verdict = decide(data)
    section = next(s for s in build_outline(data, verdict, build_charts(data, verdict)).sections if s.key == "accuracy")
    table = section.blocks[0].table
    assert table is not None and table.headers[2:5] == ["accuracy (%)", "Wilson 95% (%)", "correct/graded"]
    assert table.rows[0][2:6] == ["70.0", f"{ci.low * 100:.1f} – {ci.high * 100:.1f}", "7/10", "0"]
    from tokenbench.history.export import run_tables

    assert run_tables(result.run_dir)["points"][0]["accuracy_accuracy"] == 0.7


def test_failed_requests_are_not_graded(mock_server, tmp_path: Path) -> None:
    dataset, answers = _files(tmp_path, n=10, right=10)
    url = mock_server(ttft_ms=1, itl_ms=1, answers=str(answers), fault="http_500", fault_every=5)
    result = _run(url, tmp_path / "run", dataset, 10)
    a = result.results["points"][0]["accuracy"]
    assert (a["requests"], a["graded"], a["not_graded"], a["correct"], a["accuracy"]) == (10, 8, 2, 8, 1.0)
    failed = [r for r in records_of(result.run_dir) if r["outcome"] != "ok"]
    assert len(failed) == 2 and all(r["graded"] is False and r["correct"] is None for r in failed)


def test_a_plain_run_keeps_its_shape(mock_server, tmp_path: Path) -> None:
    dataset = tmp_path / "plain.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": f"q {i}"}) + "\n" for i in range(4)))
    result = _run(mock_server(ttft_ms=1, itl_ms=1), tmp_path / "run", dataset, 4, grader=None)
    assert "accuracy" not in result.results["points"][0]
    assert all(r["graded"] is None and r["grader"] is None for r in records_of(result.run_dir))


def test_the_real_gsm8k_sample_is_graded_numeric_by_its_answers(mock_server, tmp_path: Path) -> None:
    """GSM8K's first 20 test rows; the mock replies with the row's own worked answer (ending
    '#### N': its last number is N) for 15 of them and a wrong number for the other 5: 15/20."""
    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()]
    replies = [{"prompt": r["question"], "reply": r["answer"]} for r in rows[:15]]
    replies += [{"prompt": r["question"], "reply": "I think it is 1."} for r in rows[15:]]
    answers = tmp_path / "gsm8k_answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in replies))
    url = mock_server(ttft_ms=1, itl_ms=1, answers=str(answers))
    result = _run(url, tmp_path / "run", GSM8K, 20, grader=None)  # numeric by the '####' rows
    a = result.results["points"][0]["accuracy"]
    ci = binomtest(15, 20).proportion_ci(confidence_level=0.95, method="wilson")
    assert (a["grader"], a["graded"], a["correct"], a["accuracy"]) == ("numeric", 20, 15, 0.75)
    assert (a["ci_low"], a["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)


@pytest.fixture(scope="module")
def accuracy_runs(module_mock_server, tmp_path_factory) -> dict[str, Path]:
    """Three runs of the same 40 rows: all right (the baseline), 20 right (a drop of 50%,
    p ~ 1e-6) and 38 right (a drop of 5%: beyond a 2% limit, but p = 0.15 at 40 a side)."""
    out = {}
    for name, right in (("base", 40), ("halved", 20), ("slight", 38)):
        tmp = tmp_path_factory.mktemp(name)
        dataset, answers = _files(tmp, n=40, right=right)
        url = module_mock_server(ttft_ms=1, itl_ms=1, answers=str(answers))
        out[name] = _run(url, tmp / "run", dataset, 40).run_dir
    return out


def _compare(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["compare", *args], env={"COLUMNS": "400"})
    return result.exit_code, result.output


def test_the_gate_fails_a_drop_beyond_the_test_and_passes_one_within(accuracy_runs: dict[str, Path]) -> None:
    base, halved, slight = (str(accuracy_runs[k]) for k in ("base", "halved", "slight"))
    code, text = _compare(base, halved, "--fail-on", "accuracy:-2%")
    assert code == 1, text
    [line] = [ln for ln in text.splitlines() if ln.startswith("FAIL")]
    assert "100.0 -> 50.0 %" in line and "-50.0% beyond -2.0%" in line and "significant" in line
    assert "two-proportion z-test, 40/40 vs 20/40 correct/graded" in line
    code, text = _compare(base, slight, "--fail-on", "accuracy:-2%")
    assert code == 0, text
    [line] = [ln for ln in text.splitlines() if ln.startswith("pass")]
    assert "-5.0% beyond -2.0%" in line and "not significant (p=0.152" in line
    code, text = _compare(base, halved, "--fail-on", "accuracy:+2%")
    assert code == 2 and "write accuracy:-2%" in text


def test_compare_tests_accuracy_as_two_proportions(accuracy_runs: dict[str, Path]) -> None:
    from tokenbench.compare import PROPORTION_NOTE, comparison

    result = comparison([accuracy_runs["base"], accuracy_runs["halved"]])
    [row] = [r for r in result.rows if r.metric == "accuracy"]
    assert (row.baseline.mean, row.other.mean, row.delta) == (1.0, 0.5, -0.5)
    _, p, _, _ = chi2_contingency([[40, 0], [20, 20]], correction=False)  # the same test as the 2x2 table's
    assert row.p_value == pytest.approx(p, rel=1e-9) and p < 1e-5 and row.significant and row.better is False
    from tokenbench.compare import compare_markdown

    assert PROPORTION_NOTE in compare_markdown(result)
