"""databricks-dolly-15k: the prompt is the context then the instruction, filtered by length."""

import json

from words import WordTokenizer

from tokenbench.config import DatasetConfig
from tokenbench.datasets import build_requests


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
