"""Which model a run's server served, as far as the server tells (results.json
``target.served_model``): its /v1/models card's fields, llama.cpp's /props where it answers, and
a fingerprint of the weights' greedy answers (clients/served_model.py asks for them, before any
load; none of it counts in a point)."""

from __future__ import annotations

from tokenbench.common.frozen import FrozenModel

# The card fields /v1/models gives (vLLM's names; others give some of them), kept as the server wrote them.
CARD_FIELDS = ("id", "root", "parent", "max_model_len", "owned_by", "created")


class ServedModel(FrozenModel):
    """None: the server did not say (or could not be asked)."""

    id: str | None = None  # the card's id: the name requests send
    root: str | None = None  # vLLM: the weights' path or hub name the name serves
    parent: str | None = None  # a LoRA adapter's base model
    max_model_len: int | None = None
    owned_by: str | None = None
    created: int | None = None  # the card's Unix time (vLLM: when the listing was made, not the weights)
    model_path: str | None = None  # llama.cpp's /props model_path: the GGUF file it loaded
    n_ctx: int | None = None  # llama.cpp's /props default_generation_settings.n_ctx
    # sha256 (hex) of the probes' greedy replies joined by "\n\x1e\n": equal weights (and engine and
    # sampling path) give equal fingerprints; None: not taken (no --fingerprint, not chat or
    # completions, a probe failed)
    fingerprint: str | None = None
    fingerprint_tokens: int | None = None  # each probe's max_tokens
    probes: list[str] | None = None  # each probe's greedy reply, in FINGERPRINT_PROMPTS' order

    def identity(self) -> dict[str, object]:
        """The fields that say which weights (everything but the fingerprint and its replies) that were given."""
        fields = ("root", "parent", "max_model_len", "owned_by", "model_path", "n_ctx")
        return {k: getattr(self, k) for k in fields if getattr(self, k) is not None}
