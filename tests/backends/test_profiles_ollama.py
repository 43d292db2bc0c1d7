"""Ollama profile: `ollama serve` configured by environment variables, locally and in a container."""

import pytest

from tokenbench.backends import ollama
from tokenbench.backends.base import LaunchSpec
from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError

MODEL = "llama3.2:3b"


def spec(port=11500, **knobs) -> LaunchSpec:
    return LaunchSpec(model=MODEL, served_name=MODEL, host="127.0.0.1", port=port, knobs=EngineKnobs(**knobs))


KNOBS = dict(max_num_seqs=8, max_model_len=4096, engine_env={"OLLAMA_KV_CACHE_TYPE": "q8_0"})


def test_local_knobs_land_in_env():
    launch = ollama.local(spec(**KNOBS))
    assert launch.argv == ("ollama", "serve")
    assert launch.env == {
        "OLLAMA_HOST": "127.0.0.1:11500",
        "OLLAMA_KEEP_ALIVE": "-1",
        "OLLAMA_NUM_PARALLEL": "8",
        "OLLAMA_CONTEXT_LENGTH": "4096",
        "OLLAMA_KV_CACHE_TYPE": "q8_0",
    }
    assert all(isinstance(v, str) for v in launch.env.values())


def test_engine_env_overrides_the_defaults():
    env = ollama.local(spec(engine_env={"OLLAMA_KEEP_ALIVE": "10m"})).env
    assert env["OLLAMA_KEEP_ALIVE"] == "10m"


def test_engine_args_are_appended():
    assert ollama.local(spec(engine_args=("--verbose",))).argv == ("ollama", "serve", "--verbose")


def test_container_passes_env_with_e_and_binds_all_inside():
    launch = ollama.container(spec(**KNOBS))
    assert launch.argv == (
        "docker",
        "run",
        "--rm",
        "--ipc=host",
        "-p",
        "127.0.0.1:11500:11500",
        "--gpus",
        "all",
        "-v",
        "ollama:/root/.ollama",
        "-e",
        "OLLAMA_HOST=0.0.0.0:11500",
        "-e",
        "OLLAMA_KEEP_ALIVE=-1",
        "-e",
        "OLLAMA_NUM_PARALLEL=8",
        "-e",
        "OLLAMA_CONTEXT_LENGTH=4096",
        "-e",
        "OLLAMA_KV_CACHE_TYPE=q8_0",
        ollama.IMAGE,
        "serve",
    )
    assert launch.env == {}


def test_container_engine_env_override_appears_once():
    argv = ollama.container(spec(engine_env={"OLLAMA_KEEP_ALIVE": "10m"})).argv
    assert [a for a in argv if a.startswith("OLLAMA_KEEP_ALIVE=")] == ["OLLAMA_KEEP_ALIVE=10m"]


@pytest.mark.parametrize(
    "knobs", [dict(kv_memory=0.9), dict(prefix_caching=True), dict(tensor_parallel=2), dict(quantization="q4_K_M")]
)
def test_unmapped_knobs_name_the_pass_through(knobs):
    with pytest.raises(BackendError, match="--engine-arg"):
        ollama.local(spec(**knobs))


def test_quantization_points_at_the_model_tag_and_kv_cache_type():
    with pytest.raises(BackendError, match="OLLAMA_KV_CACHE_TYPE"):
        ollama.local(spec(quantization="q8_0"))


def test_profile_has_no_prometheus_and_no_ignore_eos():
    p = ollama.PROFILE
    assert p.metrics is None and p.ignore_eos is False
    assert p.apis == ("ollama", "chat", "completions")
    assert (p.ready_path, p.version_path, p.version_field) == ("/api/version", "/api/version", "version")
