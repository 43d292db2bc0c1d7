"""vLLM profile: exact local and container commands for given knobs, unmapped knobs refused naming
--engine-arg, --engine-bin in place of `vllm serve`, and the cited metric names."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenbench.backends import PROFILES, vllm
from tokenbench.backends.base import LaunchSpec
from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError

PROFILE = vllm.PROFILE


class _FutureKnobs(EngineKnobs):
    speculative_tokens: int | None = None  # a knob vLLM's mapping does not know


def _spec(model: str = "org/model", executable: str | None = None, **knobs) -> LaunchSpec:
    return LaunchSpec(
        model=model,
        served_name="served",
        host="127.0.0.1",
        port=8123,
        knobs=EngineKnobs(**knobs),
        executable=executable,
    )


KNOBS = dict(
    max_num_seqs=64,
    kv_memory=0.85,
    max_model_len=4096,
    prefix_caching=False,
    quantization="fp8",
    tensor_parallel=2,
    engine_args=("--enforce-eager",),
    engine_env={"VLLM_CPU_KVCACHE_SPACE": "2"},
)
MAPPED = [
    "--max-num-seqs",
    "64",
    "--gpu-memory-utilization",
    "0.85",
    "--max-model-len",
    "4096",
    "--no-enable-prefix-caching",
    "--quantization",
    "fp8",
    "--tensor-parallel-size",
    "2",
    "--enforce-eager",
]


def _head(model: str, host: str) -> list[str]:
    return ["--model", model, "--host", host, "--port", "8123", "--served-model-name", "served"]


def test_local_command():
    launch = PROFILE.local(_spec(**KNOBS))
    assert list(launch.argv) == ["vllm", "serve", *_head("org/model", "127.0.0.1"), *MAPPED]
    # dev mode mounts POST /reset_prefix_cache (--prefix-cache reset)
    assert dict(launch.env) == {"VLLM_SERVER_DEV_MODE": "1", "VLLM_CPU_KVCACHE_SPACE": "2"}
    assert all(isinstance(a, str) for a in launch.argv)


def test_no_knobs_gives_only_the_address_and_model():
    launch = PROFILE.local(_spec())
    assert list(launch.argv) == ["vllm", "serve", *_head("org/model", "127.0.0.1")]
    assert dict(launch.env) == {"VLLM_SERVER_DEV_MODE": "1"}


def test_the_users_engine_env_wins_over_dev_mode():
    assert dict(PROFILE.local(_spec(engine_env={"VLLM_SERVER_DEV_MODE": "0"})).env) == {"VLLM_SERVER_DEV_MODE": "0"}


def test_prefix_caching_on_is_its_own_switch():
    argv = list(PROFILE.local(_spec(prefix_caching=True)).argv)
    assert argv[-1] == "--enable-prefix-caching"
    assert "--no-enable-prefix-caching" not in argv


def test_engine_bin_replaces_vllm_serve_split_like_a_shell():
    exe = "'/opt/my venv/bin/python' -m vllm.entrypoints.launchers.api_server.entry"
    argv = list(PROFILE.local(_spec(executable=exe)).argv)
    assert argv[:3] == ["/opt/my venv/bin/python", "-m", "vllm.entrypoints.launchers.api_server.entry"]
    assert argv[3:] == _head("org/model", "127.0.0.1")


def test_container_command_hub_model():
    launch = PROFILE.container(_spec(executable="ignored in a container", **KNOBS))
    hf = Path.home() / ".cache/huggingface"
    assert list(launch.argv) == [
        "docker",
        "run",
        "--rm",
        "--ipc=host",
        "-p",
        "127.0.0.1:8123:8123",
        "--gpus",
        "all",
        "-v",
        f"{hf}:/root/.cache/huggingface",
        "-e",
        "VLLM_SERVER_DEV_MODE=1",
        "-e",
        "VLLM_CPU_KVCACHE_SPACE=2",
        "vllm/vllm-openai:latest",
        *_head("org/model", "0.0.0.0"),
        *MAPPED,
    ]


def test_container_mounts_a_local_model_folder_read_only(tmp_path):
    launch = PROFILE.container(_spec(model=str(tmp_path)))
    argv = list(launch.argv)
    assert argv[argv.index("-v") + 1] == f"{tmp_path.resolve()}:/model:ro"
    assert argv[argv.index("--model") + 1] == "/model"


def test_unknown_knob_names_the_pass_through():
    spec = LaunchSpec(model="m", served_name="m", host="127.0.0.1", port=1, knobs=_FutureKnobs(speculative_tokens=4))
    with pytest.raises(BackendError, match="--engine-arg") as info:
        PROFILE.local(spec)
    assert "vLLM" in str(info.value) and "speculative_tokens=4" in str(info.value)


def test_metric_names_and_identity():
    m = PROFILE.metrics
    assert m is not None and m.path == "/metrics"
    assert m.running == ("vllm:num_requests_running",)
    assert m.waiting == ("vllm:num_requests_waiting",)
    assert m.kv_usage == ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # V1 name first
    assert m.kv_usage_scale == 1.0  # a 0..1 fraction despite "perc"
    assert m.preemptions == ("vllm:num_preemptions_total",)
    assert m.generated_tokens == ("vllm:generation_tokens_total",)
    assert m.histograms() == {
        "ttft": ("vllm:time_to_first_token_seconds",),
        "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    }
    assert PROFILES["vllm"] is PROFILE
    assert (PROFILE.default_api, PROFILE.default_port, PROFILE.ready_path) == ("completions", 8000, "/health")
    assert (PROFILE.version_path, PROFILE.version_field) == ("/version", "version")


def test_usage_on_every_chunk_is_asked_of_vllm_and_sglang_only():
    """Their OpenAI servers read stream_options.continuous_usage_stats; no other profile's is
    known to (an unknown field is a 400 on some: TRT-LLM's request models forbid extras)."""
    assert {name for name, p in PROFILES.items() if p.continuous_usage} == {"vllm", "sglang"}
