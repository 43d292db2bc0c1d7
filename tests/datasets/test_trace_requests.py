"""--dataset trace: a trace's rows in the replay window as Requests in trace order (max_tokens =
the row's output length, each naming its row and trace time), and the trace's facts."""

import hashlib
import json

import pytest
from replay_helpers import BLOCK_SIZE, EXPECTED_REUSE, ROWS, replayed, write_trace
from words import WordTokenizer

from tokenbench.config import DatasetConfig
from tokenbench.datasets import build_requests
from tokenbench.datasets.trace_requests import TraceSelection


@pytest.fixture
def trace(tmp_path):
    return write_trace(tmp_path / "trace.jsonl")


def test_rows_become_requests_in_trace_order_with_the_rows_output_length(trace):
    got = replayed(TraceSelection(trace, block_size=BLOCK_SIZE), WordTokenizer())
    assert [r.trace_row for r in got.requests] == [1, 2, 3, 4]
    assert [r.trace_time_s for r in got.requests] == [t / 1e3 for t, *_ in ROWS]
    assert [r.max_tokens for r in got.requests] == [o for _, _, o, _ in ROWS]
    assert [r.expected_prompt_tokens for r in got.requests] == [i for _, i, _, _ in ROWS]
    assert got.exact_lengths  # the word tokenizer fits every block exactly
    # rows 1, 2 and 4 share their first two blocks: the same text
    first = got.requests[0].prompt
    assert got.requests[1].prompt.startswith(first) and got.requests[3].prompt.startswith(first)


def test_the_facts_name_the_file_its_hash_and_the_expected_reuse(trace):
    facts = replayed(TraceSelection(trace, block_size=BLOCK_SIZE)).facts
    assert facts.sha256 == hashlib.sha256(trace.read_bytes()).hexdigest()
    assert (facts.format, facts.num_rows, facts.num_rows_used, facts.block_size) == ("mooncake", 4, 4, BLOCK_SIZE)
    assert facts.expected_reuse is not None
    assert facts.expected_reuse.model_dump(include=set(EXPECTED_REUSE)) == EXPECTED_REUSE
    assert facts.expected_reuse.token_fraction == pytest.approx(40 / 85)


def test_the_window_selects_rows_and_the_reuse_counts_only_them(trace):
    got = replayed(TraceSelection(trace, block_size=BLOCK_SIZE, start_s=0.3, end_s=1.6))
    assert [r.trace_row for r in got.requests] == [2, 3]  # 0.4 and 1.0 s; 1.6 s is the open end
    assert got.facts.num_rows_used == 2 and got.facts.expected_reuse.num_blocks_reused == 0
    assert not got.exact_lengths  # no tokenizer: approximate, and said so
    with pytest.raises(ValueError, match="no trace rows in the replay window"):
        replayed(TraceSelection(trace, block_size=BLOCK_SIZE, start_s=5.0))


def test_build_requests_refuses_a_trace_and_other_datasets_keep_their_facts_shape(trace):
    with pytest.raises(ValueError, match="replayed row by row"):
        build_requests(DatasetConfig(name="trace", path=trace, block_size=BLOCK_SIZE), None, 0)
    _, synthetic = build_requests(DatasetConfig(num_prompts=2), None, 0)
    assert "trace" not in synthetic.model_dump(exclude_unset=True)  # results.json unchanged for them
    json.dumps(synthetic.model_dump(mode="json"))
    with pytest.raises(ValueError, match="--dataset trace needs --dataset-path"):
        DatasetConfig(name="trace")


def test_a_system_prompt_makes_each_row_a_chat_request(trace):
    got = replayed(TraceSelection(trace, block_size=BLOCK_SIZE, start_s=0.3), system="be brief")
    assert [r.trace_row for r in got.requests] == [2, 3, 4] and got.requests[0].messages[0]["content"] == "be brief"
    assert got.facts.num_rows_used == 3
