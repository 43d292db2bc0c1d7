"""Emptying an engine's prefix cache through its own control, before a load point (--prefix-cache
reset). One coroutine per engine, named on its profile (``Profile.reset_prefix_cache``); an engine
without one is ``not_supported``. A reset never raises for the server's answer: what happened is a
``CacheReset`` value that results.json states per point.

Facts and their sources:
- vLLM: ``POST /reset_prefix_cache`` (vllm/entrypoints/serve/dev/cache/api_router.py, mounted only
  with ``VLLM_SERVER_DEV_MODE=1``: tokenbench sets it when it launches vLLM). It answers 200 with
  ``{"success": bool}``; ``false`` while blocks are still held (running requests, async KV
  transfers), so a 2xx is not enough: a few retries, then ``failed``. 404: not in dev mode.
- SGLang: ``POST /flush_cache`` (python/sglang/srt/entrypoints/http_server.py) answers 200 once
  flushed and 400 while requests are running; retried until the server is idle or a deadline.
- llama.cpp: ``POST /slots/{id}?action=erase`` for every slot (tools/server/README.md), the slot
  count from ``GET /props`` ``total_slots``; 501 unless the server was started with
  ``--slot-save-path``. Erasing slots does not empty the host-RAM prompt cache (``--cache-ram``),
  from which a later request may still restore a prefix (ggml-org/llama.cpp discussion #30746).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp

from tokenbench.results.manifest import ResetStatus

TIMEOUT = aiohttp.ClientTimeout(total=30)
ERROR_CHARS = 300


@dataclass(frozen=True)
class CacheReset:
    """What a reset before a point did; ``detail`` says why when it was not done."""

    status: ResetStatus
    detail: str | None = None


ResetHook = Callable[[aiohttp.ClientSession, str], Awaitable[CacheReset]]

NOT_REQUESTED = CacheReset("not_requested")


async def _post(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.post(url, timeout=TIMEOUT) as resp:
        return resp.status, (await resp.text(errors="replace"))[:ERROR_CHARS]


async def reset_vllm(session: aiohttp.ClientSession, base_url: str, tries: int = 5, pause_s: float = 0.5) -> CacheReset:
    url = f"{base_url}/reset_prefix_cache?reset_running_requests=false&reset_external=false"
    body = ""
    for attempt in range(tries):
        if attempt:
            await asyncio.sleep(pause_s)
        try:
            status, body = await _post(session, url)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            return CacheReset("failed", f"POST /reset_prefix_cache: {type(exc).__name__}: {exc}")
        if status == 404:
            return CacheReset("not_supported", "POST /reset_prefix_cache: 404 (vLLM needs VLLM_SERVER_DEV_MODE=1)")
        if status // 100 != 2:
            return CacheReset("failed", f"POST /reset_prefix_cache: HTTP {status}: {body}")
        if _success(body):
            return CacheReset("done")
    return CacheReset("failed", f"POST /reset_prefix_cache answered {body!r} {tries} times (blocks still held)")


def _success(body: str) -> bool:
    try:
        answer = json.loads(body)
    except ValueError:
        return False
    return isinstance(answer, dict) and answer.get("success") is True


async def reset_sglang(
    session: aiohttp.ClientSession, base_url: str, tries: int = 60, pause_s: float = 0.5
) -> CacheReset:
    """``/flush_cache`` until it answers 200; 400 means requests are still running: wait
    ``pause_s`` and retry, ``tries`` times in all (30 s by default)."""
    body = ""
    for attempt in range(tries):
        if attempt:
            await asyncio.sleep(pause_s)
        try:
            status, body = await _post(session, f"{base_url}/flush_cache")
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            return CacheReset("failed", f"POST /flush_cache: {type(exc).__name__}: {exc}")
        if status // 100 == 2:
            return CacheReset("done")
        if status == 404:
            return CacheReset("not_supported", "POST /flush_cache: 404")
        if status != 400:
            return CacheReset("failed", f"POST /flush_cache: HTTP {status}: {body}")
    return CacheReset("failed", f"POST /flush_cache: still busy (HTTP 400) after {tries} tries: {body}")


async def reset_llamacpp(session: aiohttp.ClientSession, base_url: str) -> CacheReset:
    """Erase every slot. The host-RAM prompt cache (--cache-ram) is not emptied by this."""
    try:
        async with session.get(f"{base_url}/props", timeout=TIMEOUT) as resp:
            props = await resp.json(content_type=None) if resp.status == 200 else {}
        slots = props.get("total_slots") if isinstance(props, dict) else None
        if not isinstance(slots, int) or slots < 1:
            return CacheReset("failed", "GET /props gave no total_slots: cannot tell which slots to erase")
        for slot in range(slots):
            status, body = await _post(session, f"{base_url}/slots/{slot}?action=erase")
            if status == 501:
                return CacheReset("not_supported", f"slot erase: 501 (start llama.cpp with --slot-save-path): {body}")
            if status // 100 != 2:
                return CacheReset("failed", f"POST /slots/{slot}?action=erase: HTTP {status}: {body}")
    except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
        return CacheReset("failed", f"llama.cpp slot erase: {type(exc).__name__}: {exc}")
    return CacheReset("done")


async def reset_prefix_cache(hook: ResetHook | None, session: aiohttp.ClientSession, base_url: str) -> CacheReset:
    """The engine's reset, or ``not_supported`` for an engine without one (or unknown)."""
    if hook is None:
        return CacheReset("not_supported", "the engine has no prefix-cache control tokenbench knows")
    return await hook(session, base_url)
