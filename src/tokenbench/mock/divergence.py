"""The mock's scripted answers that change: which replies differ from the usual scripted one, and
from which output token on (known answers for paired outputs and determinism under load).

The usual reply is ``word`` once per output token (" hi hi hi ..."). A diverging reply has the
same words up to output token ``diverge_at`` (0-based) and ``DIVERGED_WORD`` from there on, so
its first differing token is exactly ``diverge_at`` (its first differing character
``diverge_at * (len(word) + 1)``). Two scripts choose the diverging replies:

- ``diverge_share`` F: the prompts whose ``prompt_hash`` (records.prompt_hash of the prompt's text,
  as ``Request.as_prompt_text`` flattens it) read as a number in [0, 1) is below F, whatever the
  load: a known, deterministic share (``prompt_diverges``).
- ``diverge_above_in_flight`` K > 0: any request that arrives (is admitted to generate) while more
  than K requests are in flight, itself counted, as ``kv_slots`` counts: load-dependent answers.

``fingerprint_salt`` stands for another model's weights: every reply's words carry it
(``hi-SALT``), so a served model's fingerprint (clients/served_model.py) differs while the name does not.

Fingerprint probes (requests carrying ``PROBE_HEADER``, clients/served_model.py) are answered at once, whole, outside the
script's timing and counters: a run's probes never shift a test's known answers (fault_every's
count, deliveries, the warm-up's first request, the in-flight count).
"""

from __future__ import annotations

from tokenbench.clients.served_model import PROBE_HEADER
from tokenbench.mock.settings import MockSettings
from tokenbench.records import prompt_hash

__all__ = ["DIVERGED_WORD", "PROBE_HEADER", "Divergence", "prompt_diverges", "prompt_text"]

DIVERGED_WORD = "ho"


def prompt_text(body: dict[str, object]) -> str:
    """The prompt's text as the client keyed it (Request.as_prompt_text): a completions prompt as
    it is, chat messages' contents joined by blank lines (a list of parts: its texts, by newlines)."""
    prompt = body.get("prompt")
    if prompt is not None:
        return str(prompt)
    messages = body.get("messages")
    parts = []
    for m in messages if isinstance(messages, list) else []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(content or "")
    return "\n\n".join(str(p) for p in parts)


def hash_share(key: str) -> float:
    """A prompt hash read as a number in [0, 1): its 16 hex digits over 16**16."""
    return int(key, 16) / float(16 ** len(key))


def prompt_diverges(key: str, share: float) -> bool:
    """Whether ``diverge_share`` picks the prompt whose prompt_hash is ``key``."""
    return share > 0 and hash_share(key) < share


class Divergence:
    """What a MockSettings' scripts make of each reply's words."""

    def __init__(self, settings: MockSettings) -> None:
        self.s = settings
        self.word = f"{settings.word}-{settings.fingerprint_salt}" if settings.fingerprint_salt else settings.word
        self.active = bool(settings.diverge_share or settings.diverge_above_in_flight or settings.fingerprint_salt)

    def diverges(self, body: dict[str, object], in_flight: int) -> bool:
        """Whether this request's reply diverges: its prompt is in the share, or it came above the load."""
        k = self.s.diverge_above_in_flight
        if k and in_flight > k:
            return True
        return prompt_diverges(prompt_hash(prompt_text(body)), self.s.diverge_share)

    def text(self, start: int, n: int, diverged: bool) -> str:
        """Output tokens ``start`` .. ``start + n - 1`` of a reply, each a word after a space."""
        at = self.s.diverge_at if diverged else None
        return "".join(
            " " + (DIVERGED_WORD if at is not None and t >= at else self.word) for t in range(start, start + n)
        )
