"""clients/http1.py: the plain-HTTP/1.1 pool parses what a server may answer, split at
any byte, and fails with aiohttp's own exception types (stream.py's outcomes read them)."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from tokenbench.clients.http1 import Http1Pool
from tokenbench.records import HttpPhases

CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"b\r\ndata: one\n\n\r\n"
    b"b\r\ndata: two\n\n\r\n"
    b"0\r\n\r\n"
)


async def _server(reply: bytes | list[bytes], pieces: int = 1, close: bool = False, seen: list[bytes] | None = None):
    """A server answering each request head with ``reply``, written in ``pieces`` parts (a list:
    each of its parts written apart, 2 ms after the one before: a read each)."""

    async def handle(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = [int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length")]
                body = await reader.readexactly(length[0]) if length else b""
                if seen is not None:
                    seen.append(head + body)
                if isinstance(reply, list):
                    parts = reply
                else:
                    step = max(1, -(-len(reply) // pieces))
                    parts = [reply[i : i + step] for i in range(0, len(reply), step)]
                for part in parts:
                    writer.write(part)
                    await writer.drain()
                    await asyncio.sleep(0.002)
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


class _Sent:
    sent_s: float | None = None


async def _exchange(pool: Http1Pool, data: bytes = b"{}"):
    got: list[bytes] = []
    status: list[int] = []

    def on_headers(code: int, _t: float, _head: bytes) -> bool:
        status.append(code)
        return code == 200

    def on_body(raw: bytes, _t: float) -> bool:
        got.append(raw)
        return True

    conn, reused = await pool.acquire()
    request = pool.head({"Content-Type": "application/json"}) + b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
    error = await pool.exchange(conn, request, on_headers, on_body, time.perf_counter, _Sent(), HttpPhases())
    return status[0] if status else None, b"".join(got), error, reused


@pytest.mark.parametrize("pieces", [1, 3, 17, len(CHUNKED)])
async def test_a_chunked_body_split_anywhere_reads_whole_and_the_connection_is_kept(pieces):
    server, port = await _server(CHUNKED, pieces)
    async with server:
        pool = Http1Pool(f"http://127.0.0.1:{port}/v1/x", 5, 5, 30)
        for i in range(2):
            status, body, error, reused = await _exchange(pool)
            assert (status, body, error, reused) == (200, b"data: one\n\ndata: two\n\n", None, i == 1)
        pool.close()
        await asyncio.sleep(0.02)  # the server sees the connections close before the loop ends


async def test_content_length_an_error_status_and_a_body_to_close():
    cases = [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", False, (200, b"hello", None)),
        (b"HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy", False, (503, b"", b"busy")),
        (b"HTTP/1.0 200 OK\r\n\r\nuntil close", True, (200, b"until close", None)),
    ]
    for reply, close, want in cases:
        server, port = await _server(reply, 2, close=close)
        async with server:
            pool = Http1Pool(f"http://127.0.0.1:{port}", 5, 5, 30)
            assert (await _exchange(pool))[:3] == want
            pool.close()
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.02)  # the server sees the connections close before the loop ends


async def test_the_head_names_the_host_path_and_url_credentials():
    seen: list[bytes] = []
    server, port = await _server(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", seen=seen)
    async with server:
        pool = Http1Pool(f"http://u:p%40ss@127.0.0.1:{port}/a/b?q=1", 5, 5, 30)
        assert (await _exchange(pool, b'{"k": 1}'))[:3] == (200, b"", None)
        pool.close()
        await asyncio.sleep(0.02)  # the server sees the connections close before the loop ends
    head = seen[0].decode()
    assert head.startswith("POST /a/b?q=1 HTTP/1.1\r\n") and f"Host: 127.0.0.1:{port}\r\n" in head
    assert "Authorization: Basic dTpwQHNz\r\n" in head  # base64 of u:p@ss
    assert "Accept-Encoding: identity\r\n" in head and head.endswith('\r\n\r\n{"k": 1}')


async def test_failures_are_aiohttps_types():
    # cut mid-body: the payload is incomplete
    server, port = await _server(CHUNKED[:70], close=True)
    async with server:
        with pytest.raises(aiohttp.ClientPayloadError):
            await _exchange(Http1Pool(f"http://127.0.0.1:{port}", 5, 5, 30))
    # closed before any response byte
    server, port = await _server(b"", close=True)
    async with server:
        with pytest.raises((aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)):
            await _exchange(Http1Pool(f"http://127.0.0.1:{port}", 5, 5, 30))
    # silence longer than the read timeout
    server, port = await _server(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    async with server:
        with pytest.raises(aiohttp.SocketTimeoutError):
            await _exchange(Http1Pool(f"http://127.0.0.1:{port}", 5, 0.1, 30))
    # a head that cannot be read: an error of the response, not an exception in the protocol
    server, port = await _server(b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n", close=True)
    async with server:
        with pytest.raises(aiohttp.ClientResponseError, match="Content-Length"):
            await _exchange(Http1Pool(f"http://127.0.0.1:{port}", 5, 5, 30))
        await asyncio.sleep(0.02)  # the server sees the connection close before the loop ends
    # nobody listening
    from tokenbench.common.procs import free_port

    with pytest.raises(aiohttp.ClientConnectorError):
        await _exchange(Http1Pool(f"http://127.0.0.1:{free_port()}", 5, 5, 30))


# the compiled client: whole chunks in one read take a shortcut; these take every other branch
ODD_CHUNKS = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5;ext=1\r\nhello\r\n"  # a chunk extension
    b"0006\r\n world\r\n"  # a size with leading zeros
    b"1\r\n!\r\n2\r\n!!\r\n"  # two chunks in a row
    b"0\r\nX-Trailer: 1\r\n\r\n"  # a trailer
)


@pytest.mark.parametrize("pieces", [1, 2, 5, len(ODD_CHUNKS)])
async def test_chunk_extensions_trailers_and_chunks_across_reads(pieces):
    server, port = await _server(ODD_CHUNKS, pieces)
    async with server:
        pool = Http1Pool(f"http://127.0.0.1:{port}", 5, 5, 30)
        for i in range(2):  # the trailer read whole: the connection is reused
            assert await _exchange(pool) == (200, b"hello world!!!", None, i == 1)
        pool.close()
        await asyncio.sleep(0.02)


# a stream's chunks each in a read of its own: _Response.feed's one-whole-chunk path,
# with sizes first seen and seen before, an upper-case size, and a read that is not one chunk
WHOLE_CHUNKS = [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"b\r\ndata: one\n\n\r\n",
    b"b\r\ndata: two\n\n\r\n",
    b"1F\r\ndata: a longer event than two\n\n\r\n",
    b"b\r\ndata: six\n\n\r\nb\r\ndata: ten\n\n\r\n",  # two chunks: the chunk loop
    b"b\r\ndata: 3rd",  # a chunk cut by a read, then its rest and the last chunk
    b"\n\n\r\n0\r\n\r\n",
]


async def test_chunks_each_read_whole_reach_the_sink_as_they_are():
    server, port = await _server(WHOLE_CHUNKS)
    async with server:
        pool = Http1Pool(f"http://127.0.0.1:{port}", 5, 5, 30)
        for i in range(2):
            status, body, error, reused = await _exchange(pool)
            assert (status, error, reused) == (200, None, i == 1)
            assert body == b"".join(
                [b"data: one\n\n", b"data: two\n\n", b"data: a longer event than two\n\n"]
                + [b"data: six\n\n", b"data: ten\n\n", b"data: 3rd\n\n"]
            )
        pool.close()
        await asyncio.sleep(0.02)


async def test_a_sink_that_stops_on_a_whole_chunk_ends_the_exchange_and_the_connection():
    server, port = await _server(WHOLE_CHUNKS)
    async with server:
        pool = Http1Pool(f"http://127.0.0.1:{port}", 5, 5, 30)
        got: list[bytes] = []

        def on_body(raw: bytes, _t: float) -> bool:
            got.append(raw)
            return len(got) < 2

        conn, _ = await pool.acquire()
        request = pool.head({}) + b"Content-Length: 2\r\n\r\n{}"
        assert (
            await pool.exchange(conn, request, lambda *_: True, on_body, time.perf_counter, _Sent(), HttpPhases())
            is None
        )
        assert got == [b"data: one\n\n", b"data: two\n\n"] and conn.closed and not pool.idle
        await asyncio.sleep(0.02)


async def test_an_error_status_keeps_its_chunked_body_read_a_chunk_at_a_time():
    head = b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n"
    server, port = await _server([head, b"4\r\nbusy\r\n", b"5\r\n, try\r\n", b"0\r\n\r\n"])
    async with server:
        pool = Http1Pool(f"http://127.0.0.1:{port}", 5, 5, 30)
        assert await _exchange(pool) == (503, b"", b"busy, try", False)
        pool.close()
        await asyncio.sleep(0.02)


@pytest.mark.parametrize(
    "body",
    [
        b"5\r\nhelloXX\r\n0\r\n\r\n",  # a chunk's data not followed by its CRLF
        b"zz\r\nhello\r\n0\r\n\r\n",  # a size that is not hex
    ],
)
async def test_a_malformed_chunked_body_is_a_payload_error(body):
    reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    server, port = await _server(reply)
    async with server:
        pool = Http1Pool(f"http://127.0.0.1:{port}", 5, 5, 30)
        with pytest.raises(aiohttp.ClientPayloadError):
            await _exchange(pool)
        assert not pool.idle  # the connection is not reused
        await asyncio.sleep(0.02)  # the server sees the connection close before the loop ends
    await asyncio.sleep(0.02)


async def test_header_names_in_any_case_and_the_last_line_of_a_field_wins():
    # the compiled client: the fields are found in the lowered head; their values keep their own case
    reply = (
        b"HTTP/1.1 200 OK\r\ncontent-length: 99\r\nTRANSFER-ENCODING: Chunked\r\nConnection: keep-alive\r\n"
        b"connection: Close\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    )
    server, port = await _server(reply)
    async with server:
        pool = Http1Pool(f"http://127.0.0.1:{port}", 5, 5, 30)
        assert await _exchange(pool) == (200, b"abc", None, False)
        assert not pool.idle  # Connection: close, the last line: not kept
        await asyncio.sleep(0.02)
    server, port = await _server(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Encoding: GZip\r\n\r\nxx")
    async with server:
        pool = Http1Pool(f"http://127.0.0.1:{port}", 5, 5, 30)
        with pytest.raises(aiohttp.ClientPayloadError, match="'GZip' not asked for"):
            await _exchange(pool)
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.02)


async def test_the_timeouts_fire_on_time_from_the_pools_one_timer():
    # the compiled client: one timer of the pool's checks every request in flight, a tick = a 20th of the
    # shorter timeout: the read timeout after that much silence, the whole request's even
    # while bytes keep coming; each never early
    trickle = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1\r\nx\r\n" * 400
    server, port = await _server(trickle, pieces=400)  # a chunk every ~2 ms for ~0.8 s
    async with server:
        pool = Http1Pool(f"http://127.0.0.1:{port}", 5, 0.5, 0.3)
        assert pool.tick_s == pytest.approx(0.015)
        t0 = time.perf_counter()
        with pytest.raises(TimeoutError) as caught:
            await _exchange(pool)
        assert not isinstance(caught.value, aiohttp.SocketTimeoutError)  # the whole request's
        assert 0.3 <= time.perf_counter() - t0 < 0.7  # (a loaded machine runs late)
        assert not pool.in_flight
        await asyncio.sleep(0.02)
    server, port = await _server(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    async with server:
        pool = Http1Pool(f"http://127.0.0.1:{port}", 5, 0.2, 30)
        assert pool.tick_s == pytest.approx(0.01)
        t0 = time.perf_counter()
        with pytest.raises(aiohttp.SocketTimeoutError):
            await _exchange(pool)
        assert 0.2 <= time.perf_counter() - t0 < 0.6
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.02)
