"""The Ray Serve relay app without Ray: the FastAPI app served by uvicorn in the test's loop, in
front of the scripted mock (streams) or a recording upstream (bodies, non-streamed replies)."""

import asyncio
import contextlib
import json

import aiohttp
import pytest
from aiohttp import web

from tokenbench.backends.ray_serve_app import RelayConfig, ServeConfig, batched, make_app
from tokenbench.common.procs import free_port
from tokenbench.mock import MockServer
from tokenbench.mock.settings import MockSettings

uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")


@contextlib.asynccontextmanager
async def upstream(app: web.Application):
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def relay(upstream_url: str, served_by: str | None = None, **settings):
    config = RelayConfig(
        upstream_url=upstream_url, upstream_model="engine-model", served_name="layer-model", **settings
    )
    port = free_port("127.0.0.1")
    app = make_app(config, served_by)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        async with aiohttp.ClientSession() as session:
            yield session, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def recording_upstream(seen: list[dict], headers: list[dict] | None = None) -> web.Application:
    """Answers completions non-streamed with what it received, and /v1/models."""

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        if headers is not None:
            headers.append(dict(request.headers))
        return web.json_response({"object": "text_completion", "received_model": body["model"]}, status=201)

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "engine-model"}]})

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/v1/models", models)
    return app


async def test_streamed_chat_arrives_chunk_for_chunk():
    async with upstream(MockServer(MockSettings(ttft_ms=5, itl_ms=5, output_tokens=6)).app) as url:
        async with relay(url) as (session, base):
            body = {"model": "layer-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}
            async with session.post(base + "/v1/chat/completions", json=body) as resp:
                assert resp.status == 200
                assert resp.headers["Content-Type"].startswith("text/event-stream")
                text = (await resp.read()).decode()
    events = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    contents = [json.loads(e)["choices"][0]["delta"].get("content") for e in events[:-1] if json.loads(e)["choices"]]
    assert len([c for c in contents if c]) == 6


async def test_stream_is_relayed_while_the_engine_still_holds_it():
    # the mock sends 3 chunks, then stalls with the connection open: a buffering relay shows none
    mock = MockServer(MockSettings(ttft_ms=1, itl_ms=1, output_tokens=10, fault="stall", fault_after_chunks=3))
    async with upstream(mock.app) as url:
        async with relay(url) as (session, base):
            body = {"model": "x", "prompt": "hi", "stream": True}
            async with session.post(base + "/v1/completions", json=body) as resp:
                contents = []
                while len(contents) < 3:
                    line = await asyncio.wait_for(resp.content.readline(), timeout=30)
                    if line.startswith(b"data: "):
                        contents.append(json.loads(line[6:])["choices"][0]["text"])
    assert all(contents)


async def test_request_model_is_the_engines_and_a_plain_reply_passes_through():
    seen: list[dict] = []
    async with upstream(recording_upstream(seen)) as url:
        async with relay(url) as (session, base):
            async with session.post(base + "/v1/completions", json={"model": "layer-model", "prompt": "p"}) as resp:
                assert resp.status == 201
                assert await resp.json() == {"object": "text_completion", "received_model": "engine-model"}
            async with session.get(base + "/v1/models") as resp:
                listed = await resp.json()
            async with session.get(base + "/tokenbench/ready") as resp:
                assert resp.status == 200
    assert seen == [{"model": "engine-model", "prompt": "p"}]
    assert [m["id"] for m in listed["data"]] == ["layer-model"]


async def test_the_join_key_goes_on_to_the_engine():
    """server spans: traceparent, tracestate and X-Request-Id reach the engine, so its spans join the
    client's records through the layer; other request headers do not."""
    seen: list[dict] = []
    headers: list[dict] = []
    sent = {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "tb=1",
        "X-Request-Id": "0af7651916cd43dd8448eb211c80319c",
        "X-Private": "not for the engine",
    }
    async with upstream(recording_upstream(seen, headers)) as url:
        async with relay(url) as (session, base):
            body = {"model": "layer-model", "prompt": "p"}
            async with session.post(base + "/v1/completions", json=body, headers=sent) as resp:
                assert resp.status == 201
    (got,) = headers
    assert {k.lower(): v for k, v in got.items() if k.lower() in ("traceparent", "tracestate", "x-request-id")} == {
        k.lower(): v for k, v in sent.items() if k != "X-Private"
    }
    assert "X-Private" not in got


async def test_an_engine_that_is_gone_is_a_502_and_bad_json_a_400():
    dead = f"http://127.0.0.1:{free_port('127.0.0.1')}"
    async with relay(dead) as (session, base):
        for path in ("/v1/models", "/tokenbench/ready"):
            async with session.get(base + path) as resp:
                assert resp.status == 502
        async with session.post(base + "/v1/chat/completions", json={"messages": []}) as resp:
            assert resp.status == 502
            assert "unreachable" in (await resp.json())["error"]["message"]
        async with session.post(base + "/v1/completions", data=b"{not json") as resp:
            assert resp.status == 400


async def test_batched_sends_what_arrived_during_each_interval_together():
    release = asyncio.Event()

    async def reads():
        yield b"a"
        yield b"b"
        await release.wait()
        yield b"c"

    batches = []
    async for batch in batched(reads(), 0.05):
        batches.append(batch)
        release.set()
    assert batches == [b"ab", b"c"]


async def test_batched_flushes_at_the_end_of_the_stream_not_the_interval():
    async def reads():
        yield b"a"
        yield b"b"

    async def collect():
        return [batch async for batch in batched(reads(), 3600.0)]

    assert await asyncio.wait_for(collect(), timeout=30) == [b"ab"]


def test_serve_config_round_trips_as_json():
    config = ServeConfig("127.0.0.1", 8300, 8301, RelayConfig("http://127.0.0.1:9", "e", "l", 25.0), 7)
    assert ServeConfig.from_json(config.to_json()) == config


async def test_a_connection_the_engine_closed_is_retried_once_on_a_new_one():
    connections = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        await reader.readuntil(b"\r\n\r\n")
        if len(connections) > 1:  # the first is closed unanswered, as a stale keep-alive one
            body = b'{"ok": true}'
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            writer.write(head.encode() + body)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server, relay(url) as (session, base):
        async with session.post(base + "/v1/completions", json={"prompt": "p"}) as resp:
            assert (resp.status, await resp.json()) == (200, {"ok": True})
    assert len(connections) == 2
