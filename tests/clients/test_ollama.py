"""Ollama's /api/generate body: extra_body split between the request and its options. (Streams are proven against transcripts in test_native_protocols.py.)"""

import pytest
from run_helpers import resolved

from tokenbench.clients.ollama import OllamaWire
from tokenbench.config import TargetConfig
from tokenbench.records import Request


def target(**fields) -> TargetConfig:
    return resolved(**{"api": "ollama", **fields})


def test_ollama_payload_splits_extra_body_between_request_and_options():
    wire = OllamaWire()
    body = wire.payload(
        Request(prompt="x", max_tokens=7),
        target(
            model="smollm2:135m",
            ignore_eos=True,
            extra_body={"raw": False, "keep_alive": "10m", "num_ctx": 4096},
        ),
    )
    assert body == {
        "model": "smollm2:135m",
        "prompt": "x",
        "stream": True,
        "raw": False,
        "keep_alive": "10m",
        "options": {"num_predict": 7, "temperature": 0.0, "num_ctx": 4096},
    }
    assert "options" not in wire.payload(Request(prompt="x"), target(temperature=None))


def test_extra_body_options_win_over_ours_and_must_be_an_object():
    wire = OllamaWire()
    given = target(temperature=0.0, extra_body={"options": {"temperature": 0.7, "num_ctx": 2048}})
    body = wire.payload(Request(prompt="x", max_tokens=3), given)
    assert body["options"] == {"num_predict": 3, "temperature": 0.7, "num_ctx": 2048}
    with pytest.raises(ValueError, match="Ollama's options must be an object, not 'fast'"):
        wire.payload(Request(prompt="x", max_tokens=3), target(extra_body={"options": "fast"}))


def test_thinking_lines_are_chunks_counted_apart():
    """A thinking model's ``thinking`` pieces are chunks (TTFT counts them) but not output: the
    first ``response`` piece is chunk 2, the first output."""
    stream = OllamaWire().new_stream()
    lines = [b'{"thinking":"hm"}', b'{"thinking":" ok"}', b'{"response":"4"}', b'{"response":"."}']
    assert [stream.handle(line) for line in lines] == [True] * 4
    assert stream.reasoning_chunks == 2 and stream.first_output_index(4) == 2
