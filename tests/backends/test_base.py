"""backends/base.py: docker_run publishes on 127.0.0.1 only and removes the container, exe()
splits --engine-bin like a shell, knob_flags maps values and switches or names --engine-arg,
in_container's mounts, and the defaults of LaunchSpec, MetricNames and Profile."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenbench.backends.base import Launch, LaunchSpec, MetricNames, Profile, docker_run, exe, in_container, knob_flags
from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError


def _spec(model: str = "org/model", executable: str | None = None, **knobs) -> LaunchSpec:
    return LaunchSpec(
        model=model, served_name="s", host="127.0.0.1", port=4000, knobs=EngineKnobs(**knobs), executable=executable
    )


def test_docker_run_publishes_on_loopback_only_with_rm():
    spec = _spec(engine_env={"B": "2"})
    launch = docker_run(spec, "img:1", ["--x", "1"], ["-v", "/a:/b"], env={"A": "1"}, extra_ports=(4001,))
    assert list(launch.argv) == [
        "docker",
        "run",
        "--rm",
        "--ipc=host",
        "-p",
        "127.0.0.1:4000:4000",
        "-p",
        "127.0.0.1:4001:4001",
        "--gpus",
        "all",
        "-v",
        "/a:/b",
        "-e",
        "A=1",
        "-e",
        "B=2",
        "img:1",
        "--x",
        "1",
    ]
    published = [launch.argv[i + 1] for i, a in enumerate(launch.argv) if a == "-p"]
    assert all(p.startswith("127.0.0.1:") for p in published)
    assert dict(launch.env) == {}


def test_docker_run_without_gpus_and_user_env_wins():
    launch = docker_run(_spec(engine_env={"A": "user"}), "img", [], [], gpus=False, env={"A": "profile"})
    assert "--gpus" not in launch.argv
    assert list(launch.argv) == [
        "docker",
        "run",
        "--rm",
        "--ipc=host",
        "-p",
        "127.0.0.1:4000:4000",
        "-e",
        "A=user",
        "img",
    ]


def test_exe_splits_engine_bin_like_a_shell():
    assert exe(_spec(), ["vllm", "serve"]) == ["vllm", "serve"]
    spec = _spec(executable="\"/my venv/bin/python\" -m vllm.entrypoints.cli.main serve --x='a b'")
    assert exe(spec, ["vllm", "serve"]) == [
        "/my venv/bin/python",
        "-m",
        "vllm.entrypoints.cli.main",
        "serve",
        "--x=a b",
    ]
    assert exe(_spec(executable="a; rm -rf /"), []) == ["a;", "rm", "-rf", "/"]  # words, never a shell


def test_knob_flags_values_switches_and_floats():
    knobs = EngineKnobs(max_num_seqs=8, kv_memory=0.5, prefix_caching=True)
    values = {"max_num_seqs": "--seqs", "kv_memory": "--mem"}
    switches = {"prefix_caching": ("--cache", "--no-cache")}
    assert knob_flags(knobs, "E", values, switches) == ["--seqs", "8", "--mem", "0.5", "--cache"]
    off = EngineKnobs(prefix_caching=False)
    assert knob_flags(off, "E", {}, switches) == ["--no-cache"]
    assert knob_flags(EngineKnobs(engine_args=("--x",), engine_env={"A": "1"}), "E", {}) == []  # not knobs


def test_knob_flags_refuses_unmapped_knobs_naming_the_flag_and_engine_arg():
    with pytest.raises(BackendError) as info:
        knob_flags(EngineKnobs(tensor_parallel=4), "Eng", {})
    assert str(info.value) == (
        "Eng has no native flag for --tensor-parallel=4; drop it, or pass the engine's own flag with --engine-arg"
    )
    with pytest.raises(BackendError, match="--prefix-caching/--no-prefix-caching=False.*--engine-arg"):
        knob_flags(EngineKnobs(prefix_caching=False), "Eng", {}, {"prefix_caching": ("--on", None)})


def test_in_container_hub_id_file_and_folder(tmp_path):
    inside, volumes = in_container(_spec(executable="x"))
    assert (inside.model, inside.host, inside.executable, inside.port) == ("org/model", "0.0.0.0", None, 4000)
    assert volumes == ["-v", f"{Path.home() / '.cache/huggingface'}:/root/.cache/huggingface"]

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"x")
    inside, volumes = in_container(_spec(model=str(gguf)), mount="/w")
    assert inside.model == "/w/m.gguf"
    assert volumes == ["-v", f"{tmp_path.resolve()}:/w:ro"]

    inside, volumes = in_container(_spec(model=str(tmp_path)))
    assert inside.model == "/model"
    assert volumes == ["-v", f"{tmp_path.resolve()}:/model:ro"]


def test_launch_spec_metric_names_and_profile_defaults():
    spec = LaunchSpec(model="m", served_name="m", host="h", port=1, knobs=EngineKnobs())
    assert spec.executable is None
    assert Launch(("a",)).env == {}
    names = MetricNames()
    assert names.path == "/metrics" and names.kv_usage_scale == 1.0 and names.histogram_scale == 1.0
    assert set(names.fields()) == {
        "running",
        "waiting",
        "kv_usage",
        "preemptions",
        "prefix_cache_hits",
        "prefix_cache_queries",
        "prompt_tokens_computed",
        "generated_tokens",
        "requests_finished",
        "spec_drafts",
        "spec_draft_tokens",
        "spec_accepted_tokens",
        "requests",
    }
    assert all(v == () for v in names.fields().values()) and names.spec_accepted_by_position == ()
    assert names.routed_requests_by_worker == ()
    assert names.histograms() == {"ttft": (), "itl": ()}
    profile = Profile(
        name="p",
        title="P",
        apis=("chat", "completions"),
        default_port=1,
        ready_path="/h",
        local=lambda s: Launch(()),
        container=lambda s: Launch(()),
        metrics=None,
    )
    assert profile.default_api == "chat"
    assert profile.ignore_eos is True and profile.prepare is None and profile.metrics_url is None
    assert profile.cold_start_includes == "process start and model load"
