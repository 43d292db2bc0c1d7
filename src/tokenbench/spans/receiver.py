"""The OTLP/HTTP trace receiver of a run (--server-traces): ``POST /v1/traces`` on 127.0.0.1.

It runs on a loop of its own in a thread, so a flood of spans never delays the load's loop beyond
the GIL it shares. Each export is decoded and its spans appended to ``server_spans.jsonl`` as it
arrives (flushed per export), so memory holds one export at a time: an export above
``MAX_BODY_BYTES`` is refused (413) and counted, spans past ``max_spans`` are dropped and counted.
When it stops, a last line ``{"receiver": {...}}`` states its counts (phases.py reads them).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from aiohttp import web

from ..errors import BadInput
from .otlp import JSON, PROTOBUF, OtlpError, decode

SPANS_FILE = "server_spans.jsonl"
TRACES_PATH = "/v1/traces"
MAX_BODY_BYTES = 16 << 20
MAX_SPANS = 10_000_000  # a run's ceiling: ~2 GB of lines, far beyond one span per request


@dataclass
class ReceiverCounts:
    exports: int = 0  # POSTs answered 200
    spans: int = 0  # spans written
    dropped_spans: int = 0  # past max_spans
    refused_exports: int = 0  # too large, undecodable, or of another content type
    endpoint: str | None = None


class SpanReceiver:
    """``with SpanReceiver(run_dir, now) as rx: rx.endpoint`` -> spans in run_dir/server_spans.jsonl."""

    def __init__(self, run_dir: Path, now: Callable[[], float], port: int = 0, max_spans: int = MAX_SPANS) -> None:
        self.path = Path(run_dir) / SPANS_FILE
        self._now = now
        self._max = max_spans
        self._port = port
        self.counts = ReceiverCounts()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="otlp-receiver", daemon=True)
        self._runner: web.AppRunner | None = None
        self._file = self.path.open("a", encoding="utf-8")

    @property
    def endpoint(self) -> str:
        assert self.counts.endpoint is not None, "start first"
        return self.counts.endpoint

    def start(self) -> str:
        """Listen; the endpoint's URL. BadInput when the port is taken."""
        self._thread.start()
        try:
            return asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        except OSError as exc:
            self.stop(trailer=False)
            raise BadInput(
                f"--server-traces-port {self._port}: cannot listen on 127.0.0.1:{self._port} ({exc.strerror}); "
                "choose a free port, or 0 for any"
            ) from None

    async def _start(self) -> str:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.add_routes([web.post(TRACES_PATH, self._export)])
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # aiohttp: the bound port of port 0
        self.counts.endpoint = f"http://127.0.0.1:{port}{TRACES_PATH}"
        return self.counts.endpoint

    async def _export(self, request: web.Request) -> web.Response:
        kind = request.content_type
        try:
            body = await request.read()
            spans = decode(body, kind)
        except web.HTTPRequestEntityTooLarge:
            self.counts.refused_exports += 1
            raise
        except OtlpError as exc:
            self.counts.refused_exports += 1
            return web.Response(status=415 if kind not in (JSON, PROTOBUF) else 400, text=str(exc))
        received = self._now()
        room = max(0, self._max - self.counts.spans)
        kept, dropped = spans[:room], len(spans) - min(room, len(spans))
        self._file.write("".join(json.dumps({**s, "received_s": received}) + "\n" for s in kept))
        self._file.flush()
        self.counts.exports += 1
        self.counts.spans += len(kept)
        self.counts.dropped_spans += dropped
        # an empty ExportTraceServiceResponse: no partial_success (drops are ours to state)
        return web.Response(body=b"" if kind == PROTOBUF else b"{}", content_type=kind)

    def stop(self, trailer: bool = True) -> ReceiverCounts:
        """Stop listening and state the counts (once; a second call only returns them)."""
        if self._file.closed:
            return self.counts
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
        self._loop.close()
        if trailer:
            self._file.write(json.dumps({"receiver": asdict(self.counts)}) + "\n")
        self._file.close()
        return self.counts

    def __enter__(self) -> SpanReceiver:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
