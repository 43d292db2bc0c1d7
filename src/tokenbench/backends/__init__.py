"""Backend profiles: one module per engine, one line per profile in PROFILES (``--backend NAME``)."""

from __future__ import annotations

from . import llamacpp, vllm
from .base import BackendError, Profile

PROFILES: dict[str, Profile] = {
    "vllm": vllm.PROFILE,
    "llamacpp": llamacpp.PROFILE,
    "xllamacpp": llamacpp.EMBEDDED_PROFILE,
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise BackendError(f"--backend {name!r} is not a known backend; choose one of: "
                           f"{', '.join(PROFILES)} (tokenbench backends lists them)") from None
