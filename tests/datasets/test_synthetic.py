"""Synthetic prompts: exactly the asked token count with a tokenizer, approximate without, seeded."""

from words import WordTokenizer

from tokenbench.config import DatasetConfig
from tokenbench.datasets import build_requests


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
