"""Token-id prompts from a trace's hash ids (trace_prompts.BlockIds): the same id the same ids,
siblings differ, the last block partial and a prefix of its full block, exactly input_tokens ids;
and a replay sending them only where the server takes ids."""

import json

from replay_helpers import replayed
from words import WordIdTokenizer, WordTokenizer

from tokenbench.datasets.trace_prompts import BlockIds
from tokenbench.datasets.trace_requests import TraceSelection
from tokenbench.datasets.traces import TraceRow

TOK = WordIdTokenizer()
VOCAB = BlockIds.vocabulary(TOK)


def _row(row, n, hash_ids):
    return TraceRow(row=row, timestamp_s=0.0, input_tokens=n, output_tokens=4, hash_ids=tuple(hash_ids))


def test_the_vocabulary_is_the_tokenizers_ids_of_one_token_words():
    assert VOCAB is not None and len(VOCAB) >= 16
    assert all(TOK.ids(" " + word) == [i] for i, word in VOCAB)
    assert BlockIds.vocabulary(_SameId()) is None  # one distinct id: prompts stay text


class _SameId(WordTokenizer):
    def ids(self, text):
        return [0] * len(text.split())


def test_rows_share_exactly_their_shared_blocks_and_the_last_block_is_partial():
    assert VOCAB is not None
    prompts = BlockIds(4, VOCAB)
    a, b, c = (prompts.prompt(_row(1, 10, [1, 2, 3])), prompts.prompt(_row(2, 12, [1, 2, 4])),
               prompts.prompt(_row(3, 6, [1, 5])))  # fmt: skip
    assert (len(a.ids), len(b.ids), len(c.ids)) == (10, 12, 6)  # exactly input_tokens
    assert a.ids[:8] == b.ids[:8]  # blocks 1 and 2 shared
    assert a.ids[8:10] != b.ids[8:10]  # blocks 3 and 4: siblings after a shared parent differ
    assert c.ids[:4] == a.ids[:4] and c.ids[4:6] != a.ids[4:6]
    # the same id in another instance (and after other draws) gives the same ids; a partial block
    # is the prefix of its full one
    again = BlockIds(4, VOCAB).prompt(_row(9, 7, [1, 3]))
    assert again.ids[:4] == a.ids[:4] and again.ids[4:7] == prompts.prompt(_row(8, 8, [1, 3])).ids[4:7]
    assert BlockIds(4, VOCAB, seed=1).prompt(_row(1, 10, [1, 2, 3])).ids != a.ids
    assert a.text.split() == [dict(VOCAB)[i] for i in a.ids]  # the text is the same tokens as words


def _trace(tmp_path):
    path = tmp_path / "t.jsonl"
    rows = [
        {"timestamp": 0, "input_length": 6, "output_length": 2, "hash_ids": [1, 2]},
        {"timestamp": 10, "input_length": 7, "output_length": 2, "hash_ids": [1, 3]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return TraceSelection(path, "mooncake", block_size=4)


def test_trace_requests_send_ids_where_the_server_takes_them(tmp_path):
    got = replayed(_trace(tmp_path), WordIdTokenizer(), token_ids=True)
    first, second = got.requests
    assert first.prompt_token_ids is not None and second.prompt_token_ids is not None
    assert (len(first.prompt_token_ids), len(second.prompt_token_ids)) == (6, 7)
    assert first.prompt_token_ids[:4] == second.prompt_token_ids[:4]
    assert (first.expected_prompt_tokens, got.exact_lengths, got.facts.token_ids) == (6, True, True)


def test_text_where_the_server_takes_no_ids_or_a_system_prompt_makes_it_chat(tmp_path):
    for tokenizer, system, ids in ((WordIdTokenizer(), None, False), (WordIdTokenizer(), "sys", True),
                                   (WordTokenizer(), None, True)):  # fmt: skip
        got = replayed(_trace(tmp_path), tokenizer, system, token_ids=ids)
        assert all(r.prompt_token_ids is None for r in got.requests) and got.facts.token_ids is False
