"""MLC LLM profile: knobs go into one --overrides string; quantization and containers refused."""

from __future__ import annotations

import pytest

from tokenbench.backends import mlc
from tokenbench.backends.base import LaunchSpec
from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError

PROFILE = mlc.PROFILE


class _FutureKnobs(EngineKnobs):
    speculative_tokens: int | None = None


def _spec(**knobs) -> LaunchSpec:
    return LaunchSpec(
        model="HF://mlc-ai/Model-q4f16_1-MLC",
        served_name="served",
        host="127.0.0.1",
        port=8100,
        knobs=EngineKnobs(**knobs),
    )


def test_local_command():
    launch = PROFILE.local(
        _spec(
            max_num_seqs=8,
            kv_memory=0.85,
            max_model_len=4096,
            prefix_caching=False,
            tensor_parallel=2,
            engine_args=("--device", "cuda:0"),
            engine_env={"TVM_X": "1"},
        )
    )
    assert list(launch.argv) == [
        "mlc_llm",
        "serve",
        "HF://mlc-ai/Model-q4f16_1-MLC",
        "--host",
        "127.0.0.1",
        "--port",
        "8100",
        "--mode",
        "server",
        "--overrides",
        "max_num_sequence=8;gpu_memory_utilization=0.85;context_window_size=4096;tensor_parallel_shards=2",
        "--prefix-cache-mode",
        "disable",
        "--device",
        "cuda:0",
    ]
    assert all(isinstance(a, str) for a in launch.argv)
    assert dict(launch.env) == {"TVM_X": "1"}


def test_defaults_and_prefix_cache_on():
    assert list(PROFILE.local(_spec()).argv) == [
        "mlc_llm",
        "serve",
        "HF://mlc-ai/Model-q4f16_1-MLC",
        "--host",
        "127.0.0.1",
        "--port",
        "8100",
        "--mode",
        "server",
    ]
    argv = list(PROFILE.local(_spec(prefix_caching=True, kv_memory=0.5)).argv)
    assert argv[-4:] == ["--overrides", "gpu_memory_utilization=0.5", "--prefix-cache-mode", "radix"]


def test_quantization_is_refused():
    with pytest.raises(BackendError, match="compiled model"):
        PROFILE.local(_spec(quantization="awq"))


def test_unknown_knob_names_the_pass_through():
    spec = LaunchSpec(model="m", served_name="m", host="127.0.0.1", port=1, knobs=_FutureKnobs(speculative_tokens=4))
    with pytest.raises(BackendError, match="--engine-arg"):
        PROFILE.local(spec)


def test_no_container_image():
    with pytest.raises(BackendError, match="no server container image"):
        PROFILE.container(_spec())
