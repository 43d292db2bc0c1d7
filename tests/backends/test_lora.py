"""LoRA knobs -> each engine's own flags: vLLM, SGLang, LMDeploy and llama.cpp
render theirs; a knob an engine has no flag for, and any LoRA knob for an engine without LoRA, is
refused naming --engine-arg; --lora-modules wants NAME=PATH."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tokenbench.backends import get_profile
from tokenbench.backends.base import LaunchSpec
from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError

LORA = dict(lora_modules=("sql=/a/sql", "chat=/a/chat"), max_loras=2, max_lora_rank=16)


def _argv(profile: str, **knobs) -> list[str]:
    spec = LaunchSpec(model="m", served_name="m", host="127.0.0.1", port=1, knobs=EngineKnobs(**knobs))
    return list(get_profile(profile).local(spec).argv)


def _after(argv: list[str], flag: str, n: int = 1) -> list[str]:
    i = argv.index(flag)
    return argv[i + 1 : i + 1 + n]


def test_vllm_and_sglang_render_every_lora_knob():
    argv = _argv("vllm", **LORA)
    assert "--enable-lora" in argv and _after(argv, "--lora-modules", 2) == ["sql=/a/sql", "chat=/a/chat"]
    assert _after(argv, "--max-loras") == ["2"] and _after(argv, "--max-lora-rank") == ["16"]
    argv = _argv("sglang", **LORA)
    assert "--enable-lora" in argv and _after(argv, "--lora-paths", 2) == ["sql=/a/sql", "chat=/a/chat"]
    assert _after(argv, "--max-loras-per-batch") == ["2"] and _after(argv, "--max-lora-rank") == ["16"]


def test_lmdeploy_and_llamacpp_take_the_adapters_and_refuse_the_limits():
    argv = _argv("lmdeploy-pytorch", lora_modules=("sql=/a/sql",))
    assert _after(argv, "--adapters") == ["sql=/a/sql"]
    argv = _argv("llamacpp", lora_modules=("sql=/a/sql.gguf", "chat=/a/chat.gguf"))
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--lora"] == ["/a/sql.gguf", "/a/chat.gguf"]
    with pytest.raises(BackendError, match="LMDeploy.* has no native flag for --max-loras=2.*--engine-arg"):
        _argv("lmdeploy-pytorch", **LORA)
    with pytest.raises(BackendError, match="llama.cpp has no native flag for --max-lora-rank=16"):
        _argv("llamacpp", lora_modules=("a=/a.gguf",), max_lora_rank=16)


def test_engines_without_lora_flags_refuse_them():
    with pytest.raises(BackendError, match="TensorRT-LLM has no native flag for --lora-modules.*--engine-arg"):
        _argv("trtllm", lora_modules=("a=/a",))
    with pytest.raises(BackendError, match="has no native flag for --lora-modules=a=/a"):
        _argv("tgi", lora_modules=("a=/a",))
    assert "--enable-lora" not in _argv("vllm")  # nothing set: nothing rendered


def test_lora_modules_want_name_equals_path():
    assert EngineKnobs(lora_modules=("a=/x,b=/y",)).lora_modules == ("a=/x", "b=/y")
    with pytest.raises(ValidationError, match="--lora-modules '/x': write NAME=PATH"):
        EngineKnobs(lora_modules=("/x",))
