"""LoRA adapters for a Hugging Face causal LM, made from random weights (tokenbench the
`lora` preset and tests/e2e/test_lora_live.py measure serving cost, not quality).

PEFT's layout, one directory per name: adapter_config.json + adapter_model.safetensors, rank R on
q_proj and v_proj of every layer, shapes from the model's config.json. Run with a Python that has
torch and safetensors (the vLLM CPU venv):

    .cache/vllm-venv/bin/python scripts/make_lora_adapters.py MODEL_DIR OUT_DIR l0 l1 l2 l3 [--rank 8]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import save_file


def make(model: Path, path: Path, seed: int, rank: int) -> None:
    cfg = json.loads((model / "config.json").read_text())
    hidden, heads, kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or hidden // heads
    widths = {"q_proj": heads * head_dim, "v_proj": kv * head_dim}
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for i in range(cfg["num_hidden_layers"]):
        for name, width in widths.items():
            key = f"base_model.model.model.layers.{i}.self_attn.{name}"
            tensors[f"{key}.lora_A.weight"] = (torch.randn(rank, hidden, generator=g) * 0.01).contiguous()
            tensors[f"{key}.lora_B.weight"] = (torch.randn(width, rank, generator=g) * 0.01).contiguous()
    path.mkdir(parents=True, exist_ok=True)
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": 2 * rank,
        "lora_dropout": 0.0,
        "target_modules": list(widths),
        "bias": "none",
        "fan_in_fan_out": False,
        "modules_to_save": None,
        "base_model_name_or_path": str(model),
    }
    (path / "adapter_config.json").write_text(json.dumps(config))
    save_file(tensors, str(path / "adapter_model.safetensors"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("names", nargs="+")
    parser.add_argument("--rank", type=int, default=8)
    args = parser.parse_args()
    for seed, name in enumerate(args.names):
        make(args.model, args.out / name, seed, args.rank)
        print(args.out / name)


if __name__ == "__main__":
    main()
