"""tokenbench backends: the list, and show: the exact command a launch would run, masked."""

from typer.testing import CliRunner

from tokenbench.cli import app


def test_backends_lists_every_profile():
    from tokenbench.backends import PROFILES

    result = CliRunner().invoke(app, ["backends"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for name in PROFILES:
        assert name in result.output


def test_backends_show_prints_the_exact_command():
    result = CliRunner().invoke(
        app,
        [
            "backends",
            "show",
            "vllm",
            "--model",
            "Qwen/Qwen2.5-0.5B",
            "--max-num-seqs",
            "64",
            "--kv-memory",
            "0.8",
            "--engine-arg=--enforce-eager",
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first == (  # dev mode mounts POST /reset_prefix_cache (--prefix-cache reset)
        "VLLM_SERVER_DEV_MODE=1 vllm serve --model Qwen/Qwen2.5-0.5B --host 127.0.0.1 --port 8000 --served-model-name "
        "Qwen/Qwen2.5-0.5B --max-num-seqs 64 --gpu-memory-utilization 0.8 --enforce-eager"
    )
    assert "vllm:num_preemptions_total" in result.output  # what it knows: the metric mapping


def test_backends_show_container_and_env_knobs():
    result = CliRunner().invoke(
        app,
        ["backends", "show", "ollama", "--model", "smollm2:135m", "--max-num-seqs", "4", "--container"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("docker run") and "127.0.0.1:11434:11434" in first
    assert "OLLAMA_NUM_PARALLEL=4" in first


def test_backends_show_masks_credentials():
    result = CliRunner().invoke(
        app,
        [
            "backends",
            "show",
            "vllm",
            "--model",
            "m",
            "--engine-env",
            "HF_TOKEN=hf_secretsecret1",
            "--engine-arg=--api-key",
            "--engine-arg=sk-secretsecret2",
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "secretsecret" not in result.output
    assert "HF_TOKEN='***'" in result.output or "HF_TOKEN=***" in result.output
    assert "--api-key '***'" in result.output


def test_backends_show_refuses_an_unmappable_knob():
    result = CliRunner().invoke(app, ["backends", "show", "llamacpp", "--quantization", "awq"])
    assert result.exit_code == 2 and "GGUF" in result.output


def test_backends_show_a_router_with_two_replicas_on_the_engines_ports():
    result = CliRunner().invoke(app, ["backends", "show", "vllm-router"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.endswith(
        "vllm-router --worker-urls http://127.0.0.1:8080 http://127.0.0.1:8081 --policy round_robin --disable-retries "
        "--host 127.0.0.1 --port 30000 --prometheus-host 127.0.0.1 --prometheus-port 30001 "
        "--worker-startup-check-interval 1"
    )
    assert "routed_requests@HOST:PORT" in result.output and "vllm_router_processed_requests_total" in result.output
