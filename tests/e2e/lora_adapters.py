"""LoRA adapters for SmolLM2-135M made at test time by
scripts/make_lora_adapters.py, run with the vLLM venv's Python (it has torch and safetensors; the
main venv does not): rank 8 on q_proj and v_proj of every layer, small random weights (the tests
measure serving cost, not quality)."""

from __future__ import annotations

import subprocess
from pathlib import Path

RANK = 8
SCRIPT = Path(__file__).resolve().parents[2] / "scripts/make_lora_adapters.py"


def make_adapters(venv_python: Path, model: Path, out: Path, names: list[str]) -> dict[str, Path]:
    """One adapter directory per name under ``out`` (seeded by its index): name -> its path."""
    subprocess.run(
        [str(venv_python), str(SCRIPT), str(model), str(out), *names, "--rank", str(RANK)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return {name: out / name for name in names}
