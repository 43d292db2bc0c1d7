"""The one streaming request path (clients/stream.py): every fault becomes a record with its
outcome, the run never crashes and records == requests sent; dead reused connections are re-sent
(a bounded number of times), nothing else is; no connection pool ceiling."""

import asyncio
import io
import json
import threading
import time

import orjson
import pytest
from rich.console import Console
from run_helpers import resolved

from tokenbench.clients.openai import OpenAIWire
from tokenbench.clients.stream import StreamingClient, make_session
from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.records import Outcome, Request, RequestRecord, RunClock
from tokenbench.run import run


def run_against(url, tmp_path, requests=6, read_timeout_s=120.0, duration_s=None):
    cfg = RunConfig(
        target=TargetConfig(url=url, read_timeout_s=read_timeout_s),
        loads=[UsersLoad(users=2)],
        stop=StopConfig(max_requests=requests, duration_s=duration_s, drain_timeout_s=5),
        dataset=DatasetConfig(input_tokens=4, output_tokens=10, num_prompts=4),
        live=False,
        out_dir=tmp_path / "run",
    )
    result = run(cfg, Console(file=io.StringIO()))
    records = [json.loads(line) for line in (result.run_dir / "records.jsonl").read_text().splitlines()]
    point = result.results["points"][0]
    assert point["requests"]["total"] == len(records)
    return point, records


@pytest.mark.parametrize(
    "fault,outcome,status",
    [
        ("http_500", "http_error", 500),
        ("http_429", "http_error", 429),
        ("http_400", "http_error", 400),
        ("disconnect", "stream_error", 200),
        ("malformed", "stream_error", 200),
        ("error_event", "stream_error", 200),
        ("no_content", "no_output", 200),
        ("abort", "stream_error", 200),  # finish_reason "abort" then [DONE], as vLLM and SGLang end aborts
    ],
)
def test_fault_is_a_record_with_its_outcome(mock_server, tmp_path, fault, outcome, status):
    url = mock_server(ttft_ms=5, itl_ms=2, fault=fault, fault_every=2)
    point, records = run_against(url, tmp_path, requests=6)
    assert point["requests"]["total"] == 6
    assert point["requests"]["by_outcome"] == {"ok": 3, outcome: 3}
    bad = [r for r in records if r["outcome"] != "ok"]
    assert {r["status"] for r in bad} == {status}
    assert all(r["error"] for r in bad)
    if fault in ("disconnect", "malformed", "error_event", "abort"):
        # the chunks that did arrive before the fault are kept as facts
        assert all(len(r["chunk_times_s"]) == 3 for r in bad)
    assert point["ttft_s"]["count"] == 3  # latency distributions are over successful requests


def test_an_engine_abort_is_a_failure_and_a_clean_end_without_marker_is_flagged(mock_server, tmp_path):
    url = mock_server(ttft_ms=5, itl_ms=2, fault="abort", fault_every=2)
    point, records = run_against(url, tmp_path / "abort", requests=4)
    aborted = [r for r in records if r["outcome"] != "ok"]
    assert len(aborted) == 2 and {r["finish_reason"] for r in aborted} == {"abort"}
    assert all("abort" in r["error"] for r in aborted)
    assert point["e2e_s"]["count"] == 2  # the aborted short replies do not pull the E2E down
    assert {r["finish_reason"] for r in records if r["outcome"] == "ok"} == {"length"}
    url = mock_server(ttft_ms=5, itl_ms=2, fault="no_end", fault_every=2)
    point, records = run_against(url, tmp_path / "no_end", requests=4)
    assert point["requests"]["by_outcome"] == {"ok": 4}
    assert point["requests"]["ok_without_end_marker"] == 2
    assert sorted(r["end_marker"] for r in records) == [False, False, True, True]


def test_read_timeout_on_a_stalled_stream(mock_server, tmp_path):
    url = mock_server(ttft_ms=5, itl_ms=2, fault="stall", fault_every=1)
    point, records = run_against(url, tmp_path, requests=2, read_timeout_s=1.0)
    assert point["requests"]["by_outcome"] == {"timeout": 2}
    assert all("timed out" in r["error"] for r in records)


def test_server_dying_mid_run_gives_connect_or_stream_errors(mock_process, tmp_path):
    url = mock_process(ttft_ms=20, itl_ms=20)
    proc = mock_process.procs[-1]
    # killed once two requests have ended ok, not at a fixed time: a slow start (probe, tokenizer,
    # sampler) on a busy machine once outlived a 1 s timer, and no request was ever answered
    threading.Thread(target=_kill_after_ok_records, args=(proc, tmp_path / "run" / "records.jsonl", 2)).start()
    point, records = run_against(url, tmp_path, requests=None, duration_s=3.0)
    outcomes = point["requests"]["by_outcome"]
    assert outcomes.get("ok", 0) >= 2
    assert outcomes.get("connect_error", 0) + outcomes.get("stream_error", 0) >= 1
    assert set(outcomes) <= {"ok", "connect_error", "stream_error"}


def _kill_after_ok_records(proc, records, count: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lines = records.read_text().splitlines() if records.exists() else []
        if sum(json.loads(line)["outcome"] == "ok" for line in lines if line.endswith("}")) >= count:
            break
        time.sleep(0.02)
    proc.kill()


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
    target = resolved(url=url)
    record = RequestRecord(point=0, id=0, scheduled_s=0.0)
    wire = OpenAIWire(chat=True)
    async with make_session(target, clock.now) as session:
        client = StreamingClient(session, target, wire, clock.now)
        if warm:  # the client's own keep-alive connections (clients/http1.py for http://)
            assert await client.warm(warm) == warm
        await client.send(Request(prompt="hello", max_tokens=1), record)
        client.close()
        await asyncio.sleep(0.05)  # the server's handlers see their connections close before the loop ends
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
    from tokenbench.common.procs import free_port

    record = await _send_once(f"http://127.0.0.1:{free_port()}")
    assert record.outcome is Outcome.CONNECT_ERROR and record.retries == 0


async def test_a_request_is_sent_as_its_json_body_with_its_length_and_keys():
    # the compiled client: an http:// request's Content-Length line and body are made once, its head too;
    # what reaches the server is one well-formed request each time, the same body each time
    from tokenbench.spans.keys import JoinKeys

    seen: list[bytes] = []
    event = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(event), event)

    async def handle(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = [int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.startswith(b"Content-Length")]
                seen.append(head + await reader.readexactly(length[0]))
                writer.write(reply)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        target = resolved(url=f"http://127.0.0.1:{port}", read_timeout_s=5)
        clock = RunClock.start()
        async with make_session(target, clock.now) as session:
            client = StreamingClient(session, target, OpenAIWire(chat=True), clock.now, keys=JoinKeys("ab" * 8))
            request = Request(prompt="hello", max_tokens=3)
            for i in range(2):
                record = RequestRecord(point=0, id=i, scheduled_s=0.0)
                await client.send(request, record)
                assert record.outcome is Outcome.OK and len(record.chunk_times_s) == 1
            client.close()
            await asyncio.sleep(0.02)
    body = orjson.dumps(client.payload(request))  # the one encoding (orjson: compact, UTF-8)
    assert client.body(request) == body
    for i, sent in enumerate(seen):
        head, _, rest = sent.partition(b"\r\n\r\n")
        assert rest == body and f"Content-Length: {len(body)}".encode() in head.split(b"\r\n")
        assert f"X-Request-Id: {'ab' * 8}0000ffff{i:08x}".encode() in head.split(b"\r\n")
    assert len(seen) == 2


async def test_each_transport_is_an_exchange_and_writes_the_same_body():
    """An http:// target goes over clients/http1.py's pool, another over aiohttp: two Exchanges,
    the one body (the http1 one framed with its length)."""
    from tokenbench.clients.stream import AiohttpExchange, Http1Exchange

    request = Request(prompt="hi", max_tokens=4)
    bodies = []
    for url, kind in (("http://127.0.0.1:1", Http1Exchange), ("https://127.0.0.1:1", AiohttpExchange)):
        target = resolved(url=url)
        async with make_session(target) as session:
            client = StreamingClient(session, target, OpenAIWire(chat=True), time.perf_counter)
            assert type(client._exchange) is kind
            bodies.append(client.body(request))
            if kind is Http1Exchange:
                assert client.sent_bytes(request) == b"Content-Length: %d\r\n\r\n%s" % (len(bodies[-1]), bodies[-1])
            client.close()
    assert bodies[0] == bodies[1] and json.loads(bodies[0])["messages"] == [{"role": "user", "content": "hi"}]
