"""Triton + TensorRT-LLM profile: tritonserver argv, the separate metrics port, and knobs refused
with the fill_template.py command that sets them in config.pbtxt."""

import pytest

from tokenbench.backends import triton
from tokenbench.backends.base import LaunchSpec
from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError


def spec(model="/srv/repo", port=8000, **knobs) -> LaunchSpec:
    return LaunchSpec(model=model, served_name="ensemble", host="127.0.0.1", port=port, knobs=EngineKnobs(**knobs))


def server_flags(host, port, repo):
    return [
        f"--model-repository={repo}",
        f"--http-address={host}",
        f"--http-port={port}",
        f"--grpc-address={host}",
        f"--grpc-port={port + 1}",
        f"--metrics-address={host}",
        f"--metrics-port={port + 2}",
        "--metrics-config=histogram_latencies=true",
    ]


def test_local_argv_binds_every_listener_to_loopback():
    launch = triton.local(spec(port=9100, engine_args=("--log-verbose=1",), engine_env={"CUDA_VISIBLE_DEVICES": "0"}))
    assert launch.argv == ("tritonserver", *server_flags("127.0.0.1", 9100, "/srv/repo"), "--log-verbose=1")
    assert all(isinstance(a, str) for a in launch.argv)
    assert launch.env == {"CUDA_VISIBLE_DEVICES": "0"}


def test_container_publishes_http_and_metrics_ports_on_loopback(tmp_path):
    launch = triton.container(spec(model=str(tmp_path), port=9100, engine_env={"CUDA_VISIBLE_DEVICES": "0"}))
    assert launch.argv == (
        "docker",
        "run",
        "--rm",
        "--ipc=host",
        "-p",
        "127.0.0.1:9100:9100",
        "-p",
        "127.0.0.1:9102:9102",
        "--gpus",
        "all",
        "-v",
        f"{tmp_path.resolve()}:/model:ro",
        "-e",
        "CUDA_VISIBLE_DEVICES=0",
        triton.IMAGE,
        "tritonserver",
        *server_flags("0.0.0.0", 9100, "/model"),
    )


def test_metrics_url_is_the_metrics_port():
    assert triton.metrics_url(spec(port=9100)) == "http://127.0.0.1:9102/metrics"
    m = triton.PROFILE.metrics
    assert m.histogram_scale == 0.001  # nv_inference_first_response_histogram_ms
    assert m.running == ('nv_trt_llm_request_metrics{request_type="active"}',)
    assert m.kv_usage == ('nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"}',)


def test_config_knobs_are_refused_with_the_fill_template_command():
    with pytest.raises(BackendError) as err:
        triton.local(spec(max_num_seqs=64, kv_memory=0.9, prefix_caching=True))
    message = str(err.value)
    assert (
        "python3 tools/fill_template.py -i /srv/repo/tensorrt_llm/config.pbtxt "
        "triton_max_batch_size:64,kv_cache_free_gpu_mem_fraction:0.9,enable_kv_cache_reuse:true"
    ) in message
    assert "--engine-arg" in message


@pytest.mark.parametrize("knobs", [dict(max_model_len=4096), dict(quantization="fp8"), dict(tensor_parallel=2)])
def test_build_time_knobs_are_refused(knobs):
    with pytest.raises(BackendError, match="--engine-arg") as err:
        triton.local(spec(**knobs))
    assert "fill_template" not in str(err.value)


def test_fill_template_argv():
    knobs = EngineKnobs(prefix_caching=False, max_num_seqs=8)
    assert triton.fill_template_argv(knobs, "/srv/repo/") == [
        "python3",
        "tools/fill_template.py",
        "-i",
        "/srv/repo/tensorrt_llm/config.pbtxt",
        "triton_max_batch_size:8,enable_kv_cache_reuse:false",
    ]
    assert triton.fill_template_argv(EngineKnobs(), "/srv/repo") == []


def test_profile_endpoints():
    p = triton.PROFILE
    assert p.apis == ("triton",) and p.ready_path == "/v2/models/{served_name}/ready"
    assert (p.version_path, p.version_field) == ("/v2", "version")


def test_in_front_of_an_engine_it_renders_pytriton_serving_the_relay_model(monkeypatch, tmp_path):
    python = tmp_path / "python"
    python.touch()
    monkeypatch.setenv("TOKENBENCH_TRITON_PYTHON", str(python))
    layered = LaunchSpec(
        model="/m.gguf",
        served_name="ensemble",
        host="127.0.0.1",
        port=9100,
        knobs=EngineKnobs(),
        upstream_url="http://127.0.0.1:7000",
        upstream_model="smol",
    )
    assert triton.local(layered).argv == (
        str(python),
        str(triton.MODEL_FILE),
        "--host=127.0.0.1",
        "--http-port=9100",
        "--grpc-port=9101",
        "--metrics-port=9102",
        "--upstream-url=http://127.0.0.1:7000",
        "--upstream-model=smol",
        "--model-name=ensemble",
        "--metrics-config=histogram_latencies=true",
    )
    assert triton.MODEL_FILE.exists() and triton.PROFILE.ready_url_path(layered) == "/v2/models/ensemble/ready"
    monkeypatch.setenv("TOKENBENCH_TRITON_PYTHON", str(tmp_path / "missing"))
    with pytest.raises(BackendError, match="scripts/setup_triton.sh"):
        triton.local(layered)


def test_it_is_a_layer_over_the_embedded_llamacpp_by_default():
    p = triton.PROFILE
    assert (p.layer, p.default_upstream, p.default_served_name) == (True, "llamacpp", "ensemble")
    # the live model's only queue gauge, after TensorRT-LLM's own
    assert p.metrics.waiting[-1] == "nv_inference_pending_request_count"
