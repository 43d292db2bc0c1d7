"""Token counting: an HF tokenizer.json offline, or the server's /tokenize (the mock counts words)."""

import json

import pytest

from tokenbench.common.procs import free_port
from tokenbench.datasets.tokenizers import HFTokenizer, RemoteTokenizer


def _word_level_tokenizer(path):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {"[UNK]": 0, "hello": 1, "world": 2}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(path / "tokenizer.json"))
    return path


def test_an_hf_tokenizer_file_or_its_folder_counts_without_special_tokens(tmp_path):
    folder = _word_level_tokenizer(tmp_path)
    for where in (folder, folder / "tokenizer.json"):
        tok = HFTokenizer(where)
        assert tok.count("hello world hello") == 3
        assert tok.count("hello, unknown world") == 4  # "," and the unknown word are one token each
        assert tok.name == f"hf:{folder / 'tokenizer.json'}"
    with pytest.raises(FileNotFoundError, match="--tokenizer: no tokenizer.json"):
        HFTokenizer(tmp_path / "missing")


def test_the_servers_tokenize_endpoint_counts_and_a_dead_one_is_not_available(mock_server):
    url = mock_server()
    tok = RemoteTokenizer.available(url, "mock-model")
    assert tok is not None and tok.name == f"server:{url}/tokenize"
    assert tok.count("one two three four") == 4
    assert RemoteTokenizer.available(f"http://127.0.0.1:{free_port()}", None) is None


def test_a_tokenize_answer_without_count_is_counted_by_its_tokens(monkeypatch):
    tok = RemoteTokenizer("http://h:1/", None)
    sent = []
    monkeypatch.setattr(tok, "_post", lambda body: sent.append(json.dumps(body)) or {"tokens": [5, 6]})
    assert tok.count("x y") == 2
    assert json.loads(sent[0]) == {"content": "x y", "prompt": "x y", "add_special_tokens": False}
