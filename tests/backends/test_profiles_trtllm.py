"""TensorRT-LLM profile: exact trtllm-serve argv locally and in a container, refused knobs."""

from pathlib import Path

import pytest

from tokenbench.backends import trtllm
from tokenbench.backends.base import LaunchSpec
from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def spec(port=8123, model=MODEL, **knobs) -> LaunchSpec:
    return LaunchSpec(model=model, served_name=model, host="127.0.0.1", port=port, knobs=EngineKnobs(**knobs))


KNOBS = dict(
    max_num_seqs=64,
    kv_memory=0.85,
    max_model_len=4096,
    tensor_parallel=2,
    engine_args=("--max_num_tokens=8192",),
    engine_env={"TLLM_LOG_LEVEL": "INFO"},
)
FLAGS = [
    "--backend",
    "pytorch",
    "--max_batch_size",
    "64",
    "--kv_cache_free_gpu_memory_fraction",
    "0.85",
    "--max_seq_len",
    "4096",
    "--tp_size",
    "2",
    "--max_num_tokens=8192",
]


def test_local_argv_and_env():
    launch = trtllm.local(spec(**KNOBS))
    assert launch.argv == ("trtllm-serve", MODEL, "--host", "127.0.0.1", "--port", "8123", *FLAGS)
    assert all(isinstance(a, str) for a in launch.argv)
    assert launch.env == {"TLLM_LOG_LEVEL": "INFO"}


def test_container_binds_all_inside_and_publishes_loopback():
    launch = trtllm.container(spec(**KNOBS))
    assert launch.argv == (
        "docker",
        "run",
        "--rm",
        "--ipc=host",
        "-p",
        "127.0.0.1:8123:8123",
        "--gpus",
        "all",
        "-v",
        f"{Path.home() / '.cache/huggingface'}:/root/.cache/huggingface",
        "-e",
        "TLLM_LOG_LEVEL=INFO",
        trtllm.IMAGE,
        "trtllm-serve",
        MODEL,
        "--host",
        "0.0.0.0",
        "--port",
        "8123",
        *FLAGS,
    )


def test_container_mounts_a_local_checkpoint(tmp_path):
    launch = trtllm.container(spec(model=str(tmp_path)))
    argv = list(launch.argv)
    assert argv[argv.index("-v") + 1] == f"{tmp_path.resolve()}:/model:ro"
    assert argv[argv.index(trtllm.IMAGE) + 1 : argv.index(trtllm.IMAGE) + 3] == ["trtllm-serve", "/model"]


@pytest.mark.parametrize("knobs", [dict(prefix_caching=False), dict(quantization="fp8")])
def test_unmapped_knobs_name_the_pass_through(knobs):
    with pytest.raises(BackendError, match="--engine-arg"):
        trtllm.local(spec(**knobs))


def test_prefix_caching_error_gives_the_yaml():
    with pytest.raises(BackendError, match="enable_block_reuse: false}"):
        trtllm.local(spec(prefix_caching=False))


def test_user_backend_replaces_the_default():
    argv = trtllm.local(spec(engine_args=("--backend", "tensorrt"))).argv
    assert argv[-2:] == ("--backend", "tensorrt") and "pytorch" not in argv
    assert "pytorch" not in trtllm.local(spec(engine_args=("--backend=tensorrt",))).argv


def test_engine_bin_replaces_the_command():
    s = LaunchSpec(
        model=MODEL,
        served_name=MODEL,
        host="127.0.0.1",
        port=8000,
        knobs=EngineKnobs(),
        executable="/opt/venv/bin/trtllm-serve",
    )
    assert trtllm.local(s).argv[:2] == ("/opt/venv/bin/trtllm-serve", MODEL)


def test_metrics_are_the_prometheus_mount_not_the_json_stats():
    assert trtllm.PROFILE.metrics.path == "/prometheus/metrics"
    assert trtllm.PROFILE.metrics.ttft_histogram[0] == "trtllm_time_to_first_token_seconds"
    assert trtllm.PROFILE.ready_path == "/health" and trtllm.PROFILE.version_path == "/version"
