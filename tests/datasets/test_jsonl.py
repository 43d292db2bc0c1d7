"""A JSONL file of prompts or messages; a bad line is an error that names the file and line."""

import pytest

from tokenbench.config import DatasetConfig
from tokenbench.datasets import build_requests


def test_jsonl_prompts_and_messages(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "hello there", "max_tokens": 5}\n\n{"messages": [{"role": "user", "content": "hi"}]}\n')
    reqs, _ = build_requests(DatasetConfig(name="jsonl", path=path, output_tokens=7), None, 0)
    assert {(r.prompt, r.max_tokens) for r in reqs if r.prompt} == {("hello there", 5)}
    assert [r.max_tokens for r in reqs if r.messages] == [7]


@pytest.mark.parametrize(
    "line,needle",
    [
        ("not json", "p.jsonl:2: not a JSON line"),
        ('{"text": "x"}', "p.jsonl:2: expected 'prompt'"),
        ('{"prompt": "x", "max_tokens": -1}', "p.jsonl:2: max_tokens must be a positive integer"),
    ],
)
def test_jsonl_errors_name_the_line(tmp_path, line, needle):
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "fine"}\n' + line + "\n")
    with pytest.raises(ValueError, match=needle.replace(".", r"\.")):
        build_requests(DatasetConfig(name="jsonl", path=path), None, 0)


def test_json_lines_skips_blanks_and_a_bom_and_names_the_bad_line(tmp_path):
    from tokenbench.datasets.jsonl import json_lines
    from tokenbench.datasets.traces import TraceError

    path = tmp_path / "rows.jsonl"
    path.write_text('\ufeff{"a": 1}\n\n[2]\n', encoding="utf-8")
    assert list(json_lines(path)) == [(1, {"a": 1}), (3, [2])]  # any JSON value: the caller checks its shape
    path.write_text('{"a": 1}\n{oops\n', encoding="utf-8")
    with pytest.raises(TraceError, match="rows.jsonl:2: not a JSON line"):
        list(json_lines(path, TraceError))
