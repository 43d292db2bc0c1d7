"""Multi-turn conversations: every user turn of ShareGPT and JSONL, synthetic turns of exact length,
the dataset's reply length as each turn's max_tokens, and file:line for a malformed JSONL line."""

import json

import pytest
from words import WordTokenizer

from tokenbench.config import DatasetConfig, SessionConfig
from tokenbench.datasets.sessions import build_conversations
from tokenbench.errors import BadInput


def _sharegpt(tmp_path):
    convs = [
        {
            "id": "a",
            "conversations": [
                {"from": "human", "value": "first question here"},
                {"from": "gpt", "value": "one two three four five"},
                {"from": "human", "value": "second question"},
                {"from": "gpt", "value": "six seven"},
                {"from": "human", "value": "third and last question now"},
            ],
        },
        {"id": "empty", "conversations": [{"from": "gpt", "value": "a reply with no question"}]},
    ]
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(convs))
    return path


def test_sharegpt_every_human_turn_with_its_reply_length(tmp_path):
    cfg = DatasetConfig(name="sharegpt", path=_sharegpt(tmp_path), system_prompt="be brief")
    convs, facts = build_conversations(cfg, SessionConfig(), WordTokenizer(), 0)
    assert len(convs) == 1  # the conversation without a human turn is skipped
    (conv,) = convs
    assert [(t.text, t.tokens, t.max_tokens) for t in conv.turns] == [
        ("first question here", 3, 5),
        ("second question", 2, 2),
        ("third and last question now", 5, 128),  # no reply after it: the synthetic default
    ]
    assert (conv.system, conv.system_tokens) == ("be brief", 2)
    assert facts.sessions is not None and (facts.sessions.conversations, facts.sessions.turns) == (1, 3)
    assert facts.sessions.history_tokens == "tokenizer" and facts.exact_lengths
    assert facts.sharegpt_sampling is None  # turn by turn: no single-prompt sampling drew them


@pytest.mark.parametrize("sampling", ["vllm", "sglang"])
def test_a_peers_single_prompt_sampling_is_refused_for_conversations(tmp_path, sampling):
    cfg = DatasetConfig(name="sharegpt", path=_sharegpt(tmp_path), sharegpt_sampling=sampling)
    with pytest.raises(BadInput, match=f"--sharegpt-sampling {sampling} draws single prompts"):
        build_conversations(cfg, SessionConfig(), WordTokenizer(), 0)


def test_output_tokens_fixes_every_turns_reply_length(tmp_path):
    cfg = DatasetConfig(name="sharegpt", path=_sharegpt(tmp_path), output_tokens=7)
    (conv,), _ = build_conversations(cfg, SessionConfig(), WordTokenizer(), 0)
    assert [t.max_tokens for t in conv.turns] == [7, 7, 7]


def test_jsonl_conversations_with_their_own_system_message(tmp_path):
    path = tmp_path / "convs.jsonl"
    lines = [
        {
            "messages": [
                {"role": "system", "content": "sys words"},
                {"role": "user", "content": "hello there"},
                {"role": "assistant", "content": "a b c"},
                {"role": "user", "content": "and then"},
                {"role": "assistant", "content": "d"},
            ]
        },
        {"messages": [{"role": "user", "content": "just one"}]},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    convs, facts = build_conversations(DatasetConfig(name="jsonl", path=path, num_prompts=10), SessionConfig(), None, 0)
    by_first = {c.turns[0].text: c for c in convs}
    two = by_first["hello there"]
    assert [(t.text, t.max_tokens) for t in two.turns] == [("hello there", 4), ("and then", 1)]  # ~1.3/word
    assert two.system == "sys words"
    assert [t.text for t in by_first["just one"].turns] == ["just one"]
    assert facts.sessions is not None and facts.sessions.history_tokens == "estimate" and not facts.exact_lengths


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "not a JSON line"),
        ('{"prompt": "single"}', "expected"),
        ('{"messages": [{"role": "assistant", "content": "no user"}]}', "at least one user message"),
        ('{"messages": [{"role": "user"}]}', "expected"),
    ],
)
def test_a_malformed_jsonl_line_is_an_error_naming_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "fine"}]}) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=f"{path}:2: .*{message}"):
        build_conversations(DatasetConfig(name="jsonl", path=path), SessionConfig(), None, 0)


def test_synthetic_turns_of_exact_length(tmp_path):
    cfg = DatasetConfig(input_tokens=6, output_tokens=9, num_prompts=3)
    convs, facts = build_conversations(cfg, SessionConfig(turns=4), WordTokenizer(), 1)
    assert len(convs) == 3 and all(len(c.turns) == 4 for c in convs)
    assert {(t.tokens, len(t.text.split()), t.max_tokens) for c in convs for t in c.turns} == {(6, 6, 9)}
    assert len({t.text for c in convs for t in c.turns}) == 12  # every turn its own text
    assert facts.num_requests == 12
    with pytest.raises(ValueError, match="--turns N"):
        build_conversations(cfg, SessionConfig(), None, 0)
