"""Graders (datasets/graders.py) and graded JSONL rows (datasets/jsonl.py): known answers for each
grader, GSM8K's '#### N' rows, a row's own grader, and bad input naming what to fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenbench.datasets.graders import grade, gsm8k_answer, last_number
from tokenbench.datasets.jsonl import load
from tokenbench.errors import BadInput
from tokenbench.records import Expected

GSM8K = Path(__file__).resolve().parents[1] / "fixtures" / "gsm8k" / "test.first20.jsonl"


@pytest.mark.parametrize(
    ("spec", "reply", "expected", "correct", "read"),
    [
        ("exact", "  Paris\n", "Paris", True, "Paris"),
        ("exact", "paris", "Paris", False, "paris"),
        ("normalised", "  PARIS!!  ", "paris", True, "paris"),
        ("normalised", "New   York.", "new york", True, "new york"),
        ("normalised", "Lyon", "Paris", False, "lyon"),
        ("regex:answer: (\\w+)", "I think... answer: Paris. Done", "Paris", True, "Paris"),
        ("regex:answer: (\\w+)", "no marker here", "Paris", False, None),
        ("regex:\\d+", "it is 42 apples", "42", True, "42"),  # no group: the whole match
        ("numeric", "3 + 4 = 7, so she has 1,234 eggs.", "1234", True, "1234"),  # the last number
        ("numeric", "first 18, then 19", "18", False, "19"),
        ("numeric", "$18.00", "18", True, "18.00"),
        ("numeric", "no number", "18", False, None),
        ("numeric:0.5", "about 3.4", "3", True, "3.4"),
        ("numeric:0.1", "about 3.4", "3", False, "3.4"),
        ("numeric", "it fell to -5", "-5", True, "-5"),
        ("json:answer", '{"answer": "Paris", "why": "capital"}', "Paris", True, "Paris"),
        ("json:result.value", 'Here: {"result": {"value": 42}} ok', "42", True, "42"),  # the outermost {...}
        ("json:items.1", '{"items": ["a", "b"]}', "b", True, "b"),
        ("json:answer", "not json", "Paris", False, None),
        ("json:answer", '{"other": 1}', "Paris", False, None),
        ("choice", "The answer is (C) because...", "C", True, "C"),
        ("choice", "Let me see. B", "b", True, "B"),
        ("choice", "Answer: D", "D", True, "D"),
        ("choice", "I cannot tell", "A", False, None),
        ("choice", "Option E is wrong, the answer is B", "B", True, "B"),  # 'answer is X' first
    ],
)
def test_each_grader_known_answers(spec: str, reply: str, expected: str, correct: bool, read: str | None) -> None:
    assert grade(spec, reply, expected) == (correct, read)


def test_gsm8k_extraction() -> None:
    assert gsm8k_answer("She makes 9 * 2 = $<<9*2=18>>18.\n#### 18") == "18"
    assert gsm8k_answer("#### 70,000") == "70000"
    assert gsm8k_answer("no mark") is None
    assert last_number("1,000 then 2,500.5 end") == "2500.5"


@pytest.mark.parametrize(
    ("spec", "says"),
    [("fuzzy", "a grader is one of exact, normalised"), ("regex:(", "does not compile"), ("numeric:-1", ">= 0")],
)
def test_a_bad_grader_is_bad_input_naming_it(tmp_path: Path, spec: str, says: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"prompt": "p", "answer": "a"}) + "\n")
    with pytest.raises(BadInput, match="--grader") as info:
        load(path, spec)
    assert says in str(info.value)


def test_graded_rows_carry_their_answer_and_grader(tmp_path: Path) -> None:
    rows = [
        {"prompt": "capital of France?", "answer": "Paris"},  # --grader's
        {"prompt": "2+2?", "expected": 4},  # a number: as text
        {"prompt": "pick", "answer": "B", "grader": "choice"},  # its own
        {"question": "GSM-style?", "answer": "work...\n#### 1,234"},  # question: the prompt; '####': numeric
        {"prompt": "not graded"},
        {"messages": [{"role": "user", "content": "hi"}], "answer": "hello"},
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    requests = load(path, "normalised")
    assert [r.expected for r in requests] == [
        Expected("Paris", "normalised"),
        Expected("4", "normalised"),
        Expected("B", "choice"),
        Expected("1234", "normalised"),  # --grader names the run's grader, over the '####' default
        None,
        Expected("hello", "normalised"),
    ]
    assert requests[3].prompt == "GSM-style?"
    defaults = load(path)  # without --grader: exact, and numeric for a '####' answer
    assert [r.expected.grader if r.expected else None for r in defaults] == [
        "exact",
        "exact",
        "choice",
        "numeric",
        None,
        "exact",
    ]


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ({"prompt": "p", "answer": ["a"]}, "'answer' must be a string or a number"),
        ({"prompt": "p", "answer": "a", "grader": "nope"}, ":1: grader 'nope'"),
        ({"prompt": "p", "grader": "exact"}, "a 'grader' without an expected answer"),
        ({"answer": "a"}, "expected 'prompt' or 'question'"),
    ],
)
def test_bad_graded_rows_name_the_line(tmp_path: Path, row: dict, says: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(BadInput) as info:
        load(path)
    assert f"{path}:1" in str(info.value) and says in str(info.value)


def test_the_real_gsm8k_sample_reads_as_graded_numeric_rows() -> None:
    requests = load(GSM8K)
    assert len(requests) == 20
    assert [r.expected.answer for r in requests if r.expected] == (
        "18 3 70000 540 20 64 260 160 45 460 366 694 13 18 60 125 230 57500 7 6".split()
    )
    assert {r.expected.grader for r in requests if r.expected} == {"numeric"}
    assert requests[0].prompt is not None and requests[0].prompt.startswith("Janet\u2019s ducks lay 16 eggs per day.")
