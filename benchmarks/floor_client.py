"""The bare-socket floor: the least a client can do per request against `tokenbench mock`.

One asyncio Protocol per keep-alive connection, each a closed-loop user: the request's bytes are
built once (one body for every request), written to the socket, and the reply is scanned as it
arrives: SSE events split on a blank line, a content event stamped with its arrival time, the
response id read from the first event, the reply done at the chunked body's last chunk (or, for
a whole JSON answer, at its Content-Length). No JSON parsing, no records, no bookkeeping: what
tokenbench costs above this is its own overhead (benchmarks/request_overhead.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

CONTENT = b'"content":"'
EMPTY = b'"content":""'
ID = b'"id":'


def _rid(piece: bytes) -> str:
    """The first ``"id": "..."`` value in ``piece`` ("" without one)."""
    i = piece.find(ID)
    if i < 0:
        return ""
    start = piece.index(b'"', i + 5) + 1
    return piece[start : piece.index(b'"', start)].decode()


@dataclass
class FloorRecord:
    sent_s: float
    chunk_times_s: list[float] = field(default_factory=list)
    end_s: float = 0.0
    response_id: str = ""


def request_bytes(host: str, port: int, path: str, body: dict[str, object]) -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\nAccept: */*\r\n\r\n"
    )
    return head.encode() + data


class _Conn(asyncio.Protocol):
    def __init__(self, streaming: bool) -> None:
        self.streaming = streaming
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.record: FloorRecord | None = None
        self.tail = b""
        self.done = False
        self.length = -1  # a whole answer's body length, once its headers are read

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not asyncio.Transport's subclass

    def start(self, data: bytes, record: FloorRecord, waiter: asyncio.Future[None]) -> None:
        self.record, self.waiter, self.tail, self.done, self.length = record, waiter, b"", False, -1
        assert self.transport is not None
        self.transport.write(data)
        record.sent_s = time.perf_counter()

    def data_received(self, data: bytes) -> None:
        t = time.perf_counter()
        record = self.record
        if record is None:
            return
        buf = self.tail + data
        if not self.streaming:
            if self.length < 0:
                head, sep, rest = buf.partition(b"\r\n\r\n")
                if not sep:
                    self.tail = buf
                    return
                i = head.lower().find(b"content-length:")
                self.length = int(head[i + 15 :].split(b"\r\n", 1)[0])
                buf = rest
            if len(buf) >= self.length:
                record.response_id = _rid(buf)
                self._end(t)
            else:
                self.tail = buf
            return
        pieces = buf.split(b"\n\n")
        self.tail = pieces.pop()
        for piece in pieces:
            if not record.response_id:
                record.response_id = _rid(piece)
            if CONTENT in piece and EMPTY not in piece:
                record.chunk_times_s.append(t)
            elif b"[DONE]" in piece:
                self.done = True
        if self.done and self.tail.endswith(b"0\r\n\r\n"):
            self._end(t)

    def _end(self, t: float) -> None:
        assert self.record is not None and self.waiter is not None
        self.record.end_s = t
        self.record, waiter = None, self.waiter
        waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc or ConnectionError("closed"))


async def run_floor(
    host: str, port: int, path: str, body: dict[str, object], users: int, requests: int, streaming: bool
) -> list[FloorRecord]:
    """``requests`` in all from ``users`` closed-loop connections; the records, in the order they ended."""
    loop = asyncio.get_running_loop()
    data = request_bytes(host, port, path, body)
    conns = [(await loop.create_connection(lambda: _Conn(streaming), host, port))[1] for _ in range(users)]
    left = [requests]
    done: list[FloorRecord] = []

    async def user(conn: _Conn) -> None:
        while left[0] > 0:
            left[0] -= 1
            record = FloorRecord(0.0)
            waiter = loop.create_future()
            conn.start(data, record, waiter)
            await waiter
            done.append(record)

    await asyncio.gather(*(user(c) for c in conns))
    for c in conns:
        assert c.transport is not None
        c.transport.close()
    return done
