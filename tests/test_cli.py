"""Bad input gets a clear error naming what to fix, and a non-zero exit before any load."""

import pytest
from typer.testing import CliRunner

from tokenbench.cli import app


@pytest.mark.parametrize("args,needle", [
    (["--users", "2", "--rate", "1"], "not both"),
    (["--users", "two"], "--users takes a comma-separated list"),
    (["--users", "2"], "--duration and/or --max-requests"),
    (["--users", "2", "--duration", "5", "--ramp-up", "10"], "longer than --ramp-up"),
    (["--users", "2", "--duration", "5", "--slo", "ttft:5"], "--slo part"),
    (["--users", "2", "--duration", "5", "--dataset", "nope"], "dataset"),
    (["--users", "0", "--duration", "5"], "users"),
    (["--rate", "1", "--duration", "5", "--arrival", "sometimes"], "arrival"),
    (["--url", "localhost:8000", "--users", "1", "--duration", "5"], "--url must look like"),
])
def test_bad_flags_exit_2_with_a_message(args, needle):
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == 2, result.output
    assert needle in result.output


def test_missing_dataset_file_is_named(tmp_path, start_mock):
    url = start_mock()
    result = CliRunner().invoke(app, ["run", "--url", url, "--users", "1", "--max-requests", "1",
                                      "--dataset", "jsonl", "--dataset-path", str(tmp_path / "none.jsonl"),
                                      "--out", str(tmp_path / "out"), "--no-live"])
    assert result.exit_code == 2 and "none.jsonl" in result.output


@pytest.mark.parametrize("args,needle", [
    (["--backend", "nosuch", "--model", "m"], "not a known backend"),
    (["--backend", "vllm"], "pass --model"),
    (["--backend", "ollama", "--model", "m", "--prefix-caching"], "--engine-arg"),
    (["--backend", "vllm", "--model", "m", "--kv-memory", "1.5"], "--kv-memory"),
    (["--url", "http://127.0.0.1:1", "--max-num-seqs", "4"], "launched"),
    (["--backend", "vllm", "--model", "m", "--engine-env", "NOEQUALS"], "KEY=VALUE"),
])
def test_bad_backend_flags_exit_2_before_launch(args, needle):
    result = CliRunner().invoke(app, ["run", *args, "--users", "1", "--duration", "5"])
    assert result.exit_code == 2, result.output
    assert needle in result.output


def test_backends_lists_every_profile():
    from tokenbench.backends import PROFILES

    result = CliRunner().invoke(app, ["backends"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert len(PROFILES) >= 10
    for name in PROFILES:
        assert name in result.output


def test_backends_show_prints_the_exact_command():
    result = CliRunner().invoke(app, ["backends", "show", "vllm", "--model", "Qwen/Qwen2.5-0.5B",
                                      "--max-num-seqs", "64", "--kv-memory", "0.8",
                                      "--engine-arg=--enforce-eager"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first == ("vllm serve --model Qwen/Qwen2.5-0.5B --host 127.0.0.1 --port 8000 --served-model-name "
                     "Qwen/Qwen2.5-0.5B --max-num-seqs 64 --gpu-memory-utilization 0.8 --enforce-eager")
    assert "vllm:num_preemptions_total" in result.output  # what it knows: the metric mapping


def test_backends_show_container_and_env_knobs():
    result = CliRunner().invoke(app, ["backends", "show", "ollama", "--model", "smollm2:135m",
                                      "--max-num-seqs", "4", "--container"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("docker run") and "127.0.0.1:11434:11434" in first
    assert "OLLAMA_NUM_PARALLEL=4" in first


def test_backends_show_masks_credentials():
    result = CliRunner().invoke(app, ["backends", "show", "vllm", "--model", "m", "--engine-env", "HF_TOKEN=hf_secretsecret1",
                                      "--engine-arg=--api-key", "--engine-arg=sk-secretsecret2"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "secretsecret" not in result.output
    assert "HF_TOKEN='***'" in result.output or "HF_TOKEN=***" in result.output
    assert "--api-key '***'" in result.output


def test_backends_show_refuses_an_unmappable_knob():
    result = CliRunner().invoke(app, ["backends", "show", "llamacpp", "--quantization", "awq"])
    assert result.exit_code == 2 and "GGUF" in result.output


@pytest.mark.parametrize("args,needle", [
    (["experiment", "run"], "FILE or --preset"),
    (["experiment", "run", "--preset", "nosuch"], "choose one of"),
    (["experiment", "run", "--preset", "users", "--scale", "medium"], "--scale must be small or full"),
    (["experiment", "run", "/nonexistent/exp.yaml"], "no such experiment file"),
    (["experiment", "presets", "--show", "nosuch"], "choose one of"),
    (["report", "/nonexistent/dir"], "not a run directory"),
    (["compare", "/nonexistent/a"], "at least two"),
])
def test_bad_experiment_and_report_input_exit_2(args, needle):
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert needle in result.output
