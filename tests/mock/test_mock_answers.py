"""The mock's answers by prompt (mock/answers.py): which text a request is looked up by on each
API, the file's bad lines, and a completions run graded by them (the chat run: test_graded_runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenbench.errors import BadInput
from tokenbench.mock.answers import answer_for, load_answers, prompt_text


def test_the_prompt_text_of_each_api() -> None:
    chat = {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "q2"},
        ]
    }
    assert prompt_text(chat) == "q2"  # the last user message
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "image_url"}]}]}
    assert prompt_text(parts) == "q"
    assert prompt_text({"prompt": "p"}) == "p"
    assert prompt_text({"input": "r"}) == "r"
    assert prompt_text({"input": [{"role": "user", "content": [{"type": "input_text", "text": "r2"}]}]}) == "r2"
    assert prompt_text({"prompt": ["a", "b"]}) is None
    answers = {"q2": "A", "p": "B"}
    assert answer_for(answers, chat) == "A" and answer_for(answers, {"prompt": "other"}) is None


def test_a_later_row_wins_and_bad_lines_name_themselves(tmp_path: Path) -> None:
    good = tmp_path / "a.jsonl"
    good.write_text('{"prompt": "p", "reply": "1"}\n\n{"prompt": "p", "reply": "2"}\n')
    assert load_answers(good) == {"p": "2"}
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"prompt": "p", "reply": "1"}\n{"prompt": "p"}\n')
    with pytest.raises(BadInput, match=r"--answers .*b.jsonl:2: expected"):
        load_answers(bad)
    with pytest.raises(BadInput, match="no such file"):
        load_answers(tmp_path / "missing.jsonl")


def test_a_completions_run_is_graded_by_the_answers(mock_server, tmp_path: Path) -> None:
    from run_helpers import quiet, records_of

    from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
    from tokenbench.run import run

    dataset, answers = tmp_path / "d.jsonl", tmp_path / "a.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": f"pick {i}", "answer": "BCDE"[i]}) + "\n" for i in range(4)))
    answers.write_text(
        "".join(json.dumps({"prompt": f"pick {i}", "reply": f"The answer is {'BCDA'[i]}."}) + "\n" for i in range(4))
    )
    cfg = RunConfig(
        target=TargetConfig(url=mock_server(ttft_ms=1, itl_ms=1, answers=str(answers)), api="completions"),
        loads=[UsersLoad(users=2)],
        stop=StopConfig(max_requests=4, drain_timeout_s=5),
        dataset=DatasetConfig(name="jsonl", path=dataset, output_tokens=6, num_prompts=4, grader="choice"),
        live=False,
        out_dir=tmp_path / "run",
    )
    result = run(cfg, quiet())
    assert sorted(r["graded_answer"] for r in records_of(result.run_dir)) == ["A", "B", "C", "D"]
    assert result.results["points"][0]["accuracy"]["correct"] == 3  # pick 3: A, expected E
