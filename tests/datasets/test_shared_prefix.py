"""Shared-prefix synthetic prompts: groups by the seed, exact lengths (prefix extra to
--input-tokens), prefixes that differ from their first token, the expected reuse by hand, and
the flags' errors."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError
from words import WordTokenizer

from tokenbench.config import DatasetConfig
from tokenbench.datasets import build_requests
from tokenbench.datasets.shared_prefix import (
    SharedPrefixSpec,
    assign_groups,
    expected_reuse,
    shared_prefix_prompts,
)

SMOLLM = Path(__file__).resolve().parents[2] / ".cache/models/SmolLM2-135M-Instruct/tokenizer.json"


def test_groups_are_drawn_by_the_seed():
    assert assign_groups(50, 4, None, 7) == assign_groups(50, 4, None, 7)
    assert assign_groups(50, 4, None, 7) != assign_groups(50, 4, None, 8)
    assert set(assign_groups(200, 4, None, 0)) == {0, 1, 2, 3}
    # Zipf exponent 2: weights 1, 1/4, 1/9, 1/16 (share of group 0: 1 / 1.4236 = 0.70)
    counts = Counter(assign_groups(4000, 4, 2.0, 0))
    assert counts[0] > counts[1] > counts[2] > counts[3]
    assert counts[0] / 4000 == pytest.approx(1 / (1 + 1 / 4 + 1 / 9 + 1 / 16), abs=0.03)


def test_prompts_are_prefix_then_own_suffix_with_exact_lengths():
    """P = 12 prefix tokens + N = 5 of each request's own: 17, by a tokenizer with known answers;
    a group's requests share their first 12 tokens exactly, other groups differ from the first."""
    tok = WordTokenizer()
    spec = SharedPrefixSpec(groups=3, prefix_tokens=12, input_tokens=5)
    prompts = shared_prefix_prompts(20, spec, tok, seed=3)
    assert [p.group for p in prompts] == assign_groups(20, 3, None, 3)
    assert all(p.exact and tok.count(p.text) == 17 for p in prompts)
    words = [p.text.split() for p in prompts]
    prefix_of = {p.group: w[:12] for p, w in zip(prompts, words)}
    assert all(w[:12] == prefix_of[p.group] for p, w in zip(prompts, words))
    assert len({tuple(w) for w in words}) == 20  # suffixes of their own: no two prompts equal
    assert len({prefix[0] for prefix in prefix_of.values()}) == 3  # distinct first words
    assert shared_prefix_prompts(20, spec, tok, seed=3) == prompts  # deterministic


@pytest.mark.e2e  # needs make vllm-cpu's conversion of SmolLM2 (make test runs it first; make check does not)
def test_exact_with_a_bpe_tokenizer_and_different_first_tokens():
    """With SmolLM2's BPE tokenizer: 40 + 9 tokens exactly, and a prompt's first 40 token ids are
    its group's prefix (what a prefix cache matches), different across groups from the first id."""
    import tokenizers

    from tokenbench.datasets.tokenizers import HFTokenizer

    if not SMOLLM.is_file():
        pytest.fail(f"{SMOLLM} is missing: run make vllm-cpu (make test does)")
    raw = tokenizers.Tokenizer.from_file(str(SMOLLM))
    spec = SharedPrefixSpec(groups=5, prefix_tokens=40, input_tokens=9)
    prompts = shared_prefix_prompts(30, spec, HFTokenizer(SMOLLM), seed=1)
    ids = [raw.encode(p.text, add_special_tokens=False).ids for p in prompts]
    assert all(p.exact for p in prompts) and all(len(i) == 49 for i in ids)
    heads = {p.group: tuple(i[:40]) for p, i in zip(prompts, ids)}
    assert all(tuple(i[:40]) == heads[p.group] for p, i in zip(prompts, ids))
    assert len({h[0] for h in heads.values()}) == len(heads) == 5


def test_expected_reuse_by_hand():
    """Groups 0 1 0 0 2 1, P = 10, N = 5: requests 3, 4 and 6 find their group's prefix (first
    uses miss): 30 of 90 prompt tokens, 3 of 6 prefixes."""
    got = expected_reuse([0, 1, 0, 0, 2, 1], 10, 5)
    assert (got.num_tokens, got.num_tokens_reused, got.num_blocks, got.num_blocks_reused) == (90, 30, 6, 3)
    assert got.token_fraction == pytest.approx(1 / 3) and got.block_fraction == 0.5
    assert expected_reuse([], 10, 5).token_fraction is None


def test_build_requests_states_the_shared_prefix():
    cfg = DatasetConfig(input_tokens=5, output_tokens=3, num_prompts=8, prefix_groups=2, prefix_tokens=10)
    reqs, info = build_requests(cfg, WordTokenizer(), 4)
    assert info.exact_lengths and all(r.expected_prompt_tokens == 15 for r in reqs)
    assert all(WordTokenizer().count(r.prompt or "") == 15 for r in reqs)
    shared = info.shared_prefix
    assert shared is not None and (shared.groups, shared.tokens, shared.skew) == (2, 10, None)
    groups = assign_groups(8, 2, None, 4)
    assert shared.expected_reuse == expected_reuse(groups, 10, 5)
    assert shared.expected_reuse.num_tokens_reused == 10 * (8 - len(set(groups)))
    _, plain = build_requests(DatasetConfig(input_tokens=5, num_prompts=2), WordTokenizer(), 4)
    assert "shared_prefix" not in plain.model_fields_set  # other datasets keep their shape
    _, approx = build_requests(cfg, None, 4)
    assert not approx.exact_lengths


@pytest.mark.parametrize(
    "fields,needle",
    [
        ({"prefix_groups": 2}, "--prefix-groups and --prefix-tokens go together"),
        ({"prefix_tokens": 20}, "--prefix-groups and --prefix-tokens go together"),
        ({"prefix_skew": 1.1}, "--prefix-skew needs --prefix-groups"),
        ({"prefix_groups": 2, "prefix_tokens": 5, "prefix_skew": 0}, "greater than 0"),
        ({"prefix_groups": 0, "prefix_tokens": 5}, "greater than 0"),
        ({"prefix_groups": 2, "prefix_tokens": 5, "name": "jsonl", "path": "x.jsonl"}, "drop it with --dataset jsonl"),
        ({"prefix_groups": 2, "prefix_tokens": 5, "unique_prefix": True}, "--unique-prefix would break the shared"),
    ],
)
def test_flag_errors(fields, needle):
    with pytest.raises(ValidationError, match=needle):
        DatasetConfig(**fields)


def test_more_groups_than_first_words_is_an_error():
    with pytest.raises(ValueError, match="--prefix-groups 1000: at most"):
        build_requests(DatasetConfig(num_prompts=2, prefix_groups=1000, prefix_tokens=5), None, 0)
