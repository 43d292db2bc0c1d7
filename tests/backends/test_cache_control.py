"""Prefix-cache resets against fake engines (aiohttp servers answering as vLLM, SGLang and
llama.cpp do): done, failed, not_supported, and SGLang busy then idle."""

from __future__ import annotations

import aiohttp
from aiohttp import web

from tokenbench.backends import PROFILES
from tokenbench.backends.cache_control import (
    reset_llamacpp,
    reset_prefix_cache,
    reset_sglang,
    reset_vllm,
)


async def _serve(routes: list[web.RouteDef]) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


async def _reset(hook, routes, **kw):
    runner, url = await _serve(routes)
    try:
        async with aiohttp.ClientSession() as session:
            return await hook(session, url, **kw)
    finally:
        await runner.cleanup()


async def test_vllm_success_true_is_done_and_asks_not_to_touch_running_requests():
    asked = []

    async def handler(request):
        asked.append(dict(request.query))
        return web.json_response({"success": True})

    got = await _reset(reset_vllm, [web.post("/reset_prefix_cache", handler)])
    assert got.status == "done" and got.detail is None
    assert asked == [{"reset_running_requests": "false", "reset_external": "false"}]


async def test_vllm_a_2xx_with_success_false_is_retried_then_failed():
    calls = []

    async def handler(_):
        calls.append(1)
        return web.json_response({"success": False})

    got = await _reset(reset_vllm, [web.post("/reset_prefix_cache", handler)], tries=3, pause_s=0.0)
    assert got.status == "failed" and "blocks still held" in (got.detail or "")
    assert len(calls) == 3


async def test_vllm_success_on_a_retry_is_done():
    answers = iter([False, True])

    async def handler(_):
        return web.json_response({"success": next(answers)})

    got = await _reset(reset_vllm, [web.post("/reset_prefix_cache", handler)], pause_s=0.0)
    assert got.status == "done"


async def test_vllm_without_dev_mode_is_not_supported_and_says_why():
    got = await _reset(reset_vllm, [])  # the route is not mounted: 404
    assert got.status == "not_supported" and "VLLM_SERVER_DEV_MODE" in (got.detail or "")


async def test_vllm_a_500_is_failed_with_the_body():
    async def handler(_):
        return web.Response(status=500, text="engine dead")

    got = await _reset(reset_vllm, [web.post("/reset_prefix_cache", handler)])
    assert got.status == "failed" and "500" in (got.detail or "") and "engine dead" in (got.detail or "")


async def test_sglang_busy_then_idle_is_done_after_waiting():
    answers = iter([400, 400, 200])
    calls = []

    async def handler(_):
        calls.append(1)
        status = next(answers)
        return web.Response(status=status, text="busy" if status == 400 else "Cache flushed.")

    got = await _reset(reset_sglang, [web.post("/flush_cache", handler)], pause_s=0.0)
    assert got.status == "done" and len(calls) == 3


async def test_sglang_busy_until_the_deadline_is_failed():
    async def handler(_):
        return web.Response(status=400, text="not idle")

    got = await _reset(reset_sglang, [web.post("/flush_cache", handler)], tries=3, pause_s=0.0)
    assert got.status == "failed" and "busy" in (got.detail or "")


async def test_llamacpp_erases_every_slot_named_by_props():
    erased = []

    async def props(_):
        return web.json_response({"total_slots": 3, "build_info": "b1"})

    async def slot(request):
        assert request.query["action"] == "erase"
        erased.append(int(request.match_info["id"]))
        return web.json_response({"id_slot": int(request.match_info["id"]), "n_erased": 7})

    got = await _reset(reset_llamacpp, [web.get("/props", props), web.post("/slots/{id}", slot)])
    assert got.status == "done" and erased == [0, 1, 2]


async def test_llamacpp_without_slot_save_path_is_not_supported():
    async def props(_):
        return web.json_response({"total_slots": 2})

    async def slot(_):
        return web.json_response(
            {"error": {"code": 501, "message": "This server does not support slots action."}}, status=501
        )

    got = await _reset(reset_llamacpp, [web.get("/props", props), web.post("/slots/{id}", slot)])
    assert got.status == "not_supported" and "--slot-save-path" in (got.detail or "")


async def test_an_engine_without_a_control_is_not_supported_without_asking_it():
    async with aiohttp.ClientSession() as session:
        got = await reset_prefix_cache(None, session, "http://127.0.0.1:9")  # nothing listens there
    assert got.status == "not_supported"


def test_which_profiles_have_a_control_and_take_token_ids():
    with_reset = {name for name, p in PROFILES.items() if p.reset_prefix_cache is not None}
    assert with_reset == {"vllm", "sglang", "llamacpp", "xllamacpp"}
    assert {name for name, p in PROFILES.items() if p.token_id_prompts} == {"vllm", "sglang"}


def test_llamacpp_launched_for_a_reset_gets_a_slot_save_path_and_no_host_ram_cache():
    from tokenbench.backends.llamacpp import resettable
    from tokenbench.config import BackendConfig, EngineKnobs

    args = resettable(BackendConfig(name="xllamacpp")).knobs.engine_args
    assert args[0] == "--slot-save-path" and args[2:] == ("--cache-ram", "0")
    mine = BackendConfig(name="llamacpp", knobs=EngineKnobs(engine_args=("--slot-save-path=/s", "--cache-ram", "512")))
    assert resettable(mine).knobs.engine_args == ("--slot-save-path=/s", "--cache-ram", "512")  # the user's stay
