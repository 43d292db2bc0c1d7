"""Prompts from a trace's hash ids (the same id the same text, partial last blocks, exact lengths)
and the workload's expected reuse."""

import pytest
from words import WordTokenizer

from tokenbench.datasets.trace_prompts import (
    BLOCK_SEPARATOR,
    BlockPrompts,
    block_prompts,
    block_sizes,
    expected_reuse,
)
from tokenbench.datasets.traces import TraceRow

# --- prompts from hash ids -----------------------------------------------------------------------

WORDS = WordTokenizer()


def test_block_sizes_end_with_the_partial_block():
    assert block_sizes(1100, 3, 512) == [512, 512, 76]
    assert block_sizes(1024, 2, 512) == [512, 512]
    assert block_sizes(0, 0, 16) == []
    with pytest.raises(ValueError, match="row 7: 2 hash_ids for input_length 10"):
        block_sizes(10, 2, 16, row=7)


def test_same_id_same_text_other_ids_other_text_and_the_partial_block_is_a_prefix():
    prompts = BlockPrompts(16, WORDS)
    a = prompts.block(1, 16)
    assert a == BlockPrompts(16, WORDS).block(1, 16)  # seeded by the id, not by an instance or call order
    assert a.startswith(BLOCK_SEPARATOR) and WORDS.count(a) == 16
    # siblings: rows [1, 2] and [1, 3] share block 1, then differ
    assert prompts.block(2, 16) != prompts.block(3, 16)
    assert a.startswith(prompts.block(1, 5)) and WORDS.count(prompts.block(1, 5)) == 5
    assert BlockPrompts(16, WORDS, seed=1).block(1, 16) != a


def test_rows_sharing_hash_ids_share_exactly_that_prefix():
    rows = [TraceRow(1, 0, 40, 1, (1, 2, 3)), TraceRow(2, 1, 35, 1, (1, 2, 4)), TraceRow(3, 2, 20, 1, (5, 6))]
    p = block_prompts(rows, 16, WORDS)
    assert [x.num_tokens for x in p] == [40, 35, 20] and all(x.exact for x in p)
    words = [x.text.split() for x in p]
    assert words[0][:32] == words[1][:32] and words[0][32:35] != words[1][32:35]
    assert words[0][:4] != words[2][:4]
    # the same rows again, in another order: the same texts
    assert [x.text for x in block_prompts(rows[::-1], 16, WORDS)] == [x.text for x in p][::-1]


def test_blocks_do_not_merge_and_position_does_not_change_a_block():
    p = BlockPrompts(4, WORDS)
    first = p.prompt(TraceRow(1, 0, 8, 1, (10, 20))).text
    later = p.prompt(TraceRow(2, 0, 12, 1, (30, 10, 20))).text
    assert first.split(BLOCK_SEPARATOR)[1:] == later.split(BLOCK_SEPARATOR)[2:]


def test_rows_without_hash_ids_get_text_of_their_own_length():
    rows = [TraceRow(2, 0, 37, 1), TraceRow(3, 0, 37, 1), TraceRow(4, 0, 0, 1)]
    p = block_prompts(rows, 16, WORDS)
    assert [x.num_tokens for x in p] == [37, 37, 0] and all(x.exact for x in p)
    assert p[0].text != p[1].text


def test_without_a_tokenizer_lengths_are_approximate_and_flagged():
    p = block_prompts([TraceRow(1, 0, 20, 1, (1, 2))], 16, None)[0]
    assert not p.exact and p.num_tokens is None
    assert len(p.text.split()) == 18  # a word per token, the separator counted as one per block


class _NewlineTokenizer:
    """A word per token and the separator one more, as in BPE vocabularies."""

    name = "newline"

    def count(self, text: str) -> int:
        return text.count("\n") + len(text.split())


def test_a_separator_that_is_a_token_is_fitted_in_each_block():
    tok = _NewlineTokenizer()
    p = block_prompts([TraceRow(1, 0, 21, 1, (1, 2))], 16, tok)[0]
    assert p.exact and tok.count(p.text) == 21 and len(p.text.split()) == 19


# --- expected reuse ------------------------------------------------------------------------------


def test_expected_reuse_counts_blocks_seen_in_earlier_rows_as_a_prefix():
    rows = [
        TraceRow(1, 0, 40, 1, (1, 2, 3)),  # all new: 3 blocks, 40 tokens
        TraceRow(2, 1, 40, 1, (1, 2, 4)),  # 1, 2 reused: 32 tokens
        TraceRow(3, 2, 36, 1, (1, 2, 3)),  # all reused: 16 + 16 + 4 (a partial block of a seen id)
        TraceRow(4, 3, 20, 1, (9, 2)),  # 2 was seen but follows a miss: a prefix cache cannot use it
        TraceRow(5, 4, 10, 1),  # no hash ids: 10 new tokens, no blocks
    ]
    reuse = expected_reuse(rows, 16)
    assert (reuse.num_blocks, reuse.num_blocks_reused) == (11, 5)
    assert (reuse.num_tokens, reuse.num_tokens_reused) == (146, 68)
    assert reuse.token_fraction == pytest.approx(68 / 146) and reuse.block_fraction == pytest.approx(5 / 11)
    # over the rows used only
    assert expected_reuse(rows[:1], 16).token_fraction == 0.0
    assert expected_reuse(rows[2:3], 16).num_tokens_reused == 0


def test_no_rows_means_no_reuse_figure():
    reuse = expected_reuse([], 512)
    assert reuse.token_fraction is None and reuse.block_fraction is None
    assert expected_reuse([TraceRow(1, 0, 5, 1)], 512).block_fraction is None


class _Counting(WordTokenizer):
    """Counts the texts it is asked to count, and how long each was (in words)."""

    def __init__(self, merge_across_blocks: bool = False) -> None:
        self.sizes: list[int] = []
        self.merge = merge_across_blocks

    def count(self, text: str) -> int:
        n = len(text.split())
        self.sizes.append(n)
        return n - text.count(BLOCK_SEPARATOR) + 1 if self.merge and text.count(BLOCK_SEPARATOR) > 1 else n


def _rows(n):
    return [TraceRow(i, float(i), 20, 1, (2 * i, 2 * i + 1)) for i in range(1, n + 1)]


def test_whole_prompts_are_counted_until_the_joins_held_then_trusted():
    from tokenbench.datasets.trace_prompts import JOINS_CHECKED

    tok = _Counting()
    prompts = BlockPrompts(10, tok).prompt
    got = [prompts(row) for row in _rows(JOINS_CHECKED + 5)]
    assert all(p.exact and p.num_tokens == 20 for p in got)
    assert tok.sizes.count(20) == JOINS_CHECKED  # whole prompts: the first ones only; blocks are 10 words


def test_a_tokenizer_that_merges_across_blocks_is_checked_on_every_row():
    tok = _Counting(merge_across_blocks=True)
    prompts = BlockPrompts(10, tok).prompt
    got = [prompts(row) for row in _rows(30)]
    assert not any(p.exact for p in got) and all(p.num_tokens == 19 for p in got)
    assert tok.sizes.count(20) == 30
