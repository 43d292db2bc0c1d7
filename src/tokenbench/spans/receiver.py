"""The OTLP trace receiver of a run (--server-traces), on 127.0.0.1: OTLP/HTTP ``POST /v1/traces``
(protobuf or JSON) on one port and OTLP/gRPC ``TraceService/Export`` on another (an exporter that
speaks only gRPC: TGI's router, or an engine left at the OpenTelemetry SDK's default protocol).

HTTP runs on a loop of its own in a thread, gRPC on grpcio's own server threads, so a flood of
spans never delays the load's loop beyond the GIL it shares. Each export, from either, is decoded
by the same ``otlp.decode`` (a gRPC request is the very ExportTraceServiceRequest message an
OTLP/HTTP protobuf body holds) and its spans appended to ``server_spans.jsonl`` as it arrives
(flushed per export, one writer at a time), so memory holds one export at a time: an export above
``MAX_BODY_BYTES`` is refused (HTTP 413, gRPC RESOURCE_EXHAUSTED) and counted, spans past
``max_spans`` are dropped and counted. When it stops, a last line ``{"receiver": {...}}`` states
its counts (phases.py reads them).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from tokenbench.errors import BadInput
from tokenbench.results.layout import SPANS
from tokenbench.spans.otlp import JSON, PROTOBUF, OtlpError, decode

TRACES_PATH = "/v1/traces"
# opentelemetry/proto/collector/trace/v1/trace_service.proto: service TraceService { rpc Export }
# (trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name; trace_service_pb2_grpc
# registers the same name). The handler takes the request's bytes as they came: otlp.decode parses them.
GRPC_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
GRPC_METHOD = "Export"
GRPC_FORK_ENV = "GRPC_ENABLE_FORK_SUPPORT"
MAX_BODY_BYTES = 16 << 20
MAX_SPANS = 10_000_000  # a run's ceiling: ~2 GB of lines, far beyond one span per request


@dataclass
class ReceiverCounts:
    exports: int = 0  # exports taken (HTTP POSTs answered 200 and gRPC Exports answered OK)
    spans: int = 0  # spans written
    dropped_spans: int = 0  # past max_spans
    refused_exports: int = 0  # too large, undecodable, or of another content type
    endpoint: str | None = None  # OTLP/HTTP: http://127.0.0.1:PORT/v1/traces
    grpc_exports: int = 0  # of ``exports``, those that came over gRPC
    grpc_endpoint: str | None = None  # OTLP/gRPC: http://127.0.0.1:PORT (an exporter's endpoint form)


class SpanReceiver:
    """``with SpanReceiver(run_dir, now) as rx: rx.endpoint, rx.grpc_endpoint`` -> spans in
    run_dir/server_spans.jsonl. ``grpc_port=None``: OTLP/HTTP only."""

    def __init__(
        self,
        run_dir: Path,
        now: Callable[[], float],
        port: int = 0,
        max_spans: int = MAX_SPANS,
        grpc_port: int | None = 0,
    ) -> None:
        self.path = Path(run_dir) / SPANS
        self._now = now
        self._max = max_spans
        self._port = port
        self._grpc_port = grpc_port
        self.counts = ReceiverCounts()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="otlp-receiver", daemon=True)
        self._runner: web.AppRunner | None = None
        self._grpc: Any = None  # grpc.Server (grpcio ships no type hints)
        self._lock = threading.Lock()  # the HTTP loop and gRPC's threads write one file
        self._file = self.path.open("a", encoding="utf-8")

    @property
    def endpoint(self) -> str:
        assert self.counts.endpoint is not None, "start first"
        return self.counts.endpoint

    @property
    def grpc_endpoint(self) -> str | None:
        """OTLP/gRPC's endpoint (None: not served)."""
        return self.counts.grpc_endpoint

    def start(self) -> str:
        """Listen; the OTLP/HTTP endpoint's URL. BadInput when a port is taken."""
        self._thread.start()
        try:
            endpoint = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        except OSError as exc:
            self.stop(trailer=False)
            raise BadInput(
                f"--server-traces-port {self._port}: cannot listen on 127.0.0.1:{self._port} ({exc.strerror}); "
                "choose a free port, or 0 for any"
            ) from None
        if self._grpc_port is not None:
            try:
                self.counts.grpc_endpoint = self._start_grpc(self._grpc_port)
            except RuntimeError as exc:  # grpcio: "Failed to bind to address ..."
                self.stop(trailer=False)
                raise BadInput(
                    f"--server-traces-grpc-port {self._grpc_port}: cannot listen on 127.0.0.1:{self._grpc_port} "
                    f"({exc}); choose a free port, or 0 for any"
                ) from None
        return endpoint

    def _start_grpc(self, port: int) -> str:
        grpc = import_grpc()

        # gRPC's own limit well past ours, so that a too-large export reaches the handler and is
        # counted (one past 4x is refused by grpcio before any handler sees it: not counted)
        limit = 4 * MAX_BODY_BYTES
        server = grpc.server(
            ThreadPoolExecutor(max_workers=2, thread_name_prefix="otlp-grpc"),
            options=[("grpc.max_receive_message_length", limit), ("grpc.so_reuseport", 0)],
        )
        # no (de)serializer: the handler gets the request's bytes and answers bytes (an empty
        # ExportTraceServiceResponse serializes to none)
        handler = grpc.unary_unary_rpc_method_handler(self._grpc_export)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(GRPC_SERVICE, {GRPC_METHOD: handler}),))
        bound = server.add_insecure_port(f"127.0.0.1:{port}")
        if not bound:  # older grpcio answer 0 instead of raising
            raise RuntimeError("Failed to bind")
        server.start()
        self._grpc = server
        return f"http://127.0.0.1:{bound}"

    # Any: grpc.ServicerContext (no type hints)
    def _grpc_export(self, body: bytes, context: Any) -> bytes:
        grpc = import_grpc()

        if len(body) > MAX_BODY_BYTES:
            with self._lock:
                self.counts.refused_exports += 1
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"export over {MAX_BODY_BYTES} bytes")
        try:
            spans = decode(body, PROTOBUF)
        except OtlpError as exc:
            with self._lock:
                self.counts.refused_exports += 1
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        self._write(spans, grpc=True)
        return b""

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
        self._write(spans, grpc=False)
        # an empty ExportTraceServiceResponse: no partial_success (drops are ours to state)
        return web.Response(body=b"" if kind == PROTOBUF else b"{}", content_type=kind)

    def _write(self, spans: list[dict[str, Any]], grpc: bool) -> None:
        """One export's spans appended and flushed, and counted (either protocol's, one at a time)."""
        with self._lock:
            if self._file.closed:  # an export racing the stop: not written, not counted
                return
            received = self._now()
            room = max(0, self._max - self.counts.spans)
            kept, dropped = spans[:room], len(spans) - min(room, len(spans))
            self._file.write("".join(json.dumps({**s, "received_s": received}) + "\n" for s in kept))
            self._file.flush()
            self.counts.exports += 1
            self.counts.grpc_exports += int(grpc)
            self.counts.spans += len(kept)
            self.counts.dropped_spans += dropped

    def stop(self, trailer: bool = True) -> ReceiverCounts:
        """Stop listening and state the counts (once; a second call only returns them)."""
        if self._file.closed:
            return self.counts
        if self._grpc is not None:
            self._grpc.stop(grace=1.0).wait(timeout=30)
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
        self._loop.close()
        with self._lock:
            if trailer:
                self._file.write(json.dumps({"receiver": asdict(self.counts)}) + "\n")
            self._file.close()
        return self.counts

    def __enter__(self) -> SpanReceiver:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


# Any: the grpc module (grpcio ships no type hints)
def import_grpc() -> Any:
    """grpcio, imported with its fork support off: the run forks the engine (and its guardian)
    while the receiver's threads serve, and grpcio's fork handlers would log a line to the
    console at each fork ("Other threads are currently calling into gRPC, skipping fork()
    handlers"). Read once, when grpcio loads; the environment is left as it was."""
    if "grpc" not in sys.modules:
        before = os.environ.get(GRPC_FORK_ENV)
        os.environ[GRPC_FORK_ENV] = "false"
        try:
            import grpc  # type: ignore[import-untyped]  # noqa: F401  # grpcio ships no type hints
        finally:
            if before is None:
                del os.environ[GRPC_FORK_ENV]
            else:
                os.environ[GRPC_FORK_ENV] = before
    return sys.modules["grpc"]
