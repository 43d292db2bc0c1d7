"""Ray Serve LLM profile: a python3 -c program with the LLMConfig as JSON; metrics on the Ray port."""

import json
import sys
from pathlib import Path

import pytest

from tokenbench.backends import ray as ray_profile
from tokenbench.backends.base import LaunchSpec
from tokenbench.backends.ray_serve_app import ServeConfig
from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError

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
        "ray_init.num_cpus=4",
    ),
)


def expected_config(host: str, model: str = MODEL) -> dict:
    return {
        "host": host,
        "port": 8300,
        "metrics_port": 8301,
        "ready_path": "/tokenbench/ready",
        "ray_init": {"num_cpus": 4},
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
    assert launch.env == {"RAY_metrics_report_interval_ms": "1000", "HF_HUB_OFFLINE": "1"}


def test_program_is_valid_python_using_the_documented_api():
    compile(ray_profile.PROGRAM, "<ray-serve-llm>", "exec")
    for call in (
        "build_openai_app(",
        "serve.run(",
        'ray.init(address="local"',
        "serve.start(http_options=",
        '**c["ray_init"]',
    ):
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


@pytest.mark.parametrize(("http", "metrics"), [(8000, 8001), (32766, 32767), (32767, 20000), (52321, 26786)])
def test_metrics_port_is_next_to_http_unless_that_is_in_the_ephemeral_range(http, metrics):
    assert ray_profile.metrics_port(http) == metrics


def test_ready_only_once_serve_run_returned_with_every_replica_up():
    assert ray_profile.PROFILE.ready_path == "/tokenbench/ready"
    program = ray_profile.PROGRAM
    assert program.index("blocking=False") < program.index('route_prefix=c["ready_path"], blocking=True')


def test_metrics_are_on_the_ray_export_port():
    assert ray_profile.metrics_url(spec()) == "http://127.0.0.1:8301/metrics"
    m = ray_profile.PROFILE.metrics
    assert m.running[0] == "ray_vllm_num_requests_running"
    assert m.generated_tokens[0] == "ray_vllm_generation_tokens_total"
    assert ray_profile.PROFILE.version_package == "ray"


def relay_spec(*engine_args: str, executable=None) -> LaunchSpec:
    return LaunchSpec(
        model="/models/smol.gguf",
        served_name="smol",
        host="127.0.0.1",
        port=8300,
        knobs=EngineKnobs(max_num_seqs=4, engine_args=engine_args, engine_env={"K": "V"}),
        executable=executable,
        upstream_url="http://127.0.0.1:9000",
        upstream_model="smol-engine",
    )


def test_with_an_upstream_the_local_command_is_the_serve_relay_app():
    launch = ray_profile.local(relay_spec())
    assert launch.argv[:3] == (sys.executable, "-m", "tokenbench.backends.ray_serve_app")
    assert json.loads(launch.argv[3]) == {
        "host": "127.0.0.1",
        "port": 8300,
        "metrics_port": 8301,
        "max_ongoing_requests": 1_000_000_000,  # Ray Serve LLM's ingress default, not Serve's 5
        "relay": {
            "upstream_url": "http://127.0.0.1:9000",
            "upstream_model": "smol-engine",
            "served_name": "smol",
            "batch_interval_ms": 0.0,
            "timeout_s": 3600.0,
        },
    }
    assert launch.env == {"RAY_metrics_report_interval_ms": "1000", "K": "V"}
    assert ServeConfig.from_json(launch.argv[3]) == ray_profile.relay_config(relay_spec())


def test_relay_knobs_come_from_engine_args_and_the_interpreter_from_engine_bin():
    launch = ray_profile.local(
        relay_spec("stream_batching_interval_ms=50", "max_ongoing_requests=8", executable="/venv/bin/python")
    )
    assert launch.argv[:2] == ("/venv/bin/python", "-m")
    config = ServeConfig.from_json(launch.argv[3])
    assert (config.relay.batch_interval_ms, config.max_ongoing_requests) == (50.0, 8)


@pytest.mark.parametrize(
    "arg", ["--parallel=4", "max_num_seqs=4", "stream_batching_interval_ms=fast", "max_ongoing_requests"]
)
def test_relay_refuses_engine_args_it_does_not_take(arg):
    with pytest.raises(BackendError, match="stream_batching_interval_ms, max_ongoing_requests"):
        ray_profile.local(relay_spec(arg))


def test_batch_interval_key_sets_the_llm_configs_experimental_config():
    config = json.loads(ray_profile.local(spec(engine_args=("stream_batching_interval_ms=0",))).argv[3])
    assert config["llm_config"]["experimental_configs"] == {"stream_batching_interval_ms": 0}
    assert "stream_batching_interval_ms" not in config["llm_config"]["engine_kwargs"]


def test_relay_series_seen_on_a_live_serve_app_are_mapped():
    m = ray_profile.PROFILE.metrics
    assert "ray_serve_replica_processing_queries" in m.running
    assert "ray_serve_deployment_queued_queries" in m.waiting
