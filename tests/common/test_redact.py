"""Credentials masked in every file and console line: names, argument lists, registered values
and shapes; ordinary text (max_tokens=5, the token count, an env var's name) kept."""

import json

import pytest

from tokenbench.common import redact


def test_masking_rules():
    redact.register("planted-value-1234")
    data = {
        "HF_TOKEN": "hf_plantedplantedplanted",
        "tokenizer": "/models/t",
        "api_key_env": "OPENAI_API_KEY",
        "command": ["vllm", "serve", "--api-key", "sk-plantedplantedplanted", "--hf-token=plantedhf"],
        "headers": {"X-Gateway": "planted-value-1234"},
        "output_tokens": 12,
        "error": "401: invalid key Bearer abcdefghijklmnop for http://u:pw123@host/x",
        "note": "max_tokens=5 and the token count",
    }
    masked = json.dumps(redact.mask(data))
    for secret in ("hf_planted", "sk-planted", "plantedhf", "planted-value-1234", "abcdefghijklmnop", "pw123"):
        assert secret not in masked
    for kept in ("/models/t", "OPENAI_API_KEY", "max_tokens=5 and the token count", '"output_tokens": 12'):
        assert kept in masked


@pytest.mark.parametrize(
    "key,secret",
    [
        ("HF_TOKEN", True),
        ("api_key", True),
        ("X-Api-Key", True),
        ("Authorization", True),
        ("openaiApiKey", True),
        ("password", True),
        ("api_key_env", False),  # the name of the variable holding the key
        ("max_tokens", False),
        ("tokenizer", False),
        ("output_tokens", False),
    ],
)
def test_a_key_names_a_credential_by_one_of_its_words(key, secret):
    assert redact.secret_name(key) is secret


def test_the_value_after_a_credential_flag_is_masked_in_an_argument_list():
    argv = ["serve", "--api-key", "abc", "--hf-token=xyz", "--max-tokens", "5", "--port=8000"]
    assert redact.mask_argv(argv) == ["serve", "--api-key", "***", "--hf-token=***", "--max-tokens", "5", "--port=8000"]


def test_shapes_are_masked_wherever_they_are():
    assert redact.mask_text("curl -H 'Authorization: Bearer abcdef123456'") == "curl -H 'Authorization: Bearer ***'"
    assert redact.mask_text("token hf_abcdefgh12 and sk-abcdefgh12") == "token *** and ***"
    assert redact.mask_text("http://user:pw@host:1/x") == "http://user:***@host:1/x"
    assert redact.mask_text("HF_TOKEN=hf-like-but-not API_KEY: zzz") == "HF_TOKEN=*** API_KEY: ***"
    assert redact.mask_text("max_tokens=5, 12 tokens") == "max_tokens=5, 12 tokens"


def test_secrets_of_an_engines_env_argv_and_headers():
    found = redact.secrets_of({"HF_TOKEN": "t1", "CUDA_VISIBLE_DEVICES": "0"}, ["--api-key", "k1"], {"X-Gw": "h1"})
    assert found == ["t1", "k1", "h1"]
