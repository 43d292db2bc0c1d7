"""The one streaming request path shared by every protocol: POST, read the stream, stamp chunks.

A protocol (OpenAI chat/completions, TGI, Triton, Ollama) is a small ``Wire`` (clients/wire.py): the
URL, the JSON body, the framing (SSE or newline-delimited JSON) and a ``Stream`` that reads one
decoded payload at a time and says whether it carried content. Everything about timing, retries,
outcomes and token counts lives here once, so every protocol is measured the same way.

``StreamingClient.send`` never raises for a failed request; a failure is an outcome on the record.
Only cancellation propagates (after the record is marked ``cancelled``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import aiohttp
import orjson

from tokenbench.clients.http1 import Http1Pool, header_value
from tokenbench.clients.server_report import read_report
from tokenbench.clients.structured import arguments_parse, reply_check
from tokenbench.clients.wire import ERROR_BODY_CHARS, Body, LineDecoder, SSEPayloads, Stream, WholeBody, Wire
from tokenbench.config import TargetConfig
from tokenbench.config.target import ResolvedTarget
from tokenbench.datasets.graders import grade
from tokenbench.records import (
    Expected,
    Grade,
    HttpPhases,
    JoinKey,
    Outcome,
    OutputCheck,
    Reasoning,
    Request,
    RequestRecord,
    Served,
    TokenSource,
    ToolUse,
)
from tokenbench.spans.keys import REQUEST_ID, TRACEPARENT, JoinKeys

MAX_RESENDS = 3  # re-sends of a request whose reused connection was dead before any response
# Bodies kept, encoded, by request (a prompt's body is built once, not per send; a
# dataset cycles its requests). Past this many distinct requests (sessions, unique prefixes: each
# send a new request) the book starts again, so it never grows without bound.
BODY_CACHE = 4096


class TargetUnreachable(Exception):
    """The target could not be reached or did not answer like the server --api names."""


def auth_headers(target: TargetConfig) -> dict[str, str]:
    """The API key as a bearer token, and the user's --header values (which win)."""
    key = target.api_key()
    return {**({"Authorization": f"Bearer {key}"} if key else {}), **target.headers}


class _Attempt:
    """One HTTP exchange of a record, as the trace hooks see it (``trace_request_ctx``): its
    HTTP phases are the record's (the last attempt's are kept)."""

    __slots__ = ("record", "phases", "reused", "mark")

    def __init__(self, record: RequestRecord) -> None:
        self.record = record
        self.phases = record.phases = HttpPhases()
        self.reused = False  # the pool handed out a kept-alive connection
        self.mark = 0.0  # when the attempt began waiting for the pool, or opening a connection


def _stamp_sent(now: Callable[[], float]) -> aiohttp.TraceConfig:
    """Stamp ``sent_s`` when the request body is handed to the socket, not when we asked aiohttp
    to send it. On Python < 3.12 aiohttp writes the body from a separate task, so under a burst of
    requests the gap between the two grew to ~8 ms median / 40 ms p99 at 256 streams
    (benchmarks/client_overhead.py); that lag belongs to queue delay (sent - scheduled), not TTFT.
    Also notes whether the attempt got a reused connection (only such a one is re-sent), and
    stamps the HTTP phases aiohttp alone sees: the wait for a pooled connection, a new
    connection's set-up, the headers written. A hook is one coroutine call per request (~1 µs),
    not per chunk.
    """

    async def on_chunk_sent(
        _session: aiohttp.ClientSession, ctx: SimpleNamespace, _params: aiohttp.TraceRequestChunkSentParams
    ) -> None:
        attempt = ctx.trace_request_ctx
        if attempt is not None:
            attempt.record.sent_s = now()

    async def on_reuse(
        _session: aiohttp.ClientSession, ctx: SimpleNamespace, _params: aiohttp.TraceConnectionReuseconnParams
    ) -> None:
        attempt = ctx.trace_request_ctx
        if attempt is not None:
            attempt.reused = True
            attempt.phases.conn_reused = True

    async def on_mark(_session: aiohttp.ClientSession, ctx: SimpleNamespace, _params: object) -> None:
        attempt = ctx.trace_request_ctx
        if attempt is not None:
            attempt.mark = now()

    async def on_queued_end(
        _session: aiohttp.ClientSession, ctx: SimpleNamespace, _params: aiohttp.TraceConnectionQueuedEndParams
    ) -> None:
        attempt = ctx.trace_request_ctx
        if attempt is not None:
            attempt.phases.pool_wait_s = now() - attempt.mark

    async def on_create_end(
        _session: aiohttp.ClientSession, ctx: SimpleNamespace, _params: aiohttp.TraceConnectionCreateEndParams
    ) -> None:
        attempt = ctx.trace_request_ctx
        if attempt is not None:
            attempt.phases.connect_s = now() - attempt.mark
            attempt.phases.conn_reused = False

    async def on_headers_sent(
        _session: aiohttp.ClientSession, ctx: SimpleNamespace, _params: aiohttp.TraceRequestHeadersSentParams
    ) -> None:
        attempt = ctx.trace_request_ctx
        if attempt is not None:
            attempt.phases.headers_sent_s = now()

    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(on_chunk_sent)
    trace.on_connection_reuseconn.append(on_reuse)
    trace.on_connection_queued_start.append(on_mark)
    trace.on_connection_queued_end.append(on_queued_end)
    trace.on_connection_create_start.append(on_mark)
    trace.on_connection_create_end.append(on_create_end)
    trace.on_request_headers_sent.append(on_headers_sent)
    trace.freeze()
    return trace


def _dead_reused_connection(exc: BaseException, attempt: _Attempt) -> bool:
    """The request never reached the server: a kept-alive connection from the pool was found
    closed (or reset) before any response byte. Never a connector error (aiohttp's
    ClientConnectorError subclasses ClientOSError: a refused connect must not be retried, as
    aiohttp's own client does not), and never a fresh connection (a server or proxy resetting new
    connections is a failure to report)."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        return False
    return attempt.reused and attempt.record.status is None


def make_session(target: TargetConfig, now: Callable[[], float] | None = None) -> aiohttp.ClientSession:
    """Connector ``limit=0``: aiohttp's default of 100 silently queues requests above 100 in flight
    and inflates TTFT. Keep-alive so a request does not pay a TCP handshake."""
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=75)
    timeout = aiohttp.ClientTimeout(
        total=target.request_timeout_s,
        sock_connect=target.connect_timeout_s,
        sock_read=target.read_timeout_s,
    )
    # read_bufsize: a larger high-water mark so a 1 MB event is not read in 64 KB pause/resume steps.
    traces = [_stamp_sent(now)] if now is not None else []
    return aiohttp.ClientSession(connector=connector, timeout=timeout, read_bufsize=1 << 20, trace_configs=traces)


@dataclass(frozen=True)
class ModelListing:
    """What the probe's answer lists: the model ids (the wire's reading) and each OpenAI-style
    card by its id (/v1/models' ``data``; empty where the API lists none)."""

    ids: list[str]
    cards: dict[str, dict[str, Any]]

    def card(self, model: str) -> dict[str, Any] | None:
        return self.cards.get(model)


async def probe(session: aiohttp.ClientSession, target: TargetConfig, base_url: str, wire: Wire) -> ModelListing:
    """Check the server at ``base_url`` answers before any load (with the settings' credentials);
    return what it lists (the one query of /v1/models a run makes: the model's context and
    identity are read from it too)."""
    url = base_url + wire.probe_path
    try:
        async with session.get(url, headers=auth_headers(target), timeout=aiohttp.ClientTimeout(total=15)) as resp:
            if resp.status != 200:
                body = (await resp.text())[:ERROR_BODY_CHARS]
                raise TargetUnreachable(
                    f"{url} answered HTTP {resp.status}: {body!r}. Check --url and --api "
                    f"(and the API key in ${target.api_key_env} if the server needs one)."
                )
            text = await resp.text()
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise TargetUnreachable(
            f"cannot reach {base_url} ({type(exc).__name__}: {exc}). Is the server running, and is --url right?"
        ) from exc
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    models = data.get("data") if isinstance(data, dict) else None
    cards = {str(m["id"]): m for m in models if isinstance(m, dict) and "id" in m} if isinstance(models, list) else {}
    return ModelListing(wire.model_ids(data), cards)


def served_max_model_len(listing: ModelListing, model: str) -> int | None:
    """The model's context length as the server lists it (vLLM's /v1/models ``max_model_len``),
    None when it does not say: a session's history limit when known."""
    card = listing.card(model) or {}
    value = card.get("max_model_len")
    return value if isinstance(value, int) else None


async def warm_connections(session: aiohttp.ClientSession, target: ResolvedTarget, wire: Wire, count: int) -> int:
    """Open ``count`` keep-alive connections before a load point (concurrent GETs of the probe
    path), so the first wave of requests does not pay TCP set-up inside its TTFT: 256 simultaneous
    connects added ~24 ms to the first requests' TTFT here. Returns how many succeeded."""
    url = target.url + wire.probe_path
    headers = auth_headers(target)

    async def one() -> bool:
        try:
            async with session.get(url, headers=headers) as resp:
                await resp.read()
                return resp.status == 200
        except (TimeoutError, aiohttp.ClientError, OSError):
            return False

    return sum(await asyncio.gather(*(one() for _ in range(count))))


Decoder = LineDecoder | WholeBody | SSEPayloads


class Exchange:
    """How one request goes to the target and its reply comes back: the bytes after the head, the
    connections kept, and one HTTP exchange stamped on the record (the HTTP phases, the status,
    each content chunk as its bytes arrive). Two transports: aiohttp's (``AiohttpExchange``: any
    target, https too) and clients/http1.py's pool (``Http1Exchange``: an http:// target, the
    cheaper path). StreamingClient keeps what is the same over both: the body, the join keys,
    re-sends, outcomes and tokens."""

    # The join keys' headers may follow the target's own header lines as they are (http1 writes
    # the head for the target's headers once): the target sets neither itself.
    keys_apart = False

    def framed(self, body: bytes) -> bytes:
        """What the request writes after its headers, for a body: the body itself."""
        return body

    def unframed(self, data: bytes) -> bytes:
        """The body in what ``framed`` made."""
        return data

    async def warm(self, count: int) -> int:
        """Open ``count`` keep-alive connections before a point; how many opened."""
        raise NotImplementedError

    async def exchange(
        self, data: bytes, headers: dict[str, str], extra: bytes, attempt: _Attempt, stream: Stream
    ) -> None:
        """One HTTP exchange of ``data`` (``framed``), read to its end into ``stream``; ``extra``:
        header lines after the target's own (``keys_apart``)."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the connections this transport keeps itself."""


class AiohttpExchange(Exchange):
    """The exchange over an aiohttp session (its pool, its trace hooks: _stamp_sent)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        url: str,
        target: ResolvedTarget,
        wire: Wire,
        decoder: type[Decoder],
        now: Callable[[], float],
    ) -> None:
        self._session, self._url, self._target, self._wire = session, url, target, wire
        self._decoder, self._now = decoder, now

    async def warm(self, count: int) -> int:
        return await warm_connections(self._session, self._target, self._wire, count)

    async def exchange(
        self, data: bytes, headers: dict[str, str], extra: bytes, attempt: _Attempt, stream: Stream
    ) -> None:
        """POST, then read the stream to its end, stamping content chunks."""
        now = self._now
        record, phases = attempt.record, attempt.phases
        phases.http_start_s = record.sent_s = now()  # sent_s refined by the trace hook when the body reaches the socket
        phases.pool_wait_s = 0.0  # unless the pool queues it (a hook)
        async with self._session.post(self._url, data=data, headers=headers, trace_request_ctx=attempt) as resp:
            phases.response_headers_s = now()
            record.status = resp.status
            served = resp.headers.get(self._target.replica_header)
            if served:
                record.served = Served(served, "header")
            if resp.status != 200:
                body = await resp.text(errors="replace")
                record.closed_s = now()
                stream.http_error = f"HTTP {resp.status}: {body[:ERROR_BODY_CHARS]}"
                return
            decoder = self._decoder()
            chunk_times = record.chunk_times()
            handle = stream.handle
            # Hot path: one iteration per network read. Read to EOF even after the final event so
            # the connection goes back to the pool instead of being closed with unread bytes.
            first = True
            async for raw in resp.content.iter_any():
                t = now()
                if first:
                    phases.first_body_s, first = t, False
                for payload in decoder.feed_data(raw):
                    if handle(payload):
                        chunk_times.append(t)
                if stream.failed:
                    break
            if not stream.failed:
                for payload in decoder.close_data():
                    if handle(payload):
                        chunk_times.append(now())
            record.closed_s = now()


class Http1Exchange(Exchange):
    """The exchange over clients/http1.py's keep-alive pool (an http:// target): the same stamps
    as aiohttp's, a body's bytes stamped as they arrive, not when a task resumes. The pool is made
    on the loop, at first use; the head for the target's own headers once."""

    def __init__(
        self,
        url: str,
        target: ResolvedTarget,
        headers: dict[str, str],
        decoder: type[Decoder],
        now: Callable[[], float],
    ) -> None:
        self._url, self._target, self._headers, self._decoder, self._now = url, target, headers, decoder, now
        self._pool: Http1Pool | None = None
        self._head: bytes | None = None
        self._replica_header = target.replica_header.lower().encode("latin-1")  # a fleet's: Served
        own = {k.lower() for k in headers}
        self.keys_apart = TRACEPARENT.lower() not in own and REQUEST_ID.lower() not in own

    def _http1(self) -> Http1Pool:
        if self._pool is None:
            t = self._target
            self._pool = Http1Pool(self._url, t.connect_timeout_s, t.read_timeout_s, t.request_timeout_s)
            self._head = self._pool.head(self._headers)
        return self._pool

    def framed(self, body: bytes) -> bytes:
        """The Content-Length line, the blank line and the body (written after the head as they are)."""
        return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    def unframed(self, data: bytes) -> bytes:
        return data[data.index(b"\r\n\r\n") + 4 :]

    async def warm(self, count: int) -> int:
        return await self._http1().warm(count)

    async def exchange(
        self, data: bytes, headers: dict[str, str], extra: bytes, attempt: _Attempt, stream: Stream
    ) -> None:
        now = self._now
        record, phases = attempt.record, attempt.phases
        pool = self._http1()
        phases.http_start_s = mark = now()
        phases.pool_wait_s = 0.0  # the pool has no limit: nothing waits for a connection
        conn = pool.take_idle()
        attempt.reused = phases.conn_reused = conn is not None
        if conn is None:
            conn = await pool.connect()
            phases.connect_s = now() - mark
        # data: the Content-Length line, the blank line and the body, made once (framed)
        head = self._head if self._head is not None and headers is self._headers else pool.head(headers)
        request = b"".join((head, extra, data))
        decoder = self._decoder()
        chunk_times = record.chunk_times()
        handle = stream.handle
        replica_header = self._replica_header

        def on_headers(status: int, t: float, head: bytes) -> bool:
            phases.response_headers_s, record.status = t, status
            served = header_value(head, replica_header)
            if served:
                record.served = Served(served.decode("latin-1"), "header")
            return status == 200

        def on_body(raw: bytes, t: float) -> bool:
            if phases.first_body_s is None:
                phases.first_body_s = t
            for payload in decoder.feed_data(raw):
                if handle(payload):
                    chunk_times.append(t)
            return not stream.failed

        # sent: the request written to the socket (one write: head and body), as the trace hook stamps
        error_body = await pool.exchange(conn, request, on_headers, on_body, now, record, phases)
        if error_body is not None:
            record.closed_s = now()
            text = error_body.decode("utf-8", errors="replace")
            stream.http_error = f"HTTP {record.status}: {text[:ERROR_BODY_CHARS]}"
            return
        if not stream.failed:
            for payload in decoder.close_data():
                if handle(payload):
                    chunk_times.append(now())
        record.closed_s = now()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()


def _graded(expected: Expected, reply: str) -> Grade:
    """A reply graded when it ends, so no run keeps its text to grade it (a graded run need not
    --keep-text): its answer without reasoning against the row's expected answer."""
    correct, read = grade(expected.grader, reply, expected.answer)
    return Grade(expected.grader, graded=True, correct=correct, graded_answer=read)


class StreamingClient:
    """Sends Requests to one target over one Wire and one Exchange, and records what happened."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        target: ResolvedTarget,
        wire: Wire,
        now: Callable[[], float],
        count_tokens: Callable[[str], int] | None = None,
        keep_text: bool = False,
        keys: JoinKeys | None = None,
    ) -> None:
        """``keys``: the run's join keys: each request then carries a traceparent and
        an X-Request-Id, kept on its record."""
        self._target = target
        self._wire = wire
        self._now = now
        self._count_tokens = count_tokens
        self._keep_text = keep_text
        url = wire.url(target)
        self._headers = {"Content-Type": "application/json", **auth_headers(target)}
        decoders: dict[str, type[Decoder]] = {"ndjson": LineDecoder, "json": WholeBody}
        decoder = decoders.get(wire.framing, SSEPayloads)
        # the compiled client: http:// targets over clients/http1.py's pool; others over aiohttp
        self._exchange: Exchange = (
            Http1Exchange(url, target, self._headers, decoder, now)
            if url.startswith("http://")
            else AiohttpExchange(session, url, target, wire, decoder, now)
        )
        # usage on every chunk asked for (the wire sends continuous_usage_stats only with usage)
        self._chunk_usage = bool(target.continuous_usage and target.include_usage)
        self._check = reply_check(target)  # --response-format's check of each reply
        self._tools = bool(target.tools)
        self._keys = keys
        self._bodies: dict[int, tuple[Request, bytes]] = {}  # by id(request), the request kept alive

    async def warm(self, count: int) -> int:
        """Open ``count`` keep-alive connections before a point; how many opened."""
        return await self._exchange.warm(count)

    def close(self) -> None:
        """Close the connections this client keeps itself (the session is its owner's)."""
        self._exchange.close()

    def payload(self, request: Request) -> Body:
        return self._wire.payload(request, self._target)

    def body(self, request: Request) -> bytes:
        """``request``'s body as sent: JSON-encoded once per request (a Request is frozen), then
        the same bytes each time it is sent again."""
        return self._exchange.unframed(self.sent_bytes(request))

    def sent_bytes(self, request: Request) -> bytes:
        """What ``send`` writes of ``request`` after its headers, made once per request (the
        exchange's ``framed`` body). orjson, not the standard library's json: an agent's call of
        ~80k prompt tokens (a 0.4 MB body, 1.4 MB at the longest) took 1.3 ms (4.5 ms) to encode,
        on the schedule's path between a call's parent ending and it being sent; orjson 0.2 (0.8)."""
        kept = self._bodies.get(id(request))
        if kept is not None and kept[0] is request:
            return kept[1]
        data = self._exchange.framed(orjson.dumps(self.payload(request)))
        if len(self._bodies) >= BODY_CACHE:
            self._bodies.clear()
        self._bodies[id(request)] = (request, data)
        return data

    async def send(self, request: Request, record: RequestRecord) -> None:
        data = self.sent_bytes(request)
        if self._keep_text:  # the prompt's identity beside the reply's text: two runs' replies pair by it
            record.prompt_hash = request.prompt_key()
        stream = self._wire.new_stream()
        stream.for_request(request)
        if self._chunk_usage:
            stream.chunk_usage = []
        now = self._now
        exchange = self._exchange
        # a request's own headers (a session's X-Session-ID) on top of the target's
        extra = b""  # header lines after the target's own (Exchange.keys_apart)
        keys = self._keys
        if keys is not None:  # server spans: the join key (one f-string; the run's part precomputed)
            traceparent, request_id = keys.headers(record.point, record.id, record.worker)
            record.join_key = JoinKey(traceparent, request_id)
            if exchange.keys_apart and not request.headers:  # two lines after the head made once
                headers = self._headers
                extra = f"{TRACEPARENT}: {traceparent}\r\n{REQUEST_ID}: {request_id}\r\n".encode()
            else:
                headers = {**self._headers, TRACEPARENT: traceparent, REQUEST_ID: request_id}
                if request.headers:
                    headers.update(request.headers)
        else:
            headers = {**self._headers, **dict(request.headers)} if request.headers else self._headers
        expected = request.expected
        if expected is not None:  # a graded row: graded when its reply ends ok (a failure: not graded)
            record.grade = Grade(expected.grader, graded=False)
        try:
            while True:
                attempt = _Attempt(record)
                try:
                    await exchange.exchange(data, headers, extra, attempt, stream)
                    break
                except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
                    if not _dead_reused_connection(exc, attempt) or record.retries >= MAX_RESENDS:
                        raise
                    # The server had closed the pooled keep-alive connection we reused (llama.cpp
                    # closes idle ones after 5 s): the request never reached it. Re-send, as
                    # browsers do; the lost time stays in queue delay (sent_s is the last
                    # attempt's). The pool may hand out another dead connection (a fresh-clone
                    # `make run` once lost a request on the second one), so a few re-sends, each
                    # discarding the dead connection; results count them (requests.retries).
                    record.retries += 1  # the HTTP phases are the next attempt's (its own)
        except asyncio.CancelledError:
            record.closed_s = now()
            record.outcome = Outcome.CANCELLED
            record.error = "in flight when the run stopped"
            self._finish_tokens(record, stream)
            raise
        except aiohttp.ClientConnectorError as exc:
            return self._fail(record, stream, Outcome.CONNECT_ERROR, f"{type(exc).__name__}: {exc}")
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            if not stream.done:
                waited = now() - (record.sent_s or record.scheduled_s)
                return self._fail(
                    record, stream, Outcome.TIMEOUT, f"timed out ({type(exc).__name__}) after {waited:.1f}s"
                )
            record.closed_s = now()  # the reply was complete; the server just kept the body open
        except (aiohttp.ClientError, OSError) as exc:
            return self._fail(record, stream, Outcome.STREAM_ERROR, f"{type(exc).__name__}: {exc}")
        record.outcome = self._outcome(record, stream)
        self._finish_tokens(record, stream)
        if expected is not None and record.outcome is Outcome.OK:
            record.grade = _graded(expected, stream.answer_text())

    def _fail(self, record: RequestRecord, stream: Stream, outcome: Outcome, error: str) -> None:
        record.closed_s = self._now()
        record.outcome = outcome
        record.error = error
        self._finish_tokens(record, stream)

    @staticmethod
    def _outcome(record: RequestRecord, stream: Stream) -> Outcome:
        if stream.http_error is not None:
            record.error = stream.http_error
            return Outcome.HTTP_ERROR
        if stream.failed:
            record.error = stream.error
            return Outcome.STREAM_ERROR
        if not stream.chunked:  # a pooling answer: ok when it was whole
            if stream.done:
                return Outcome.OK
            record.error = "the answer ended without its results"
            return Outcome.NO_OUTPUT
        if not record.chunk_times_s:
            record.error = "stream ended without a content chunk"
            return Outcome.NO_OUTPUT
        return Outcome.OK

    def _structure(self, record: RequestRecord, stream: Stream) -> None:
        """the reply against --response-format, and the tool calls it made."""
        check = self._check
        if check is not None:
            record.output_check = checked = OutputCheck(check.kind)
            if record.outcome is Outcome.OK:
                checked.output_parsed, checked.output_valid = check.check(stream.answer_text())
        if self._tools:
            calls = [stream.tool_calls[i] for i in sorted(stream.tool_calls)]
            calls = [c for c in calls if c.name or c.arguments]
            record.tool_use = used = ToolUse(len(calls), tool_call_chunks=stream.tool_chunks)
            first = stream.first_tool_chunk
            if first is not None and first < len(record.chunk_times_s):
                used.first_tool_call_s = record.chunk_times_s[first]
            if calls:
                arguments = ["".join(c.arguments) for c in calls]
                used.tool_args_parsed = arguments_parse(arguments)
                if self._count_tokens is not None:
                    used.tool_args_tokens = sum(self._count_tokens(a) for a in arguments)
            if (record.session is not None or record.program is not None) and calls:
                record.tool_messages = tuple(c.as_message() for c in calls)

    def _finish_tokens(self, record: RequestRecord, stream: Stream) -> None:
        if not stream.chunked and record.outcome is Outcome.OK:
            record.end_s = record.closed_s  # a pooling answer ends when its body did (no chunks)
        first_output_s = None
        if record.chunk_times_s:
            record.end_s = record.chunk_times_s[-1]
            first = stream.first_output_index(len(record.chunk_times_s))
            first_output_s = record.chunk_times_s[first] if first is not None else None
        if first_output_s is not None or stream.reasoning_chunks or stream.reasoning_tokens is not None:
            record.reasoning = Reasoning(first_output_s, stream.reasoning_chunks, stream.reasoning_tokens)
        record.prompt_tokens = stream.prompt_tokens
        record.response_id = stream.response_id
        record.server_output_tokens = stream.completion_tokens
        record.server_timings = stream.server_timings
        if (
            stream.server_timings is not None
            or stream.server_metrics is not None
            or stream.sglext is not None
            or stream.decoded_per_iter is not None
        ):
            record.speculation, record.server_timing = read_report(
                stream.server_timings, stream.server_metrics, stream.sglext, stream.decoded_per_iter
            )
        record.cached_prompt_tokens = stream.cached_prompt_tokens
        record.finish_reason = stream.finish_reason
        record.end_marker = stream.done
        record.chunk_tokens, record.first_chunk_tokens = stream.chunk_tokens()
        if self._check is not None or self._tools:
            self._structure(record, stream)
        # A session's next turn sends this reply back as history, so a session's record always
        # holds its text (records.jsonl still stores it only with --keep-text: RunWriter): the
        # answer without reasoning, as a chat client sends back (vLLM's reasoning docs; guidellm).
        # An agent program's call is the same: its children's prompts carry its reply.
        session = record.session is not None or record.program is not None
        keep = self._keep_text or session
        text = "".join(stream.text) if (self._count_tokens or keep) else None
        if self._count_tokens is not None and text is not None and record.chunk_times_s:
            record.client_output_tokens = self._count_tokens(text)
        if keep:
            record.output_text = stream.answer_text() if session else text
        if record.server_output_tokens is not None and record.outcome is Outcome.OK:
            record.output_tokens = record.server_output_tokens
            record.output_tokens_source = TokenSource.SERVER
        elif record.client_output_tokens is not None:
            record.output_tokens = record.client_output_tokens
            record.output_tokens_source = TokenSource.TOKENIZER
        elif record.chunk_times_s:
            record.output_tokens = len(record.chunk_times_s)
            record.output_tokens_source = TokenSource.CHUNKS
