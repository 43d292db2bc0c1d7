"""LMDeploy profiles (TurboMind and PyTorch engines): exact local and container commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenbench.backends import lmdeploy
from tokenbench.backends.base import LaunchSpec
from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError


class _FutureKnobs(EngineKnobs):
    speculative_tokens: int | None = None


def _spec(**knobs) -> LaunchSpec:
    return LaunchSpec(model="org/model", served_name="served", host="127.0.0.1", port=23400, knobs=EngineKnobs(**knobs))


KNOBS = dict(
    max_num_seqs=64,
    kv_memory=0.5,
    max_model_len=8192,
    prefix_caching=True,
    quantization="awq",
    tensor_parallel=4,
    engine_args=("--quant-policy", "8"),
    engine_env={"TM_LOG_LEVEL": "INFO"},
)
MAPPED = [
    "--max-batch-size",
    "64",
    "--cache-max-entry-count",
    "0.5",
    "--session-len",
    "8192",
    "--enable-prefix-caching",
    "--model-format",
    "awq",
    "--tp",
    "4",
]


@pytest.mark.parametrize(
    "profile,backend", [(lmdeploy.TURBOMIND_PROFILE, "turbomind"), (lmdeploy.PYTORCH_PROFILE, "pytorch")]
)
def test_local_command(profile, backend):
    launch = profile.local(_spec(**KNOBS))
    assert list(launch.argv) == [
        "lmdeploy",
        "serve",
        "api_server",
        "org/model",
        "--server-name",
        "127.0.0.1",
        "--server-port",
        "23400",
        "--backend",
        backend,
        "--model-name",
        "served",
        *MAPPED,
        "--quant-policy",
        "8",
    ]
    assert all(isinstance(a, str) for a in launch.argv)
    assert dict(launch.env) == {"TM_LOG_LEVEL": "INFO"}


@pytest.mark.parametrize(
    "profile,backend", [(lmdeploy.TURBOMIND_PROFILE, "turbomind"), (lmdeploy.PYTORCH_PROFILE, "pytorch")]
)
def test_container_command(profile, backend):
    launch = profile.container(_spec(**KNOBS))
    hf = Path.home() / ".cache/huggingface"
    assert list(launch.argv) == [
        "docker",
        "run",
        "--rm",
        "--ipc=host",
        "-p",
        "127.0.0.1:23400:23400",
        "--gpus",
        "all",
        "-v",
        f"{hf}:/root/.cache/huggingface",
        "-e",
        "TM_LOG_LEVEL=INFO",
        "openmmlab/lmdeploy:latest",
        "lmdeploy",
        "serve",
        "api_server",
        "org/model",
        "--server-name",
        "0.0.0.0",
        "--server-port",
        "23400",
        "--backend",
        backend,
        "--model-name",
        "served",
        *MAPPED,
        "--quant-policy",
        "8",
    ]
    assert all(isinstance(a, str) for a in launch.argv)


def test_prefix_caching_off_is_the_default_and_renders_nothing():
    argv = list(lmdeploy.PYTORCH_PROFILE.local(_spec(prefix_caching=False)).argv)
    assert argv[-2:] == ["--model-name", "served"]


def test_no_metrics_flag_is_rendered():
    argv = lmdeploy.TURBOMIND_PROFILE.local(_spec()).argv
    assert "--enable-metrics" not in argv and "--disable-metrics" not in argv


def test_unknown_knob_names_the_pass_through():
    spec = LaunchSpec(model="m", served_name="m", host="127.0.0.1", port=1, knobs=_FutureKnobs(speculative_tokens=4))
    for profile in (lmdeploy.TURBOMIND_PROFILE, lmdeploy.PYTORCH_PROFILE):
        with pytest.raises(BackendError, match="--engine-arg"):
            profile.local(spec)
