"""Which model the server serves (results/served_model.py's ServedModel), asked once before any
load: the card the run's one /v1/models query listed for the model (clients/stream.probe),
llama.cpp's /props where it answers, and a fingerprint of its weights: the greedy replies
(temperature 0) to FINGERPRINT_PROMPTS, FINGERPRINT_TOKENS each, sent one at a time over the
run's own client path, hashed. The probes carry PROBE_HEADER (the mock answers them at once and
counts them nowhere) and are never records: they count in no point."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import aiohttp

from tokenbench.clients.stream import ModelListing, StreamingClient, auth_headers
from tokenbench.clients.wire import Wire
from tokenbench.config.target import ResolvedTarget
from tokenbench.records import Outcome, Request, RequestRecord
from tokenbench.results.served_model import CARD_FIELDS, ServedModel

PROBE_HEADER = "X-Tokenbench-Probe"
FINGERPRINT_PROMPTS = (
    "Count from one to twenty in words, separated by commas.",
    "Name the planets of the solar system in order from the sun.",
    "Write the first sentence of a story about a lighthouse keeper.",
)
FINGERPRINT_TOKENS = 16
FINGERPRINT_APIS = ("chat", "completions")  # a server without them is not fingerprinted
PROBE_JOIN = "\n\x1e\n"  # between the replies hashed: no reply's text can fake a boundary
# All three probes' limit: a server that stalls them is not fingerprinted (the run goes on)
FINGERPRINT_TIMEOUT_S = 30.0


def card_fields(card: dict[str, Any] | None) -> dict[str, Any]:
    """The identity fields of a /v1/models card, those of the right type only."""
    card = card or {}
    kinds: dict[str, type] = {"max_model_len": int, "created": int}
    return {k: card[k] for k in CARD_FIELDS if isinstance(card.get(k), kinds.get(k, str))}


async def llamacpp_props(session: aiohttp.ClientSession, target: ResolvedTarget) -> dict[str, Any]:
    """llama.cpp's /props: the GGUF path it loaded and its context ({} where nothing answers so)."""
    try:
        async with session.get(
            target.url + "/props", headers=auth_headers(target), timeout=aiohttp.ClientTimeout(total=5)
        ) as resp:
            data = await resp.json(content_type=None) if resp.status == 200 else None
    except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    found: dict[str, Any] = {}
    if isinstance(data.get("model_path"), str):
        found["model_path"] = data["model_path"]
    settings = data.get("default_generation_settings")
    if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):
        found["n_ctx"] = settings["n_ctx"]
    return found


async def fingerprint(session: aiohttp.ClientSession, target: ResolvedTarget, wire: Wire) -> list[str] | None:
    """The greedy replies to the fingerprint's prompts, one at a time (None: a probe failed)."""
    greedy = target.model_copy(update={"temperature": 0.0, "ignore_eos": False})
    client = StreamingClient(session, greedy, wire, lambda: 0.0, keep_text=True)
    replies = []
    try:
        for i, prompt in enumerate(FINGERPRINT_PROMPTS):
            request = Request(prompt=prompt, max_tokens=FINGERPRINT_TOKENS, headers=((PROBE_HEADER, "fingerprint"),))
            record = RequestRecord(point=-1, id=i, scheduled_s=0.0)
            await client.send(request, record)
            if record.outcome is not Outcome.OK or record.output_text is None:
                return None
            replies.append(record.output_text)
    finally:
        client.close()
    return replies


def fingerprint_of(replies: list[str]) -> str:
    return hashlib.sha256(PROBE_JOIN.join(replies).encode()).hexdigest()


async def served_model(
    session: aiohttp.ClientSession, target: ResolvedTarget, wire: Wire, listing: ModelListing, probes: bool
) -> ServedModel:
    """What the server says of the model requests name, and with ``probes`` its fingerprint."""
    # the card of the name requested; else a server of one model's (llama.cpp lists its GGUF's
    # name and serves it under any name requested)
    card = listing.card(target.model) or (next(iter(listing.cards.values())) if len(listing.cards) == 1 else None)
    fields = card_fields(card)
    fields |= await llamacpp_props(session, target)
    if probes and target.api in FINGERPRINT_APIS:
        try:
            async with asyncio.timeout(FINGERPRINT_TIMEOUT_S):
                replies = await fingerprint(session, target, wire)
        except TimeoutError:
            replies = None
        if replies is not None:
            fields |= {"fingerprint": fingerprint_of(replies), "fingerprint_tokens": FINGERPRINT_TOKENS}
            fields["probes"] = replies
    return ServedModel(**fields)
