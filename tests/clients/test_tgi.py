"""TGI's /generate_stream body: sampling parameters, extra_body, the URL. (Streams are proven against transcripts in test_native_protocols.py.)"""

from run_helpers import resolved

from tokenbench.clients.tgi import TGIWire
from tokenbench.config import TargetConfig
from tokenbench.records import Request


def target(**fields) -> TargetConfig:
    return resolved(**{"api": "tgi", **fields})


def test_tgi_payload_sampling_and_extra_body():
    wire = TGIWire()
    messages = ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"})
    tgt = target(temperature=0.7, ignore_eos=True, extra_body={"top_p": 0.9, "details": True})
    body = wire.payload(Request(messages=messages, max_tokens=5), tgt)
    # ignore_eos has no TGI equivalent and is not sent; temperature > 0 needs do_sample.
    assert body == {
        "inputs": "Be brief.\n\nHi",
        "parameters": {
            "details": True,
            "max_new_tokens": 5,
            "do_sample": True,
            "temperature": 0.7,
            "top_p": 0.9,
        },
    }
    bare = wire.payload(Request(prompt="x"), target(temperature=None))
    assert bare == {"inputs": "x", "parameters": {"details": True}}
    assert wire.url(target(url="http://h:8080")) == "http://h:8080/generate_stream"
