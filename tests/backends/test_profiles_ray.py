"""Ray Serve LLM profile: a python3 -c program with the LLMConfig as JSON; metrics on the Ray port."""

import json
from pathlib import Path

import pytest

from tokenbench.backends import ray as ray_profile
from tokenbench.backends.base import BackendError, LaunchSpec
from tokenbench.config import EngineKnobs

MODEL = "Qwen/Qwen2.5-0.5B-Instruct"


def spec(port=8300, executable=None, **knobs) -> LaunchSpec:
    return LaunchSpec(
        model=MODEL, served_name="qwen", host="127.0.0.1", port=port, knobs=EngineKnobs(**knobs), executable=executable
    )


KNOBS = dict(
    max_num_seqs=32,
    kv_memory=0.8,
    max_model_len=2048,
    prefix_caching=False,
    quantization="fp8",
    tensor_parallel=2,
    engine_env={"HF_HUB_OFFLINE": "1"},
    engine_args=(
        "max_num_batched_tokens=8192",
        "llm_config.accelerator_type=A10G",
        'llm_config.experimental_configs={"stream_batching_interval_ms": 0}',
    ),
)


def expected_config(host: str, model: str = MODEL) -> dict:
    return {
        "host": host,
        "port": 8300,
        "metrics_port": 8301,
        "llm_config": {
            "model_loading_config": {"model_id": "qwen", "model_source": model},
            "engine_kwargs": {
                "max_num_seqs": 32,
                "gpu_memory_utilization": 0.8,
                "max_model_len": 2048,
                "enable_prefix_caching": False,
                "quantization": "fp8",
                "tensor_parallel_size": 2,
                "max_num_batched_tokens": 8192,
            },
            "log_engine_metrics": True,
            "accelerator_type": "A10G",
            "experimental_configs": {"stream_batching_interval_ms": 0},
        },
    }


def test_local_argv_is_the_program_and_its_config():
    launch = ray_profile.local(spec(**KNOBS))
    assert launch.argv[:3] == ("python3", "-c", ray_profile.PROGRAM)
    assert len(launch.argv) == 4 and all(isinstance(a, str) for a in launch.argv)
    assert json.loads(launch.argv[3]) == expected_config("127.0.0.1")
    assert launch.env == {"HF_HUB_OFFLINE": "1"}


def test_program_is_valid_python_using_the_documented_api():
    compile(ray_profile.PROGRAM, "<ray-serve-llm>", "exec")
    for call in ("build_openai_app(", "serve.run(", 'ray.init(address="local"', "serve.start(http_options="):
        assert call in ray_profile.PROGRAM


def test_container_publishes_http_and_metrics_ports_on_loopback():
    launch = ray_profile.container(spec(**KNOBS))
    argv = launch.argv
    assert argv[: argv.index(ray_profile.IMAGE) + 3] == (
        "docker",
        "run",
        "--rm",
        "--ipc=host",
        "-p",
        "127.0.0.1:8300:8300",
        "-p",
        "127.0.0.1:8301:8301",
        "--gpus",
        "all",
        "-v",
        f"{Path.home() / '.cache/huggingface'}:/root/.cache/huggingface",
        "-e",
        "HF_HUB_OFFLINE=1",
        ray_profile.IMAGE,
        "python3",
        "-c",
    )
    assert argv[-2] == ray_profile.PROGRAM
    assert json.loads(argv[-1]) == expected_config("0.0.0.0")


def test_container_mounts_a_local_model(tmp_path):
    local_model = LaunchSpec(model=str(tmp_path), served_name="m", host="127.0.0.1", port=8300, knobs=EngineKnobs())
    argv = ray_profile.container(local_model).argv
    assert f"{tmp_path.resolve()}:/model:ro" in argv
    assert json.loads(argv[-1])["llm_config"]["model_loading_config"]["model_source"] == "/model"


def test_engine_bin_picks_the_interpreter():
    assert ray_profile.local(spec(executable="/opt/ray/bin/python")).argv[:2] == ("/opt/ray/bin/python", "-c")


@pytest.mark.parametrize("arg", ["--enforce-eager", "enforce_eager", "=1"])
def test_engine_args_must_be_key_value(arg):
    with pytest.raises(BackendError, match="--engine-arg"):
        ray_profile.local(spec(engine_args=(arg,)))


def test_metrics_are_on_the_ray_export_port():
    assert ray_profile.metrics_url(spec()) == "http://127.0.0.1:8301/metrics"
    m = ray_profile.PROFILE.metrics
    assert m.running[0] == "ray_vllm_num_requests_running"
    assert m.generated_tokens[0] == "ray_vllm_generation_tokens_total"
    assert ray_profile.PROFILE.version_package == "ray"
