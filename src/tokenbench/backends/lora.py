"""LoRA serving knobs -> each engine's own flags: ``--lora-modules NAME=PATH``
(repeat), ``--enable-lora``, ``--max-loras``, ``--max-lora-rank``. An engine without a flag for a
knob that is set refuses it, naming ``--engine-arg``.

Sources:
- vLLM: vllm/engine/arg_utils.py (``--enable-lora``, ``--max-loras``, ``--max-lora-rank``) and
  vllm/entrypoints/launchers/cli_args.py (``--lora-modules name=path ...``, nargs "+"). A request
  reaches an adapter by its name as ``model``.
- SGLang: python/sglang/srt/server_args.py (``--enable-lora``, ``--lora-paths name=path ...``,
  ``--max-loras-per-batch``, ``--max-lora-rank``); ``model`` = the adapter's name (or
  ``base:adapter``) selects it.
- LMDeploy: lmdeploy/cli/serve.py (``--adapters name=path ...``, the PyTorch engine only); no per-batch or
  rank limit flag.
- llama.cpp: tools/server/README.md (``--lora FNAME``, repeatable): adapters load at start and
  apply to every request at their scale, or per request by the ``lora`` field ([{"id", "scale"}]),
  not by model name: the mix's ``model=<adapter>`` does not select them there.
- TensorRT-LLM: trtllm-serve takes LoRA through ``--extra_llm_api_options`` (a YAML lora_config),
  no flag of its own: refused, naming --engine-arg.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError


@dataclass(frozen=True)
class LoraFlags:
    """An engine's LoRA flags; None: it has none for that knob."""

    engine: str
    modules: str | None  # takes NAME=PATH values (one flag, nargs "+")
    enable: str | None = None
    max_loras: str | None = None
    max_rank: str | None = None
    paths_only: bool = False  # takes PATHs, not NAME=PATH (llama.cpp's --lora, repeated)


VLLM = LoraFlags("vLLM", "--lora-modules", "--enable-lora", "--max-loras", "--max-lora-rank")
SGLANG = LoraFlags("SGLang", "--lora-paths", "--enable-lora", "--max-loras-per-batch", "--max-lora-rank")
LMDEPLOY = LoraFlags("LMDeploy", "--adapters")
LLAMACPP = LoraFlags("llama.cpp", "--lora", paths_only=True)
TRTLLM = LoraFlags("TensorRT-LLM", None)


def _refuse(engine: str, flag: str) -> BackendError:
    return BackendError(
        f"{engine} has no native flag for {flag}; drop it, or pass the engine's own flag with --engine-arg"
    )


def lora_flags(knobs: EngineKnobs, flags: LoraFlags) -> list[str]:
    """The engine's LoRA flags for the knobs set (none set: none)."""
    argv: list[str] = []
    modules = list(knobs.lora_modules or ())
    enable = knobs.enable_lora if knobs.enable_lora is not None else (True if modules else None)
    if enable:
        if flags.enable is not None:
            argv.append(flags.enable)
        elif not modules:
            raise _refuse(flags.engine, "--enable-lora")
    if modules:
        if flags.modules is None:
            raise _refuse(flags.engine, "--lora-modules")
        if flags.paths_only:
            for item in modules:
                argv += [flags.modules, item.partition("=")[2]]
        else:
            argv += [flags.modules, *modules]
    for value, flag, ours in (
        (knobs.max_loras, flags.max_loras, "--max-loras"),
        (knobs.max_lora_rank, flags.max_rank, "--max-lora-rank"),
    ):
        if value is not None:
            if flag is None:
                raise _refuse(flags.engine, f"{ours}={value}")
            argv += [flag, str(value)]
    return argv
