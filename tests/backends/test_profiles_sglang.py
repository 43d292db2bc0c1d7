"""SGLang profile: exact local and container commands for a LaunchSpec with knobs set."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenbench.backends import sglang
from tokenbench.backends.base import LaunchSpec
from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError

PROFILE = sglang.PROFILE


class _FutureKnobs(EngineKnobs):
    speculative_tokens: int | None = None  # a knob SGLang's mapping does not know


def _spec(model: str = "org/model", executable: str | None = None, **knobs) -> LaunchSpec:
    return LaunchSpec(
        model=model,
        served_name="served",
        host="127.0.0.1",
        port=30123,
        knobs=EngineKnobs(**knobs),
        executable=executable,
    )


KNOBS = dict(
    max_num_seqs=16,
    kv_memory=0.8,
    max_model_len=4096,
    prefix_caching=False,
    quantization="fp8",
    tensor_parallel=2,
    engine_args=("--chunked-prefill-size", "512"),
    engine_env={"SGLANG_X": "1"},
)
MAPPED = [
    "--max-running-requests",
    "16",
    "--mem-fraction-static",
    "0.8",
    "--context-length",
    "4096",
    "--disable-radix-cache",
    "--quantization",
    "fp8",
    "--tp-size",
    "2",
]


def test_local_command():
    launch = PROFILE.local(_spec(**KNOBS))
    assert list(launch.argv) == [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "org/model",
        "--host",
        "127.0.0.1",
        "--port",
        "30123",
        "--served-model-name",
        "served",
        "--enable-metrics",
        *MAPPED,
        "--chunked-prefill-size",
        "512",
    ]
    assert all(isinstance(a, str) for a in launch.argv)
    assert dict(launch.env) == {"SGLANG_X": "1"}


def test_container_command():
    launch = PROFILE.container(_spec(**KNOBS))
    hf = Path.home() / ".cache/huggingface"
    assert list(launch.argv) == [
        "docker",
        "run",
        "--rm",
        "--ipc=host",
        "-p",
        "127.0.0.1:30123:30123",
        "--gpus",
        "all",
        "-v",
        f"{hf}:/root/.cache/huggingface",
        "-e",
        "SGLANG_X=1",
        "lmsysorg/sglang:latest",
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "org/model",
        "--host",
        "0.0.0.0",
        "--port",
        "30123",
        "--served-model-name",
        "served",
        "--enable-metrics",
        *MAPPED,
        "--chunked-prefill-size",
        "512",
    ]
    assert all(isinstance(a, str) for a in launch.argv)


def test_container_mounts_a_local_model(tmp_path):
    argv = list(PROFILE.container(_spec(model=str(tmp_path))).argv)
    assert argv[argv.index("-v") + 1] == f"{tmp_path.resolve()}:/model:ro"
    assert argv[argv.index("--model-path") + 1] == "/model"


def test_defaults_render_only_the_fixed_flags():
    assert list(PROFILE.local(_spec()).argv) == [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "org/model",
        "--host",
        "127.0.0.1",
        "--port",
        "30123",
        "--served-model-name",
        "served",
        "--enable-metrics",
    ]


def test_prefix_caching_on_is_the_default_and_renders_nothing():
    argv = list(PROFILE.local(_spec(prefix_caching=True)).argv)
    assert "--disable-radix-cache" not in argv and argv[-1] == "--enable-metrics"


def test_engine_bin_replaces_the_command_and_an_interpreter_keeps_the_module():
    assert PROFILE.local(_spec(executable="/opt/sgl/bin/sgl-serve")).argv[:3] == (
        "/opt/sgl/bin/sgl-serve",
        "--model-path",
        "org/model",
    )
    assert PROFILE.local(_spec(executable="/venv/bin/python3.11")).argv[:4] == (
        "/venv/bin/python3.11",
        "-m",
        "sglang.launch_server",
        "--model-path",
    )


def test_unknown_knob_names_the_pass_through():
    spec = LaunchSpec(model="m", served_name="m", host="127.0.0.1", port=1, knobs=_FutureKnobs(speculative_tokens=4))
    with pytest.raises(BackendError, match="--engine-arg"):
        PROFILE.local(spec)
