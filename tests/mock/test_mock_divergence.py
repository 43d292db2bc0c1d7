"""mock/divergence.py: answers that change, as scripted. A share of prompts chosen by their hash
diverges from output token N on, whatever the load; --diverge-above-in-flight makes the replies
that arrive above K in flight diverge; the default reply is unchanged; fingerprint probes are
answered at once and counted nowhere."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from tokenbench.mock.divergence import DIVERGED_WORD, PROBE_HEADER, prompt_diverges, prompt_text
from tokenbench.mock.settings import MockSettings
from tokenbench.records import Request, prompt_hash

PROMPTS = [f"prompt number {i}" for i in range(40)]


async def _text(session: aiohttp.ClientSession, url: str, prompt: str, max_tokens: int = 6, **headers: str) -> str:
    body = {"model": "mock-model", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}
    async with session.post(url + "/v1/chat/completions", json={**body, "stream": True}, headers=headers) as resp:
        raw = await resp.text()
    text = ""
    for block in raw.split("\n\n"):
        data = block.removeprefix("data: ")
        if not block or data == "[DONE]":
            continue
        for choice in json.loads(data)["choices"]:
            text += choice["delta"].get("content") or ""
    return text


def _replies(url: str, prompts: list[str], together: bool = False, max_tokens: int = 6, **headers: str) -> list[str]:
    async def run() -> list[str]:
        async with aiohttp.ClientSession() as session:
            if together:
                return list(await asyncio.gather(*(_text(session, url, p, max_tokens, **headers) for p in prompts)))
            return [await _text(session, url, p, max_tokens, **headers) for p in prompts]

    return asyncio.run(run())


def test_the_share_diverges_the_prompts_its_hash_picks_from_token_n_on(mock_server):
    url = mock_server(ttft_ms=0, itl_ms=0, diverge_share=0.25, diverge_at=2, tokens_per_chunk=4)
    replies = _replies(url, PROMPTS, max_tokens=8)
    picked = [prompt_diverges(prompt_hash(p), 0.25) for p in PROMPTS]
    assert 0 < sum(picked) < len(PROMPTS)  # the hash picks some, not all (a known 40-prompt draw)
    for reply, diverged in zip(replies, picked):
        # the same words up to token 2 (chunks of 4 tokens split at it), the other word after
        assert reply == (" hi hi" + f" {DIVERGED_WORD}" * 6 if diverged else " hi" * 8)
    deliveries = json.loads(asyncio.run(_get(url, "/mock/deliveries")))
    assert sorted(d["diverged_at"] is not None for d in deliveries.values()) == sorted(picked)


def test_the_default_reply_is_unchanged_and_a_share_of_one_diverges_every_reply(mock_server):
    assert _replies(mock_server(ttft_ms=0, itl_ms=0), PROMPTS[:3]) == [" hi" * 6] * 3
    every = _replies(mock_server(ttft_ms=0, itl_ms=0, diverge_share=1.0, diverge_at=0), PROMPTS[:3])
    assert every == [f" {DIVERGED_WORD}" * 6] * 3


def test_replies_diverge_only_above_the_load(mock_server):
    """Four at once with K=2: the 3rd and 4th arrive above 2 in flight (itself counted) and diverge;
    sent one by one, none does."""
    url = mock_server(ttft_ms=200, itl_ms=0, diverge_above_in_flight=2, diverge_at=3)
    assert _replies(url, PROMPTS[:4]) == [" hi" * 6] * 4
    together = _replies(url, PROMPTS[:4], together=True)
    assert sorted(together) == sorted([" hi" * 6] * 2 + [" hi" * 3 + f" {DIVERGED_WORD}" * 3] * 2)


def test_a_fingerprint_probe_is_answered_at_once_and_counted_nowhere(mock_server):
    url = mock_server(ttft_ms=2000, itl_ms=0, fault="http_500", fingerprint_salt="v2")
    assert _replies(url, PROMPTS[:2], **{PROBE_HEADER: "fingerprint"}) == [" hi-v2" * 6] * 2
    assert json.loads(asyncio.run(_get(url, "/mock/deliveries"))) == {}  # no delivery, no fault drawn


def test_the_mock_keys_prompts_as_the_client_does():
    chat = {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]}
    request = Request(messages=tuple(chat["messages"]))
    assert prompt_hash(prompt_text(chat)) == request.prompt_key()
    assert prompt_text({"prompt": "hi"}) == "hi"


def test_a_share_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="diverge_share"):
        MockSettings(diverge_share=1.5)


async def _get(url: str, path: str) -> str:
    async with aiohttp.ClientSession() as session:
        async with session.get(url + path) as resp:
            return await resp.text()
