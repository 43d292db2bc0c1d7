"""backends/triton_model.py (the PyTriton relay) without PyTriton: a Triton request's inputs as
numpy arrays -> the upstream OpenAI completions body, and the upstream's chunks -> Triton
responses (streamed one per chunk, or joined when the request asked for stream=false).
PyTriton lives in its own venv, so the module is imported here with stand-ins for its imports."""

from __future__ import annotations

import asyncio
import importlib
import sys
import types
from collections.abc import AsyncIterator
from unittest import mock

import numpy as np
import pytest


@pytest.fixture(scope="module")
def relay_module() -> types.ModuleType:
    fakes = {name: types.ModuleType(name) for name in ("pytriton", "pytriton.model_config", "pytriton.triton")}
    for module, names in (
        ("pytriton.model_config", ("ModelConfig", "Tensor")),
        ("pytriton.triton", ("Triton", "TritonConfig")),
    ):
        for name in names:
            setattr(fakes[module], name, object)
    with mock.patch.dict(sys.modules, fakes):
        sys.modules.pop("tokenbench.backends.triton_model", None)
        return importlib.import_module("tokenbench.backends.triton_model")


def _request(**inputs: object) -> dict[str, np.ndarray]:
    return {name: np.asarray(value) for name, value in inputs.items()}


def test_body_carries_every_input_under_its_openai_name(relay_module):
    request = _request(
        text_input=[b"hello there"],
        max_tokens=np.array([16], dtype=np.int32),
        temperature=np.array([0.5], dtype=np.float32),
        top_p=np.array([0.25], dtype=np.float32),
        top_k=np.array([40], dtype=np.int32),
        random_seed=np.array([7], dtype=np.int32),
        stop_words=[b"</s>", b"\n\n"],
        bad_words=[b"ignored"],
    )
    assert relay_module.upstream_body(request, "smollm2") == {
        "model": "smollm2",
        "prompt": "hello there",
        "max_tokens": 16,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "temperature": 0.5,
        "top_p": 0.25,
        "top_k": 40,
        "seed": 7,
        "stop": ["</s>", "\n\n"],
        "_stream": True,  # stream not given: streamed
    }


def test_min_tokens_up_to_max_tokens_ignores_eos(relay_module):
    body = relay_module.upstream_body(_request(text_input=[b"x"], max_tokens=[8], min_tokens=[8]), "m")
    assert body["min_tokens"] == 8 and body["ignore_eos"] is True
    body = relay_module.upstream_body(_request(text_input=[b"x"], max_tokens=[8], min_tokens=[2]), "m")
    assert body["min_tokens"] == 2 and "ignore_eos" not in body


def test_stream_false_and_empty_inputs(relay_module):
    body = relay_module.upstream_body(_request(text_input=[b"x"], max_tokens=[4], stream=[False], stop_words=[]), "m")
    assert body["_stream"] is False
    assert "stop" not in body  # an empty input is as if not sent
    assert relay_module.upstream_body(_request(max_tokens=[4]), "m")["prompt"] is None


def _relay(relay_module, chunks: list[tuple[str, int | None, int]]):
    class Scripted(relay_module.Relay):
        async def _chunks(self, body: dict[str, object]) -> AsyncIterator[tuple[str, int | None, int]]:
            self.sent = body
            for chunk in chunks:
                yield chunk

    return Scripted("http://127.0.0.1:1/", "m")


def _responses(relay, request) -> list[dict[str, list[object]]]:
    async def collect() -> list[dict[str, list[object]]]:
        return [{k: v.tolist() for k, v in r.items()} async for (r,) in relay([request])]

    return asyncio.run(collect())


def test_streamed_responses_one_per_chunk_with_the_counts_asked_for(relay_module):
    relay = _relay(relay_module, [("Hel", 3, 1), ("", None, 0), ("lo", 3, 2)])
    request = _request(text_input=[b"x"], max_tokens=[4], stream=[True], return_num_output_tokens=[True])
    assert _responses(relay, request) == [
        {"text_output": [b"Hel"], "num_output_tokens": [1]},
        {"text_output": [b"lo"], "num_output_tokens": [2]},
    ]
    assert relay.url == "http://127.0.0.1:1/v1/completions"
    assert "_stream" not in relay.sent  # tokenbench's own key never reaches the upstream


def test_input_tokens_are_sent_when_asked(relay_module):
    relay = _relay(relay_module, [("a", 5, 1)])
    request = _request(text_input=[b"x"], max_tokens=[1], return_num_input_tokens=[True])
    assert _responses(relay, request) == [{"text_output": [b"a"], "num_input_tokens": [5]}]


def test_stream_false_joins_the_text_into_one_response(relay_module):
    relay = _relay(relay_module, [("Hel", None, 1), ("lo", None, 1)])
    request = _request(text_input=[b"x"], max_tokens=[2], stream=[False])
    assert _responses(relay, request) == [{"text_output": [b"Hello"]}]


def test_a_missing_required_input_is_refused(relay_module):
    relay = _relay(relay_module, [])
    with pytest.raises(ValueError, match="input max_tokens is required"):
        _responses(relay, _request(text_input=[b"x"]))
    with pytest.raises(ValueError, match="expected one request per call, got 2"):
        asyncio.run(anext(relay([{}, {}])))
