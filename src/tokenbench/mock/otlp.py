"""The mock's OTLP exporter: after each reply, one ``llm_request`` span as vLLM sends
it (vllm/v1/engine/output_processor.py do_tracing: started at the request's arrival, vLLM's
``gen_ai.*`` attribute names, seconds), posted as OTLP/HTTP protobuf to ``--otlp-endpoint``, in
the trace of the request's incoming traceparent (or, with ``otlp_protocol="grpc"``, as an OTLP/gRPC
TraceService/Export call through grpcio's own client: the same message, the other transport). Its
times are the mock's script as it ran
(received, admitted, each chunk written), so a test knows every server phase exactly.

Knobs for the robustness tests: every N-th span never sent (``otlp_skip_every``), each span sent
late (``otlp_delay_ms``), an attribute vLLM never sets (``otlp_extra_attribute``).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiohttp

from tokenbench.spans.otlp import PROTOBUF, encode_protobuf
from tokenbench.spans.receiver import GRPC_METHOD, GRPC_SERVICE, import_grpc
from tokenbench.spans.shapes import DECODE, E2E, PREFILL, QUEUE, TTFT

if TYPE_CHECKING:
    from tokenbench.mock.settings import Delivery, MockSettings


class MockExporter:
    def __init__(self, settings: MockSettings) -> None:
        self.s = settings
        self._count = 0
        self._session: aiohttp.ClientSession | None = None
        self._channel: Any = None  # grpc.aio.Channel (grpcio ships no type hints)
        self._tasks: set[asyncio.Task[None]] = set()

    def span(self, delivery: Delivery, rid: str, prompt_tokens: int, completion_tokens: int) -> dict[str, Any] | None:
        """The span of a finished reply (None: nothing to say, e.g. no chunk was written)."""
        times = delivery.chunk_times_s
        if not times or delivery.finished_s is None or delivery.admitted_s is None:
            return None
        parts = (delivery.traceparent or "").split("-")
        trace_id = parts[1] if len(parts) == 4 and len(parts[1]) == 32 else os.urandom(16).hex()
        wall = time.time() - time.perf_counter()  # the mock's perf_counter -> its wall clock
        received, admitted, finished = delivery.received_s, delivery.admitted_s, delivery.finished_s
        attrs: dict[str, Any] = {
            QUEUE: admitted - received,
            PREFILL: times[0] - admitted,
            TTFT: times[0] - received,
            DECODE: times[-1] - times[0],
            E2E: finished - received,
            "gen_ai.latency.time_in_model_inference": times[-1] - admitted,
            "gen_ai.usage.prompt_tokens": prompt_tokens,
            "gen_ai.usage.completion_tokens": completion_tokens,
            "gen_ai.request.id": rid,
        }
        if self.s.otlp_extra_attribute:
            attrs[self.s.otlp_extra_attribute] = 1
        return {
            "trace_id": trace_id,
            "span_id": os.urandom(8).hex(),
            "name": "llm_request",
            "start_unix_ns": int((received + wall) * 1e9),
            "end_unix_ns": int((finished + wall) * 1e9),
            "attributes": attrs,
        }

    def export(self, span: dict[str, Any] | None) -> None:
        """Post the span in the background (never delays the reply)."""
        if span is None:
            return
        self._count += 1
        if self.s.otlp_skip_every and self._count % self.s.otlp_skip_every == 0:
            return
        task = asyncio.ensure_future(self._post(span))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self, _app: object = None) -> None:
        """The exporter's session closed with the mock (an aiohttp on_cleanup hook)."""
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def _post(self, span: dict[str, Any]) -> None:
        if self.s.otlp_delay_ms:
            await asyncio.sleep(self.s.otlp_delay_ms / 1e3)
        body = encode_protobuf([span], "tokenbench-mock", self.s.served_by)  # a fleet replica: its name
        if self.s.otlp_protocol == "grpc":
            await self._export_grpc(body)
            return
        if self._session is None:
            self._session = aiohttp.ClientSession()
        try:
            async with self._session.post(self.s.otlp_endpoint, data=body, headers={"Content-Type": PROTOBUF}) as resp:
                await resp.read()
        except (aiohttp.ClientError, OSError):  # a receiver gone: the span is lost, as an exporter's would be
            pass

    async def _export_grpc(self, body: bytes) -> None:
        grpc = import_grpc()
        if self._channel is None:
            target = urlsplit(self.s.otlp_endpoint).netloc or self.s.otlp_endpoint  # http://host:port or host:port
            self._channel = grpc.aio.insecure_channel(target)
        # no serializers: the request goes as the bytes an OTLP/HTTP protobuf body holds
        export = self._channel.unary_unary(f"/{GRPC_SERVICE}/{GRPC_METHOD}")
        try:
            await export(body, timeout=10)
        except grpc.RpcError:  # a receiver gone: the span is lost, as an exporter's would be
            pass
