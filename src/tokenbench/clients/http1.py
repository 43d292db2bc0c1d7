"""A plain-HTTP/1.1 keep-alive client for the request path: what aiohttp does per
request, less its per-request set-up.

A profile of 128 streams of 4-token replies put aiohttp's request set-up and reads at ~40-55% of
the client's CPU per request (ClientRequest, headers, cookie jar, trace signals, payload registry,
timers, a write task per request on Python < 3.12); a bare socket needs a fraction of that. So
for ``http://`` targets the exchange runs over this pool of asyncio Protocols: the request's head
is built from a prefix made once, written with its body in one write, and the response is parsed
as it arrives (status line, headers, a chunked / Content-Length / to-close body), its body bytes
handed to the caller's ``on_body`` with the time they arrived. ``https://`` targets keep aiohttp
(clients/stream.py chooses).

Failures raise aiohttp's own exception types, so stream.py's outcomes and its re-send rule read
them as they read aiohttp's: a refused connect is ``ClientConnectorError``, a connect that timed out
``ConnectionTimeoutError``, a connection closed before any response byte ``ServerDisconnectedError``
(reset: ``ClientOSError``), a body cut short ``ClientPayloadError``, silence past the read timeout
``SocketTimeoutError`` and the whole request past its timeout ``TimeoutError``. No redirects are
followed and no cookies are kept (an LLM endpoint answers its POST itself); a body the server
encodes (gzip) is an error, as ``Accept-Encoding: identity`` asked for none.
"""

from __future__ import annotations

import asyncio
from base64 import b64encode
from collections.abc import Callable
from typing import Protocol
from urllib.parse import unquote, urlsplit

import aiohttp
from aiohttp.client_reqrep import ConnectionKey

from tokenbench.records import HttpPhases

BodySink = Callable[[bytes, float], bool]  # body bytes and when they arrived -> False: stop reading
# chunk-size lines as read, by their bytes (a dict look-up, not an int() a chunk; a
# server's events are a few sizes), up to this many
SIZES_KEPT = 4096
_SIZES: dict[bytes, int] = {}
# response heads as read, by their bytes (~1.4 µs a response to parse, a look-up to
# find again; a server's heads differ by their Date line, a second apart), up to this many
HEADS_KEPT = 64
_HEADS: dict[bytes, tuple[int, str, int, bool]] = {}


class _Sent(Protocol):
    """Where an exchange stamps when its request was written (a RequestRecord; its headers, in
    the attempt's HttpPhases)."""

    sent_s: float | None


class _Response:
    """One response being read: its status and headers, then its body to the sink."""

    __slots__ = (
        "conn",
        "now",
        "on_headers",
        "on_body",
        "done",
        "head",
        "status",
        "mode",
        "left",
        "chunk_buf",
        "keep_alive",
        "got_bytes",
        "error_body",
        "expires",
    )

    def __init__(
        self,
        conn: _Conn,
        now: Callable[[], float],
        on_headers: Callable[[int, float, bytes], bool],
        on_body: BodySink,
        done: asyncio.Future[None],
    ) -> None:
        self.conn = conn
        self.now = now
        self.on_headers = on_headers  # (status, t, head) -> True: hand its body to on_body (False: keep it)
        self.on_body = on_body
        self.done = done
        self.head = b""
        self.status = 0
        self.mode = ""  # "chunked", "length", "close" once the headers are read
        self.left = 0  # length: bytes of the body still to come; chunked: of the current chunk
        self.chunk_buf = b""  # chunked: what is left of a size line or a chunk's CRLF
        self.keep_alive = True
        self.got_bytes = False
        self.error_body: bytearray | None = None  # a non-2xx answer's body, kept for its error text
        self.expires = 0.0  # when the whole request times out (loop time)

    def feed(self, data: bytes) -> None:
        t = self.now()
        self.got_bytes = True
        if self.mode == "chunked":  # a stream's reads after its headers: the hot path
            if self.left == 0 and not self.chunk_buf:
                # the usual read: one whole chunk (a server's event) to the body, without the
                # chunk loop (~0.5 µs of each of a 4-token reply's five body reads)
                eol = data.find(b"\r\n")
                size = _SIZES.get(data[:eol]) if eol > 0 else None
                if size and len(data) == eol + size + 4 and data.endswith(b"\r\n"):
                    self._body(data[eol + 2 : -2], t)
                    return
            self._chunked(data, t)
            return
        if not self.mode:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                if len(self.head) > 65536:
                    self.fail(aiohttp.ClientResponseError(_info(), (), message="response headers too long"))
                return
            data = self.head[end + 4 :]
            if not self._headers(self.head[:end], t):
                return
            if self._empty():
                self.finish(t)
                return
            if not data:
                return
        self._feed_body(data, t)

    def _empty(self) -> bool:
        """The response has no body (Content-Length: 0, 204, 304)."""
        return self.mode == "length" and self.left == 0

    def _feed_body(self, data: bytes, t: float) -> None:
        if self.mode == "length":
            if len(data) >= self.left:
                body, self.left = data[: self.left], 0
                self._body(body, t)
                if not self.done.done():
                    self.finish(t)
            else:
                self.left -= len(data)
                self._body(data, t)
        elif self.mode == "chunked":
            self._chunked(data, t)
        else:  # to close: the body ends when the server closes
            self._body(data, t)

    def _headers(self, head: bytes, t: float) -> bool:
        read = _HEADS.get(head)
        if read is None:
            parsed = _read_head(head)
            if isinstance(parsed, Exception):
                self.fail(parsed)
                return False
            if len(_HEADS) >= HEADS_KEPT:
                _HEADS.clear()
            _HEADS[head] = read = parsed
        self.status, self.mode, self.left, self.keep_alive = read
        if not self.on_headers(self.status, t, head):
            self.error_body = bytearray()
        return True

    def _body(self, data: bytes, t: float) -> None:
        if not data or self.done.done():
            return
        if self.error_body is not None:
            self.error_body += data
        elif not self.on_body(data, t):  # the caller stops reading: the connection cannot be reused
            self.keep_alive = False
            self.finish(t)

    def _chunked(self, data: bytes, t: float) -> None:
        if self.done.done():
            return
        if self.chunk_buf:  # a size line or a chunk's CRLF cut by the last read
            data, self.chunk_buf = self.chunk_buf + data, b""
        pos, n, left = 0, len(data), self.left
        out: list[bytes] = []
        while pos < n:
            if left > 0:  # inside a chunk's data
                take = min(left, n - pos)
                out.append(data[pos : pos + take])
                pos += take
                left -= take
                if left == 0:
                    left = -1  # its CRLF next
                continue
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                self.chunk_buf, pos = data[pos:], n
                break
            line, pos = data[pos:eol], eol + 2
            if left == -1:  # the CRLF after a chunk's data
                if line:
                    self.fail(aiohttp.ClientPayloadError("malformed chunked body"))
                    return
                left = 0
                continue
            if left == -2:  # a trailer line; the empty one ends the body
                if not line:
                    self.left = left
                    if out:
                        self._body(out[0] if len(out) == 1 else b"".join(out), t)
                    self.finish(t)
                    return
                continue
            size = _SIZES.get(line)
            if size is None:
                try:
                    size = int(line.split(b";", 1)[0] if b";" in line else line, 16)
                except ValueError:
                    self.fail(aiohttp.ClientPayloadError(f"bad chunk size {line[:40]!r}"))
                    return
                if len(_SIZES) < SIZES_KEPT:
                    _SIZES[line] = size
            if size == 0:
                left = -2
            elif data[pos + size : pos + size + 2] == b"\r\n":  # the whole chunk and its CRLF: the usual read
                out.append(data[pos : pos + size])
                pos += size + 2
            else:
                left = size
        self.left = left
        if out:
            self._body(out[0] if len(out) == 1 else b"".join(out), t)

    def finish(self, t: float) -> None:
        if not self.done.done():
            self.done.set_result(None)
        self.conn.exchange_ended(self)

    def fail(self, exc: BaseException) -> None:
        self.keep_alive = False
        if not self.done.done():
            self.done.set_exception(exc)
        self.conn.exchange_ended(self)

    def lost(self, exc: BaseException | None) -> None:
        """The server closed the connection (``exc``: how, None for a clean close)."""
        if self.done.done():
            return
        if self.mode == "close":
            self.finish(self.now())
        elif not self.got_bytes:
            if isinstance(exc, OSError):
                self.fail(aiohttp.ClientOSError(exc.errno or 0, str(exc)))
            else:
                self.fail(aiohttp.ServerDisconnectedError())
        else:
            self.fail(aiohttp.ClientPayloadError("Response payload is not completed"))


def _read_head(head: bytes) -> tuple[int, str, int, bool] | Exception:
    """A response head's (status, body mode, body length, keep-alive), or the error to fail with:
    the mode "chunked", "length" (with the length) or "close" (the body ends when the server
    closes)."""
    eol = head.find(b"\r\n")
    first = head if eol < 0 else head[:eol]
    parts = first.split(b" ", 2)
    try:
        status = int(parts[1])
    except (IndexError, ValueError):
        return aiohttp.ClientResponseError(_info(), (), message=f"bad status line {first[:80]!r}")
    version_10 = parts[0] == b"HTTP/1.0"
    keep_alive = not version_10
    # the four fields read, each its last line's value (found in the lowered head,
    # not by splitting every line: ~3x less work a response)
    fields = head[eol:] if eol >= 0 else b""
    lowered = fields.lower()
    length = None
    chunked = False
    if (value := _field(fields, lowered, b"\r\ncontent-length:")) is not None:
        try:
            length = int(value)
        except ValueError:
            return aiohttp.ClientResponseError(_info(), (), message=f"bad Content-Length {value[:40]!r}")
    if (value := _field(fields, lowered, b"\r\ntransfer-encoding:")) is not None:
        chunked = b"chunked" in value.lower()
    if (value := _field(fields, lowered, b"\r\nconnection:")) is not None:
        v = value.lower()
        keep_alive = v == b"keep-alive" if version_10 else v != b"close"
    value = _field(fields, lowered, b"\r\ncontent-encoding:")
    if value is not None and value.lower() not in (b"identity", b""):
        return aiohttp.ClientPayloadError(f"Content-Encoding {value.decode()!r} not asked for")
    if status in (204, 304) or 100 <= status < 200:
        return status, "length", 0, keep_alive
    if chunked:
        return status, "chunked", 0, keep_alive
    if length is not None:
        return status, "length", length, keep_alive
    return status, "close", 0, False


def header_value(head: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` (lower case, no colon) in a response ``head`` (status line and
    header lines), stripped; None without one. Read once a response, off the per-chunk path."""
    return _field(head, head.lower(), b"\r\n" + name + b":")


def _field(fields: bytes, lowered: bytes, name: bytes) -> bytes | None:
    """The value of the last header line ``name`` (``\\r\\nname:``, lower case) starts in
    ``fields`` (the head after its status line; ``lowered``: the same, lower case), stripped;
    None without one."""
    start = lowered.rfind(name)
    if start < 0:
        return None
    start += len(name)
    end = fields.find(b"\r\n", start)
    return (fields[start:end] if end >= 0 else fields[start:]).strip()


def _info() -> aiohttp.RequestInfo:
    from multidict import CIMultiDict, CIMultiDictProxy
    from yarl import URL

    return aiohttp.RequestInfo(URL("http://localhost/"), "POST", CIMultiDictProxy(CIMultiDict()))


class _Conn(asyncio.Protocol):
    """One keep-alive connection: at most one response read at a time."""

    def __init__(self, pool: Http1Pool) -> None:
        self.pool = pool
        self.clock = pool.loop.time  # the loop's clock: the read timeout's
        self.transport: asyncio.Transport | None = None
        self.response: _Response | None = None
        self.closed = False
        self.last_read = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass of asyncio's

    def data_received(self, data: bytes) -> None:
        response = self.response
        if response is None:  # bytes nobody asked for: this connection is not reusable
            self.close()
            return
        self.last_read = self.clock()
        response.feed(data)

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        response = self.response
        if response is not None:
            response.lost(exc)

    def reading(self, response: _Response) -> bool:
        """``response`` is the one this connection reads. (A method, not ``conn.response is
        response`` inline: after ``conn.response = response`` mypy narrows the attribute, and the
        mypyc-compiled module then checks its type on the read: TypeError when it is None.)"""
        return self.response is response

    def exchange_ended(self, response: _Response) -> None:
        if self.response is response:
            self.response = None
            if not response.keep_alive:
                self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Http1Pool:
    """Keep-alive connections to one ``http://`` origin, opened as needed and never limited in
    number (as stream.make_session's connector: ``limit=0``)."""

    def __init__(self, url: str, connect_timeout_s: float, read_timeout_s: float, total_timeout_s: float) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"Http1Pool serves http:// URLs, not {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.host_header = parts.netloc.rsplit("@", 1)[-1]
        # credentials in the URL: Basic auth, as aiohttp sends them (a header given wins)
        self.basic = (
            "Basic " + b64encode(f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()).decode()
            if parts.username
            else None
        )
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.total_timeout_s = total_timeout_s
        self.idle: list[_Conn] = []
        # the compiled client: the timeouts are checked by one timer of the pool's every TICK, not two
        # timers a request (set and cancelled: ~6% of the client's Python time a 4-token reply);
        # a timeout fires up to a tick late (a 20th of the shorter timeout, 5 ms to 1 s)
        self.in_flight: set[_Response] = set()
        self.tick_s = min(max(min(read_timeout_s, total_timeout_s) / 20, 0.005), 1.0)
        self._sweep: asyncio.TimerHandle | None = None
        self.loop = asyncio.get_running_loop()
        self._key = ConnectionKey(self.host, self.port, False, True, None, None, None)

    def head(self, headers: dict[str, str]) -> bytes:
        """A POST's head up to (not including) its Content-Length line, for these headers."""
        lines = [f"POST {self.path} HTTP/1.1", f"Host: {self.host_header}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if self.basic is not None and not any(k.lower() == "authorization" for k in headers):
            lines.append(f"Authorization: {self.basic}")
        if not any(k.lower() == "accept" for k in headers):
            lines.append("Accept: */*")
        lines.append("Accept-Encoding: identity")
        return ("\r\n".join(lines) + "\r\n").encode("latin-1")

    async def acquire(self) -> tuple[_Conn, bool]:
        """A connection and whether it was reused (kept alive from an earlier exchange)."""
        conn = self.take_idle()
        return (conn, True) if conn is not None else (await self.connect(), False)

    def take_idle(self) -> _Conn | None:
        """A kept-alive connection still open, None without one (the usual case needs
        no coroutine of ``acquire``'s)."""
        idle = self.idle
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn
        return None

    async def connect(self) -> _Conn:
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, conn = await self.loop.create_connection(lambda: _Conn(self), self.host, self.port)
        except TimeoutError as exc:
            raise aiohttp.ConnectionTimeoutError(f"Connection timeout to host http://{self.host}:{self.port}") from exc
        except OSError as exc:
            raise aiohttp.ClientConnectorError(self._key, exc) from exc
        return conn

    def release(self, conn: _Conn) -> None:
        if not conn.closed and conn.response is None:
            self.idle.append(conn)

    async def warm(self, count: int) -> int:
        """Open ``count`` connections more into the pool; how many opened."""
        opened = await asyncio.gather(*(self.connect() for _ in range(count)), return_exceptions=True)
        conns = [c for c in opened if isinstance(c, _Conn)]
        self.idle.extend(conns)
        return len(conns)

    async def exchange(
        self,
        conn: _Conn,
        data: bytes,
        on_headers: Callable[[int, float, bytes], bool],
        on_body: BodySink,
        now: Callable[[], float],
        sent: _Sent,
        phases: HttpPhases,
    ) -> bytes | None:
        """Write ``data`` (a whole request) on ``conn`` and read its response to the end: the
        headers to ``on_headers``, the body to ``on_body`` (or kept and returned, when
        on_headers said not to hand it over). The connection goes back to the pool when it can
        be reused."""
        loop = self.loop
        done: asyncio.Future[None] = loop.create_future()
        response = _Response(conn, now, on_headers, on_body, done)
        conn.response = response
        conn.last_read = loop.time()
        assert conn.transport is not None
        # stamped before the write, which copies the whole request into the socket (a 2 MB image
        # request: ~1 ms, more if this process loses its core meanwhile); the server's clock may start
        # before the write returns (a flaky TTFT bound in test_images_runs read 4 ms short)
        phases.headers_sent_s = sent.sent_s = now()
        conn.transport.write(data)
        response.expires = conn.last_read + self.total_timeout_s
        in_flight = self.in_flight
        in_flight.add(response)
        if self._sweep is None:
            self._sweep = loop.call_later(self.tick_s, self._check)
        try:
            await done
        finally:
            in_flight.discard(response)
            if not done.done() or conn.reading(response):  # cancelled mid-response
                conn.response = None
                conn.close()
        self.release(conn)
        return bytes(response.error_body) if response.error_body is not None else None

    def _check(self) -> None:
        """Every tick while requests are in flight: fail each one past its whole-request timeout
        (TimeoutError) or silent longer than the read timeout since its last read."""
        now = self.loop.time()
        silent = now - self.read_timeout_s
        for response in [r for r in self.in_flight if now >= r.expires or r.conn.last_read <= silent]:
            if response.done.done():
                continue
            if now >= response.expires:
                response.fail(TimeoutError())
            else:
                message = f"Timeout on reading data from socket ({self.read_timeout_s} s)"
                response.fail(aiohttp.SocketTimeoutError(message))
        self._sweep = self.loop.call_later(self.tick_s, self._check) if self.in_flight else None

    def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for conn in self.idle:
            conn.close()
        self.idle.clear()
