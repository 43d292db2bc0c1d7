"""OpenAI-compatible streaming client: /v1/chat/completions and /v1/completions.

Owns the network side of a request: it fills a RequestRecord with the send time, the arrival time
of every content chunk, the end, the server's usage and the outcome. It never raises for a failed
request; a failure is an outcome on the record. Only cancellation propagates (after the record is
marked ``cancelled``).

Connections: one aiohttp session, connector ``limit=0`` (aiohttp's default of 100 silently queues
requests above 100 in flight and inflates TTFT), keep-alive so a request does not pay a TCP
handshake. Reads use ``iter_any()`` which has no line-size ceiling, fed to our SSE decoder.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp

from ..config import TargetConfig
from ..records import Outcome, Request, RequestRecord, TokenSource
from .sse import SSEDecoder

from orjson import loads as _loads  # event payloads are parsed on the hot path

_ERROR_BODY_CHARS = 500


class TargetUnreachable(Exception):
    """The target could not be reached or did not answer like an OpenAI-compatible server."""


def _stamp_sent(now: Callable[[], float]) -> aiohttp.TraceConfig:
    """Stamp ``sent_s`` when the request body is handed to the socket, not when we asked aiohttp
    to send it. On Python < 3.12 aiohttp writes the body from a separate task, so under a burst of
    requests the gap between the two grew to ~8 ms median / 40 ms p99 at 256 streams
    (benchmarks/client_overhead.py); that lag belongs to queue delay (sent - scheduled), not TTFT.
    """

    async def on_chunk_sent(_session, ctx, _params) -> None:
        record = ctx.trace_request_ctx
        if record is not None:
            record.sent_s = now()

    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(on_chunk_sent)
    trace.freeze()
    return trace


def make_session(target: TargetConfig, now: Callable[[], float] | None = None) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=75)
    timeout = aiohttp.ClientTimeout(
        total=target.request_timeout_s,
        sock_connect=target.connect_timeout_s,
        sock_read=target.read_timeout_s,
    )
    # read_bufsize: a larger high-water mark so a 1 MB event is not read in 64 KB pause/resume steps.
    traces = [_stamp_sent(now)] if now is not None else []
    return aiohttp.ClientSession(
        connector=connector, timeout=timeout, read_bufsize=1 << 20, trace_configs=traces
    )


def _auth_headers(target: TargetConfig) -> dict[str, str]:
    key = target.api_key()
    return {"Authorization": f"Bearer {key}"} if key else {}


async def probe(session: aiohttp.ClientSession, target: TargetConfig) -> list[str]:
    """Check the target answers before any load; return the model ids it lists."""
    assert target.url is not None
    url = f"{target.url}/v1/models"
    try:
        async with session.get(
            url, headers=_auth_headers(target), timeout=aiohttp.ClientTimeout(total=15)
        ) as resp:
            if resp.status != 200:
                body = (await resp.text())[:_ERROR_BODY_CHARS]
                raise TargetUnreachable(
                    f"{url} answered HTTP {resp.status}: {body!r}. Check --url (and the API key "
                    f"in ${target.api_key_env} if the server needs one)."
                )
            data = await resp.json(content_type=None)
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        raise TargetUnreachable(
            f"cannot reach {target.url} ({type(exc).__name__}: {exc}). Is the server running, "
            f"and is --url right?"
        ) from exc
    return [m.get("id") for m in data.get("data", []) if isinstance(m, dict) and m.get("id")]


async def warm_connections(session: aiohttp.ClientSession, target: TargetConfig, count: int) -> int:
    """Open ``count`` keep-alive connections before a load point (concurrent GET /v1/models), so
    the first wave of requests does not pay TCP set-up inside its TTFT: 256 simultaneous connects
    added ~24 ms to the first requests' TTFT here. Returns how many succeeded."""
    assert target.url is not None
    url = f"{target.url}/v1/models"
    headers = _auth_headers(target)

    async def one() -> bool:
        try:
            async with session.get(url, headers=headers) as resp:
                await resp.read()
                return resp.status == 200
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return False

    return sum(await asyncio.gather(*(one() for _ in range(count))))


class OpenAIClient:
    """Sends Requests to one OpenAI-compatible target and records what happened."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        target: TargetConfig,
        now: Callable[[], float],
        count_tokens: Callable[[str], int] | None = None,
        keep_text: bool = False,
    ) -> None:
        if target.url is None or target.model is None:
            raise ValueError("OpenAIClient needs a resolved target url and model")
        self._session = session
        self._target = target
        self._now = now
        self._count_tokens = count_tokens
        self._keep_text = keep_text
        self._chat = target.api == "chat"
        path = "/v1/chat/completions" if self._chat else "/v1/completions"
        self._url = target.url + path
        self._headers = {"Content-Type": "application/json", **_auth_headers(target)}

    def payload(self, request: Request) -> dict[str, Any]:
        t = self._target
        body: dict[str, Any] = {"model": t.model, "stream": True}
        if self._chat:
            body["messages"] = request.as_messages()
        else:
            body["prompt"] = request.as_prompt_text()
        if request.max_tokens is not None:
            # max_tokens is what every OpenAI-compatible server reads; newer servers also read
            # max_completion_tokens but some reject unknown fields, so send only the common one.
            body["max_tokens"] = request.max_tokens
        if t.include_usage:
            body["stream_options"] = {"include_usage": True}
        if t.ignore_eos:
            body["ignore_eos"] = True
        if t.temperature is not None:
            body["temperature"] = t.temperature
        body.update(t.extra_body)
        return body

    async def send(self, request: Request, record: RequestRecord) -> None:
        data = json.dumps(self.payload(request)).encode()
        stream = _StreamState(self._chat)
        now = self._now
        try:
            try:
                await self._exchange(data, record, stream)
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
                if record.status is not None:
                    raise
                # The server closed an idle keep-alive connection just as we reused it (llama.cpp
                # closes idle connections after 5 s): the request never reached it. Retry once
                # on a fresh connection, as browsers do; the lost time stays in queue delay.
                record.retries += 1
                await self._exchange(data, record, stream)
        except asyncio.CancelledError:
            record.closed_s = now()
            record.outcome = Outcome.CANCELLED
            record.error = "in flight when the run stopped"
            self._finish_tokens(record, stream)
            raise
        except aiohttp.ClientConnectorError as exc:
            return self._fail(record, stream, Outcome.CONNECT_ERROR, f"{type(exc).__name__}: {exc}")
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as exc:
            if not stream.done:
                waited = now() - (record.sent_s or record.scheduled_s)
                return self._fail(record, stream, Outcome.TIMEOUT, f"timed out ({type(exc).__name__}) after {waited:.1f}s")
            record.closed_s = now()  # [DONE] arrived; the server just kept the body open
        except (aiohttp.ClientError, OSError) as exc:
            return self._fail(record, stream, Outcome.STREAM_ERROR, f"{type(exc).__name__}: {exc}")
        record.outcome = self._outcome(record, stream)
        self._finish_tokens(record, stream)

    def _fail(self, record: RequestRecord, stream: _StreamState, outcome: Outcome, error: str) -> None:
        record.closed_s = self._now()
        record.outcome = outcome
        record.error = error
        self._finish_tokens(record, stream)

    async def _exchange(self, data: bytes, record: RequestRecord, stream: _StreamState) -> None:
        """One HTTP exchange: POST, then read the event stream to its end, stamping content chunks."""
        now = self._now
        record.sent_s = now()  # refined by the trace hook when the body reaches the socket
        async with self._session.post(
            self._url, data=data, headers=self._headers, trace_request_ctx=record
        ) as resp:
            record.status = resp.status
            if resp.status != 200:
                body = await resp.text(errors="replace")
                record.closed_s = now()
                stream.http_error = f"HTTP {resp.status}: {body[:_ERROR_BODY_CHARS]}"
                return
            decoder = SSEDecoder()
            chunk_times = record.chunk_times_s
            handle = stream.handle
            # Hot path: one iteration per network read. Read to EOF even after [DONE] so the
            # connection goes back to the pool instead of being closed with unread bytes.
            async for raw in resp.content.iter_any():
                t = now()
                for event in decoder.feed(raw):
                    if handle(event.data):
                        chunk_times.append(t)
                if stream.failed:
                    break
            if not stream.failed:
                for event in decoder.close():
                    if handle(event.data):
                        chunk_times.append(now())
            record.closed_s = now()

    @staticmethod
    def _outcome(record: RequestRecord, stream: _StreamState) -> Outcome:
        if stream.http_error is not None:
            record.error = stream.http_error
            return Outcome.HTTP_ERROR
        if stream.failed:
            record.error = stream.error
            return Outcome.STREAM_ERROR
        if not record.chunk_times_s:
            record.error = "stream ended without a content chunk"
            return Outcome.NO_OUTPUT
        return Outcome.OK

    def _finish_tokens(self, record: RequestRecord, stream: _StreamState) -> None:
        if record.chunk_times_s:
            record.end_s = record.chunk_times_s[-1]
        record.prompt_tokens = stream.prompt_tokens
        record.response_id = stream.response_id
        record.server_output_tokens = stream.completion_tokens
        text = "".join(stream.text) if (self._count_tokens or self._keep_text) else None
        if self._count_tokens is not None and text is not None and record.chunk_times_s:
            record.client_output_tokens = self._count_tokens(text)
        if self._keep_text:
            record.output_text = text
        if record.server_output_tokens is not None and record.outcome is Outcome.OK:
            record.output_tokens = record.server_output_tokens
            record.output_tokens_source = TokenSource.SERVER
        elif record.client_output_tokens is not None:
            record.output_tokens = record.client_output_tokens
            record.output_tokens_source = TokenSource.TOKENIZER
        elif record.chunk_times_s:
            record.output_tokens = len(record.chunk_times_s)
            record.output_tokens_source = TokenSource.CHUNKS


class _StreamState:
    """Interprets decoded event payloads of one stream. ``handle`` returns True for a content chunk."""

    __slots__ = ("chat", "text", "done", "failed", "error", "prompt_tokens", "completion_tokens", "response_id", "http_error")

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.text: list[str] = []
        self.done = False
        self.failed = False
        self.error: str | None = None
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.response_id: str | None = None
        self.http_error: str | None = None

    def _fail(self, message: str) -> bool:
        if not self.failed:
            self.failed = True
            self.error = message
        return False

    def handle(self, data: bytes) -> bool:
        if self.failed:
            return False
        if data == b"[DONE]":
            self.done = True
            return False
        if not data:
            return False
        try:
            obj = _loads(data)
        except ValueError:
            return self._fail(f"malformed event (not JSON): {data[:200]!r}")
        if not isinstance(obj, dict):
            return self._fail(f"malformed event (not an object): {data[:200]!r}")
        if "error" in obj:
            return self._fail(f"error event: {str(obj['error'])[:_ERROR_BODY_CHARS]}")
        if self.response_id is None:
            self.response_id = obj.get("id")
        usage = obj.get("usage")
        if usage:
            self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)
            self.completion_tokens = usage.get("completion_tokens", self.completion_tokens)
        choices = obj.get("choices")
        if not choices:
            return False  # usage-only chunk
        choice = choices[0]
        if self.chat:
            delta = choice.get("delta") or {}
            piece = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
        else:
            piece = choice.get("text")
        if not piece:
            return False  # role-only or empty delta: not a chunk
        self.text.append(piece)
        return True
