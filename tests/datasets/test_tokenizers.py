"""Token counting: an HF tokenizer.json offline, or the server's /tokenize (the mock counts words)."""

import json

import pytest

from tokenbench.common.procs import free_port
from tokenbench.datasets.tokenizers import HFTokenizer, RemoteTokenizer, special_tokens_of


def _word_level_tokenizer(path, bos: bool = False):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from tokenizers.processors import TemplateProcessing

    vocab = {"[UNK]": 0, "hello": 1, "world": 2, "<s>": 3}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    if bos:  # a Llama-like template: a BOS before every text
        tok.post_processor = TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 3)])
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


def test_the_special_tokens_a_tokenizer_adds_are_counted_apart(tmp_path):
    """count leaves a BOS out; special_tokens_of says how many the tokenizer's own call adds (what
    vllm bench serve's tokenizer(text).input_ids counts beyond it), 0 where nothing can say."""
    (tmp_path / "bos").mkdir()
    with_bos, plain = (
        HFTokenizer(_word_level_tokenizer(tmp_path / "bos", bos=True)),
        HFTokenizer(_word_level_tokenizer(tmp_path)),
    )
    assert with_bos.count("hello world") == plain.count("hello world") == 2
    assert (special_tokens_of(with_bos), special_tokens_of(plain), special_tokens_of(None)) == (1, 0, 0)


def test_the_servers_special_tokens_are_its_count_with_them_less_without(monkeypatch):
    tok = RemoteTokenizer("http://h:1/", "m")
    sent = []

    def post(body):
        sent.append(body)
        return {"tokens": [1, 7] if body["add_special_tokens"] else [7]}

    monkeypatch.setattr(tok, "_post", post)
    assert special_tokens_of(tok) == 1
    assert sent[0] == {
        "content": "hello",
        "prompt": "hello",
        "add_special_tokens": True,
        "add_special": True,
        "model": "m",
    }
    assert not sent[1]["add_special_tokens"] and "add_special" not in sent[1]


def test_a_server_that_takes_no_special_tokens_field_adds_none(mock_server):
    tok = RemoteTokenizer.available(mock_server(), "mock-model")
    assert tok is not None and special_tokens_of(tok) == 0
