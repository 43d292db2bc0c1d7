"""The OpenAI client against in-process servers: huge events, split events, no pool ceiling."""

import io
import json

from aiohttp import web
from rich.console import Console

from tokenbench.clients.openai import OpenAIWire
from tokenbench.clients.stream import StreamingClient, make_session, warm_connections
from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.records import Outcome, Request, RequestRecord, RunClock
from tokenbench.runner import run


async def _serve(handler):
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, f"http://127.0.0.1:{port}"


async def test_large_event_split_across_writes_parses():
    big = "z" * 2_500_000  # one 2.5 MB event, well above aiohttp's 64/128 KB line limits
    event = b"data: " + json.dumps({"id": "x", "choices": [{"delta": {"content": big}}]}).encode() + b"\r\n\r\n"

    async def handler(request):
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n')
        for i in range(0, len(event), 7919):  # odd-sized pieces, splitting the CRLFs too
            await resp.write(event[i : i + 7919])
        await resp.write(b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}\n\ndata: [DONE]\n\n')
        return resp

    runner, url = await _serve(handler)
    clock = RunClock.start()
    target = TargetConfig(url=url, model="m")
    try:
        async with make_session(target, clock.now) as session:
            client = StreamingClient(session, target, OpenAIWire(chat=True), clock.now, keep_text=True)
            record = RequestRecord(point=0, id=0, scheduled_s=clock.now())
            await client.send(Request(prompt="hi", max_tokens=1), record)
    finally:
        await runner.cleanup()
    assert record.outcome is Outcome.OK, record.error
    assert len(record.chunk_times_s) == 1 and record.output_text == big
    assert record.output_tokens == 1 and record.prompt_tokens == 3


def test_more_than_100_in_flight_without_a_pool_ceiling(start_mock, tmp_path):
    url = start_mock(ttft_ms=1000, itl_ms=10)
    cfg = RunConfig(
        target=TargetConfig(url=url),
        loads=[UsersLoad(users=150)],
        stop=StopConfig(max_requests=150),
        dataset=DatasetConfig(input_tokens=4, output_tokens=4, num_prompts=4),
        live=False,
        out_dir=tmp_path / "r",
    )
    point = run(cfg, Console(file=io.StringIO())).results["points"][0]
    assert point["requests"]["ok"] == 150
    assert point["concurrency"]["peak"] == 150  # aiohttp's default limit=100 would cap this
    assert point["ttft_s"]["p99"] < 1.2  # nobody waited for a connection slot


async def _server_dropping_posts(dropped: int):
    """A raw HTTP/1.1 server: GETs get a keep-alive 200 (so the client's pool holds connections);
    the first ``dropped`` POSTs are met by closing the connection without a response byte (as a
    server does with a kept-alive connection it had already closed), later ones are answered."""
    import asyncio

    seen = {"connections": 0, "posts": 0}
    reply = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        b'data: {"choices":[{"delta":{"content":"hi"},"finish_reason":"length"}]}\n\n'
        b'data: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1}}\n\ndata: [DONE]\n\n'
    )
    models = b'{"data":[{"id":"m"}]}'

    async def handle(reader, writer):
        seen["connections"] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if head.startswith(b"GET"):
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                        + str(len(models)).encode()
                        + b"\r\n\r\n"
                        + models
                    )
                    await writer.drain()
                    continue
                seen["posts"] += 1
                if seen["posts"] > dropped:
                    writer.write(reply)
                    await writer.drain()
                break
        except asyncio.IncompleteReadError:
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", seen


async def _send_once(url, warm=0):
    clock = RunClock.start()
    target = TargetConfig(url=url, model="m", api="chat")
    record = RequestRecord(point=0, id=0, scheduled_s=0.0)
    wire = OpenAIWire(chat=True)
    async with make_session(target, clock.now) as session:
        if warm:
            assert await warm_connections(session, target, wire, warm) == warm
        client = StreamingClient(session, target, wire, clock.now)
        await client.send(Request(prompt="hello", max_tokens=1), record)
    return record


async def test_dead_reused_connections_before_any_response_are_resent():
    server, url, seen = await _server_dropping_posts(2)
    async with server:
        record = await _send_once(url, warm=3)
    assert record.outcome is Outcome.OK and record.retries == 2 and seen["posts"] == 3


async def test_resends_are_bounded():
    server, url, seen = await _server_dropping_posts(10)
    async with server:
        record = await _send_once(url, warm=5)
    assert record.outcome is Outcome.STREAM_ERROR and record.retries == 3 and seen["posts"] == 4


async def test_a_fresh_connection_reset_is_a_failure_not_a_resend():
    """Audit 5: a server or proxy resetting new connections must show as failures."""
    server, url, seen = await _server_dropping_posts(1)
    async with server:
        record = await _send_once(url)
    assert record.outcome is Outcome.STREAM_ERROR and record.retries == 0 and seen["posts"] == 1


async def test_a_refused_connect_is_never_resent():
    """aiohttp's ClientConnectorError subclasses ClientOSError; it must not be re-sent."""
    from tokenbench.procs import free_port

    record = await _send_once(f"http://127.0.0.1:{free_port()}")
    assert record.outcome is Outcome.CONNECT_ERROR and record.retries == 0
