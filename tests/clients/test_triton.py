"""Triton's generate_stream body: ignore_eos as min_tokens, temperature, extra_body, the URL. (Streams are proven against transcripts in test_native_protocols.py.)"""

import json

from run_helpers import resolved

from tokenbench.clients.triton import TritonWire
from tokenbench.config import TargetConfig
from tokenbench.records import Request


def target(**fields) -> TargetConfig:
    return resolved(**{"api": "triton", **fields})


def test_triton_payload_ignore_eos_temperature_and_extra_body():
    wire = TritonWire()
    body = wire.payload(
        Request(prompt="x", max_tokens=32),
        target(
            model="ensemble", temperature=0.7, ignore_eos=True, extra_body={"return_num_input_tokens": None, "top_k": 1}
        ),
    )
    assert body == {
        "text_input": "x",
        "parameters": {
            "stream": True,
            "return_num_output_tokens": True,
            "max_tokens": 32,
            "min_tokens": 32,
            "temperature": 0.7,
            "top_k": 1,
        },
    }
    greedy = wire.payload(Request(prompt="x"), target(temperature=0.0))["parameters"]
    assert json.dumps(greedy["temperature"]) == "0"
    url = wire.url(target(url="http://h:8000", model="my model/v1"))
    assert url == "http://h:8000/v2/models/my%20model%2Fv1/generate_stream"
