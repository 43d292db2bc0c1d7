"""TGI profile: exact local and container commands; prefix caching is an environment variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenbench.backends import tgi
from tokenbench.backends.base import LaunchSpec
from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError

PROFILE = tgi.PROFILE


class _FutureKnobs(EngineKnobs):
    speculative_tokens: int | None = None


def _spec(**knobs) -> LaunchSpec:
    return LaunchSpec(model="org/model", served_name="served", host="127.0.0.1", port=3100, knobs=EngineKnobs(**knobs))


KNOBS = dict(
    max_num_seqs=32,
    kv_memory=0.9,
    max_model_len=2048,
    prefix_caching=True,
    quantization="eetq",
    tensor_parallel=2,
    engine_args=("--max-waiting-tokens", "10"),
    engine_env={"LOG_LEVEL": "info"},
)
ARGS = [
    "--model-id",
    "org/model",
    "--port",
    "3100",
    "--max-input-tokens",
    "2047",
    "--max-total-tokens",
    "2048",
    "--max-batch-size",
    "32",
    "--cuda-memory-fraction",
    "0.9",
    "--quantize",
    "eetq",
    "--num-shard",
    "2",
    "--max-waiting-tokens",
    "10",
]


def _with_host(host: str) -> list[str]:
    return [*ARGS[:2], "--hostname", host, *ARGS[2:]]


def test_local_command():
    launch = PROFILE.local(_spec(**KNOBS))
    assert list(launch.argv) == ["text-generation-launcher", *_with_host("127.0.0.1")]
    assert all(isinstance(a, str) for a in launch.argv)
    assert dict(launch.env) == {"PREFIX_CACHING": "1", "LOG_LEVEL": "info"}


def test_container_command():
    launch = PROFILE.container(_spec(**KNOBS))
    hf = Path.home() / ".cache/huggingface"
    assert list(launch.argv) == [
        "docker",
        "run",
        "--rm",
        "--ipc=host",
        "-p",
        "127.0.0.1:3100:3100",
        "--gpus",
        "all",
        "-v",
        f"{hf}:/root/.cache/huggingface",
        "-e",
        "HUGGINGFACE_HUB_CACHE=/root/.cache/huggingface/hub",
        "-e",
        "HF_HOME=/root/.cache/huggingface",
        "-e",
        "PREFIX_CACHING=1",
        "-e",
        "LOG_LEVEL=info",
        "ghcr.io/huggingface/text-generation-inference:latest",
        *_with_host("0.0.0.0"),
    ]
    assert all(isinstance(a, str) for a in launch.argv)


def test_prefix_caching_off_and_unset():
    assert dict(PROFILE.local(_spec(prefix_caching=False)).env) == {"PREFIX_CACHING": "0"}
    launch = PROFILE.local(_spec())
    assert dict(launch.env) == {}
    assert list(launch.argv) == [
        "text-generation-launcher",
        "--model-id",
        "org/model",
        "--hostname",
        "127.0.0.1",
        "--port",
        "3100",
    ]


def test_unknown_knob_names_the_pass_through():
    spec = LaunchSpec(model="m", served_name="m", host="127.0.0.1", port=1, knobs=_FutureKnobs(speculative_tokens=4))
    with pytest.raises(BackendError, match="--engine-arg"):
        PROFILE.local(spec)
