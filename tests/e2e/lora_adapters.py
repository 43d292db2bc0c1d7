"""LoRA adapters for SmolLM2-135M made at test time (issue 23 routing): PEFT's layout
(adapter_config.json + adapter_model.safetensors), rank 8 on q_proj and v_proj of every layer,
small random weights (the tests measure serving cost, not quality). Written by the vLLM venv's
Python, which has the ``safetensors`` package (the main venv does not)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

RANK = 8

_WRITE = """
import json, sys
import torch
from safetensors.torch import save_file
model, out, seed, rank = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cfg = json.load(open(model + "/config.json"))
hidden, heads, kv, layers = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
head_dim = cfg.get("head_dim") or hidden // heads
outs = {"q_proj": heads * head_dim, "v_proj": kv * head_dim}
g = torch.Generator().manual_seed(seed)
tensors = {}
for i in range(layers):
    for name, width in outs.items():
        key = f"base_model.model.model.layers.{i}.self_attn.{name}"
        tensors[key + ".lora_A.weight"] = (torch.randn(rank, hidden, generator=g) * 0.01).contiguous()
        tensors[key + ".lora_B.weight"] = (torch.randn(width, rank, generator=g) * 0.01).contiguous()
save_file(tensors, out + "/adapter_model.safetensors")
"""


def make_adapters(venv_python: Path, model: Path, out: Path, names: list[str]) -> dict[str, Path]:
    """One adapter directory per name under ``out`` (seeded by its index): name -> its path."""
    made = {}
    for seed, name in enumerate(names):
        path = out / name
        path.mkdir(parents=True, exist_ok=True)
        config = {
            "peft_type": "LORA",
            "task_type": "CAUSAL_LM",
            "r": RANK,
            "lora_alpha": 2 * RANK,
            "lora_dropout": 0.0,
            "target_modules": ["q_proj", "v_proj"],
            "bias": "none",
            "fan_in_fan_out": False,
            "modules_to_save": None,
            "base_model_name_or_path": str(model),
        }
        (path / "adapter_config.json").write_text(json.dumps(config))
        subprocess.run(
            [str(venv_python), "-c", _WRITE, str(model), str(path), str(seed), str(RANK)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        made[name] = path
    return made
