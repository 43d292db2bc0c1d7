"""The lora preset at ci scale on vLLM CPU: one vLLM launch serving four random
rank-8 adapters (made where the preset looks for them when they are not there yet), the same load
sent to one adapter and spread over four; by_adapter breaks each cell out. (What test_lora_live.py
asserted on a launch of its own is folded in here: the profile's LoRA flags, every token generated.)"""

import json

import pytest
from lora_adapters import make_adapters
from preset_helpers import ROOT, experiment

from tokenbench.experiments import presets

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def study(tmp_path_factory, vllm_cpu):
    """Its own launch: the LoRA flags it renders are asserted (the results' command), and an engine
    with LoRA enabled is not the one the other modules measure."""
    adapters = ROOT / presets.VLLM_CPU_LORA_DIR
    if not all((adapters / n / "adapter_config.json").exists() for n in presets.LORA_ADAPTERS):
        make_adapters(vllm_cpu.python, vllm_cpu.model, adapters, list(presets.LORA_ADAPTERS))
    return experiment(tmp_path_factory, "lora")


def test_one_adapter_and_four_each_serve_every_request_and_break_out_by_adapter(study):
    out, state = study
    cells = {c["variant"]: c for c in state["cells"].values()}
    assert set(cells) == {"one-adapter", "four-adapters"} and all(c["status"] == "ok" for c in cells.values())
    for variant, names in (("one-adapter", {"l0"}), ("four-adapters", set(presets.LORA_ADAPTERS))):
        point = json.loads((out / cells[variant]["run_dir"] / "results.json").read_text())["points"][0]
        assert set(point["by_adapter"]) <= names and "l0" in point["by_adapter"]
        assert point["requests"]["ok"] > 0 and point["output_tokens_per_s"] > 0
        records = (out / cells[variant]["run_dir"] / "records.jsonl").read_text().splitlines()
        sent = {json.loads(line)["adapter"] for line in records}
        assert sent <= names and len(sent) >= min(2, len(names))  # a few seconds: not every adapter's turn
        outcomes = [json.loads(line)["outcome"] for line in records]
        assert set(outcomes) <= {"ok", "cancelled", "not_sent"}, variant  # every adapter served its requests
        ok = [json.loads(line) for line in records if json.loads(line)["outcome"] == "ok"]
        assert ok and all(r["output_tokens"] == 32 for r in ok)  # ignore_eos: the adapter generated every token
    results = json.loads((out / cells["four-adapters"]["run_dir"] / "results.json").read_text())
    command = " ".join(results["target"]["command"])
    assert (
        "--enable-lora" in command and "--max-loras 4" in command and f"--max-lora-rank {presets.LORA_RANK}" in command
    )
