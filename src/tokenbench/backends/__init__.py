"""Backend profiles: one module per engine, one line per profile in PROFILES (``--backend NAME``)."""

from __future__ import annotations

from tokenbench.backends import llamacpp, lmdeploy, mlc, ollama, ray, routers, sglang, tgi, triton, trtllm, vllm
from tokenbench.backends.base import Profile
from tokenbench.errors import BackendError

__all__ = ["EMBEDDED", "PROFILES", "BackendError", "Profile", "get_profile"]

EMBEDDED = "xllamacpp"  # what `tokenbench run` launches with neither --url nor --backend

PROFILES: dict[str, Profile] = {
    "vllm": vllm.PROFILE,
    "sglang": sglang.PROFILE,
    "lmdeploy-turbomind": lmdeploy.TURBOMIND_PROFILE,
    "lmdeploy-pytorch": lmdeploy.PYTORCH_PROFILE,
    "tgi": tgi.PROFILE,
    "trtllm": trtllm.PROFILE,
    "triton": triton.PROFILE,
    "mlc": mlc.PROFILE,
    "llamacpp": llamacpp.PROFILE,
    EMBEDDED: llamacpp.EMBEDDED_PROFILE,
    "ollama": ollama.PROFILE,
    "ray": ray.PROFILE,
    "vllm-router": routers.VLLM_PROFILE,
    "sglang-router": routers.SGLANG_PROFILE,
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise BackendError(
            f"--backend {name!r} is not a known backend; choose one of: "
            f"{', '.join(PROFILES)} (tokenbench backends lists them)"
        ) from None
