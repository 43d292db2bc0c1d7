"""The scripted OpenAI-compatible streaming server of `tokenbench mock` (self-checks and tests).

It streams chat (``/v1/chat/completions``) and completions (``/v1/completions``) as vLLM does,
and Anthropic's Messages (``/v1/messages``, with ``/v1/messages/count_tokens``) and OpenAI's
Responses (``/v1/responses``) as those APIs do (mock/apis.py: each request read as chat, each
reply written in its API's events by its ``Renderer``), all scripted alike: what follows holds
for each, bar what says chat or completions only. Messages and Responses always report usage in
their own shape (input/output tokens; cached and reasoning tokens), never per chunk, with no vLLM
metrics object and no ``[DONE]``.

Timing is scripted and absolute: content chunk i of a request is written at
``admitted + ttft + i * itl`` (admitted = received unless ``max_streams`` queues it; no drift from sleep overshoot adding up). The mock logs what it
actually delivered - when each request arrived and when each chunk was written, on the machine's
monotonic clock - at ``GET /mock/deliveries`` so a benchmark can compare what the client measured
with what was really sent.

Capacity (``max_streams`` > 0): at most that many requests generate at once; the others wait in
FIFO order, and a request's timing starts when it is admitted (chunk i at ``admitted + ttft +
i * itl``). Each delivery logs ``received_s``, ``admitted_s`` and ``wait_s``, so a test knows the
server-side queueing exactly. With 0 (the default) every request is admitted at once.

``GET /metrics`` speaks vLLM's metric names (backends/vllm.py) so ``--backend vllm`` attached to
the mock exercises the whole telemetry path with known answers: running (generating) and
waiting (queued for capacity) requests, generated tokens, the TTFT from arrival in
``vllm:time_to_first_token_seconds``, and ``vllm:num_preemptions_total`` counting each request
that arrives while more than ``kv_slots`` are in flight (0: never).

Reasoning (``reasoning_chunks`` K > 0, not completions): the first K chunks of a reply carry
``delta.reasoning_content`` (SGLang's and DeepSeek's field; vLLM sends it beside ``reasoning``) instead
of ``delta.content`` (Messages: a ``thinking`` block; Responses: a ``reasoning`` item), on the same schedule, and the usage says ``completion_tokens_details:
{"reasoning_tokens": K * tokens_per_chunk}`` (K capped at the reply's chunks). So the first output
chunk is chunk K: TTFO = TTFT + K * ITL, as scripted. Asked for usage on every chunk (``stream_options.
continuous_usage_stats``), the mock sends it as vLLM: role chunk 0, content chunk i (i + 1) * tokens_per_chunk.

Speculation (``spec_tokens`` k > 0; mock/speculation.py), as vLLM streams it: content chunk 0
carries the prefill's token, each later chunk one verify step that accepted ``a`` of its k drafts
(``spec_accept``'s cycle, in turn) and carries ``a + 1`` tokens (the bonus), until the reply's
tokens are reached; the last chunk is cut to what is left, its step still counted as scripted.
The schedule is the same (chunk i at ``admitted + ttft + i * itl``), so a token's ITL is the
chunk's over its tokens; ``tokens_per_chunk`` is ignored. /metrics adds vLLM's
``vllm:spec_decode_num_drafts`` / ``_num_draft_tokens`` / ``_num_accepted_tokens`` /
``_num_accepted_tokens_per_pos`` (by ``position``), counted as each step is written. With
``per_request_metrics`` and/or ``spec_metrics`` (vLLM's ``--enable-per-request-metrics`` and
``--per-request-spec-decode-metrics``) the final usage chunk carries vLLM's ``metrics`` object,
only when the request asked for ``include_usage``: its timing from what was written (queue =
admitted - received, prefill to the first chunk, generation from the first chunk to the last) and
its ``speculative_decoding`` figures (the steps' histogram and counts; ``detailed``: each step's).

Replicas (``replicas_script``; mock/scaler.py): the capacity is a scripted fleet's, ``max_streams``
slots per RUNNING replica, the count following the script from the first request; each reply
names its replica in ``x-served-by`` and its delivery logs it; ``GET /mock/replicas`` answers the
replicas in Ray Serve's shape, ``GET /mock/replica-log`` the transitions as they happened.

Groups: with ``priority_queue`` the requests waiting for capacity are admitted
by their ``priority`` field (lower first, vLLM's rule; absent counts as 0), then in arrival order,
so under overload the high class's TTFT stays near the scripted one while the low class queues.
``adapters`` ("a=20,b=40": LoRA adapter names and each one's extra TTFT in ms) lists them in
/v1/models beside the base model, adds each one's cost to a request with ``model`` = its name, and
answers 404 for a model it does not serve (as vLLM does). Each delivery logs the request's
``model`` and ``priority``.
Structured output and tool calls (mock/structured.py): a request asking for a JSON schema
(any dialect tokenbench sends) gets the schema's smallest instance, one offering tools one call of
the named (else first) tool, on the same schedule; ``invalid_every`` N makes every N-th such reply
invalid (a known valid_fraction).
Answers by prompt (``answers``, mock/answers.py): a request whose prompt text is a row of the
--answers file gets that row's reply as its content on the same schedule (a known accuracy).

Faults (for tests of the client's outcomes), applied to every ``fault_every``-th request (here as
chat writes them; Messages and Responses in their own error shapes, apis.py):
http_500, http_429, http_400, disconnect (mid-stream, after ``fault_after_chunks``), malformed
(a non-JSON event mid-stream), error_event (an ``{"error": ...}`` event), no_content (role-only
and usage, no content), stall (stops sending mid-stream and holds the connection), abort (ends
after ``fault_after_chunks`` with ``finish_reason: "abort"``, usage and ``[DONE]``, as vLLM ends a
request its engine aborted), no_end (the content, then the stream closes cleanly with neither a
finish reason nor ``[DONE]``, as a proxy that cuts a stream at a chunk boundary would).

Answers that change (mock/divergence.py): ``diverge_share`` picks a share of prompts by their
hash and ``diverge_above_in_flight`` the requests that arrive above a load; their replies differ
from output token ``diverge_at`` on, and each delivery logs ``diverged_at``. ``fingerprint_salt``
changes every reply's words. A request carrying ``X-Tokenbench-Probe`` (a served model's
fingerprint) is answered whole at once, outside the timing, the faults and every count.
/v1/models lists the model with ``created``, ``owned_by`` and, with ``model_root``, ``root``.

Images (chat ``image_url`` content parts, Messages ``image`` blocks, Responses ``input_image``
parts): accepted on any chat, Messages or Responses request; each
adds ``image_ms`` to the reply's TTFT (chunk i at ``admitted + ttft + images * image_ms + i * itl``)
and ``image_tokens`` to its usage's prompt_tokens, which are otherwise those of the same request
with the image parts left out (its text parts joined). A delivery logs the count (``images``).
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from tokenbench.mock.answers import answer_for, load_answers
from tokenbench.mock.apis import (
    API_PATHS,
    Body,
    Event,
    MessagesEvents,
    Prompt,
    Renderer,
    ResponsesEvents,
    chat_body,
)
from tokenbench.mock.divergence import PROBE_HEADER, Divergence
from tokenbench.mock.otlp import MockExporter
from tokenbench.mock.pooling import PATHS as POOLING_PATHS
from tokenbench.mock.pooling import pooling_answer, pooling_inputs
from tokenbench.mock.scaler import SERVED_BY_HEADER, ReplicaPool, parse_script
from tokenbench.mock.settings import Delivery, MockSettings
from tokenbench.mock.speculation import Plan, SpecCounters, plan, request_metrics
from tokenbench.mock.structured import pieces, scripted_deltas

# aiohttp refuses bodies over 1 MiB by default (HTTP 413); requests with images run to megabytes
MAX_BODY_BYTES = 256 * 2**20


class PriorityGate:
    """At most ``slots`` holders; waiters admitted lowest ``priority`` first, then in arrival order."""

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._waiting: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = 0

    async def acquire(self, priority: float) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (priority, self._seq, fut))
        self._seq += 1
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # admitted as it was cancelled: pass the slot on
                self.release()
            raise

    def release(self) -> None:
        while self._waiting:
            _, _, fut = heapq.heappop(self._waiting)
            if not fut.done():
                fut.set_result(None)
                return
        self._free += 1


class PrefixCache:
    """A known-answer prefix cache, as vLLM's: a prompt's tokens (its token ids, or the words of its
    text) in whole blocks of ``block_tokens``; a block hits when the same prefix up to its end was
    seen before, and nothing after the first miss does. The prompt's last token is always computed
    (at most ``len - 1`` tokens hit, whole blocks). Every whole block is then remembered.
    ``POST /reset_prefix_cache`` empties it (answers vLLM's ``{"success": true}``)."""

    def __init__(self, block_tokens: int) -> None:
        self.block_tokens = block_tokens
        self._seen: set[tuple[object, ...]] = set()

    @staticmethod
    def tokens(body: Body) -> Sequence[object]:
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            return list(prompt)
        if prompt is None:
            prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages") or [])
        return str(prompt).split()

    def lookup(self, tokens: Sequence[object]) -> int:
        """Prompt tokens served from the cache; the prompt's whole blocks are cached after."""
        b = self.block_tokens
        full = len(tokens) // b
        hit = 0
        for i in range(1, full + 1):
            if tuple(tokens[: i * b]) not in self._seen or i * b > len(tokens) - 1:
                break
            hit = i * b
        self._seen.update(tuple(tokens[: i * b]) for i in range(1, full + 1))
        return hit

    def reset(self) -> None:
        self._seen.clear()


class MockServer:
    def __init__(self, settings: MockSettings) -> None:
        self.s = settings
        self.deliveries: dict[str, Delivery] = {}
        self._count = 0
        self._structured = 0  # requests that asked for structure or offered tools (invalid_every)
        self._in_flight = 0
        self._registry = CollectorRegistry()
        reg, names, model = self._registry, ["model_name"], settings.model
        self._running = Gauge("vllm:num_requests_running", "in flight", names, registry=reg).labels(model)
        self._waiting = Gauge("vllm:num_requests_waiting", "queued for capacity", names, registry=reg).labels(model)
        scripted = bool(settings.replicas_script.strip())
        self._fleet = (
            ReplicaPool(
                parse_script(settings.replicas_script),
                settings.max_streams,
                settings.replica_startup_s,
                by_priority=settings.priority_queue,
            )
            if scripted
            else None
        )  # the slots are then the replicas'
        self._slots = asyncio.Semaphore(settings.max_streams) if settings.max_streams and not scripted else None
        self._gate = (
            PriorityGate(settings.max_streams)
            if settings.max_streams and settings.priority_queue and not scripted
            else None
        )
        self._adapters = settings.adapter_costs_ms()
        self._generated = Counter("vllm:generation_tokens", "generated", names, registry=reg).labels(model)
        self._preempted = Counter("vllm:num_preemptions", "over kv_slots", names, registry=reg).labels(model)
        self._finished = Counter("vllm:request_success", "replies written whole", names, registry=reg).labels(model)
        self._ttft = Histogram("vllm:time_to_first_token_seconds", "scripted TTFT", names, registry=reg).labels(model)
        self._spec = SpecCounters(reg, model, settings.spec_tokens) if settings.spec_tokens else None
        self.cache = PrefixCache(settings.cache_block_tokens) if settings.cache_block_tokens else None
        self._exporter = MockExporter(settings) if settings.otlp_endpoint else None
        if self.cache is not None:  # vLLM's names (backends/vllm.py), in tokens
            self._queries = Counter("vllm:prefix_cache_queries", "prompt tokens", names, registry=reg).labels(model)
            self._hits = Counter("vllm:prefix_cache_hits", "cached prompt tokens", names, registry=reg).labels(model)
        self._answers = load_answers(Path(settings.answers)) if settings.answers else {}  # by prompt
        self._first_received: float | None = None  # autostop: the scripted warm-up starts here
        self._jitter = random.Random(settings.jitter_seed)
        self._divergence = Divergence(settings)
        self._created = int(time.time())  # /v1/models' created: when this server started
        self.app = web.Application(client_max_size=MAX_BODY_BYTES)
        if self._exporter is not None:
            self.app.on_cleanup.append(self._exporter.close)
        self.app.add_routes(
            [
                web.post("/reset_prefix_cache", self._reset_prefix_cache),
                web.get("/health", self._health),
                web.get("/v1/models", self._models),
                web.post("/v1/chat/completions", self._chat),
                web.post("/v1/completions", self._completions),
                *(web.post(path, self._api) for path in API_PATHS),  # Messages, Responses
                web.post("/v1/messages/count_tokens", self._count_tokens),
                web.post("/tokenize", self._tokenize),
                web.get("/mock/deliveries", self._deliveries),
                web.get("/mock/replicas", self._replicas),
                web.get("/mock/replica-log", self._replica_log),
                web.get("/metrics", self._metrics),
                *(web.post(path, self._pool) for path in POOLING_PATHS),  # embeddings
            ]
        )

    async def _reset_prefix_cache(self, _: web.Request) -> web.Response:
        if self.cache is None:
            return web.json_response({"detail": "Not Found"}, status=404)
        self.cache.reset()
        return web.json_response({"success": True})

    async def _health(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _models(self, _: web.Request) -> web.Response:
        card: Event = {"id": self.s.model, "object": "model", "created": self._created, "owned_by": "mock"}
        if self.s.model_root:  # vLLM's: the weights' path the name serves
            card["root"] = self.s.model_root
        if self.s.max_model_len:
            card["max_model_len"] = self.s.max_model_len
        # LoRA adapters as vLLM lists them: their own cards, with the base model as parent
        lora: list[Event] = [{"id": a, "object": "model", "parent": self.s.model} for a in self._adapters]
        return web.json_response({"object": "list", "data": [card, *lora]})

    async def _tokenize(self, request: web.Request) -> web.Response:
        body = await request.json()
        text = body.get("content") or body.get("prompt") or ""
        tokens = list(range(len(text.split())))
        return web.json_response({"tokens": tokens, "count": len(tokens)})

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self._registry), content_type="text/plain")

    async def _deliveries(self, _: web.Request) -> web.Response:
        return web.json_response({k: d.__dict__ for k, d in self.deliveries.items()})

    async def _replicas(self, _: web.Request) -> web.Response:
        if self._fleet is None:
            return web.json_response({"detail": "no --replicas-script"}, status=404)
        return web.json_response(self._fleet.details())

    async def _replica_log(self, _: web.Request) -> web.Response:
        if self._fleet is None:
            return web.json_response({"detail": "no --replicas-script"}, status=404)
        return web.json_response(self._fleet.log_json())

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._stream(request, "chat")

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._stream(request, "completions")

    async def _api(self, request: web.Request) -> web.StreamResponse:
        """Messages or Responses (apis.py), read as chat."""
        return await self._stream(request, API_PATHS[request.path])

    async def _count_tokens(self, request: web.Request) -> web.Response:
        """Messages' token count: the prompt tokens its usage would give, the cache left as it was."""
        body = chat_body("messages", await request.json())
        messages, images = _without_images(body["messages"])  # as a reply reads them
        body = {**body, "messages": messages} if images else body
        return web.json_response({"input_tokens": self._prompt_tokens(body, images)})

    async def _pool(self, request: web.Request) -> web.Response:
        """A pooling answer (mock_pooling.py), whole at admitted + ttft + inputs * input_ms."""
        received = time.perf_counter()
        body = await request.json()
        api = POOLING_PATHS[request.path]
        asked = pooling_inputs(api, body)
        if asked is None:
            return web.json_response({"error": {"message": f"no inputs for {api}", "code": 400}}, status=400)
        if self._slots is not None:
            self._waiting.inc()
            try:
                await self._slots.acquire()
            finally:
                self._waiting.dec()
        try:
            admitted = time.perf_counter()
            fault = self._fault_for_this()
            rid = f"mock-{self._count}"
            if (failed := _scripted_failure(fault, _OpenAIEvents)) is not None:
                return failed
            delivery = Delivery(received, admitted, admitted - received, fault=fault)
            if self.s.record_deliveries:
                self.deliveries[rid] = delivery
            query, inputs = asked
            due = admitted + (self.s.ttft_ms + len(inputs) * self.s.input_ms) / 1000.0
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            answer = web.json_response(pooling_answer(api, query, inputs, rid, self.s.model))
            delivery.finished_s = time.perf_counter()
            return answer
        finally:
            if self._slots is not None:
                self._slots.release()

    async def _probe(self, request: web.Request, api: str, body: Body) -> web.StreamResponse:
        """A fingerprint probe's reply, whole at once: its words as the script's at one in flight
        (the share's divergence and the salt apply; never the load's), no fault, delivery or count."""
        renderer = RENDERERS[api]
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        events = renderer(renderer.ID_PREFIX + "probe", self.s.model, body, lambda: Prompt(self._prompt_tokens(body)))
        n = int(body.get("max_tokens") or self.s.output_tokens)
        diverged = self._divergence.active and self._divergence.diverges(body, 1)
        text = self._divergence.text(0, n, diverged)
        opening = events.start()
        await resp.write(opening + events.content(0, text, False, n))
        for part in events.end("length", n, 0, None):
            await resp.write(part)
        await resp.write_eof()
        return resp

    def _fault_for_this(self) -> str | None:
        self._count += 1
        if self.s.fault == "none" or self._count % self.s.fault_every:
            return None
        return self.s.fault

    async def _stream(self, request: web.Request, api: str) -> web.StreamResponse:
        received = time.perf_counter()
        body = chat_body(api, await request.json())
        if PROBE_HEADER in request.headers:  # a fingerprint probe: answered at once, outside the script
            return await self._probe(request, api, body)
        model = body.get("model")
        if self._adapters and model != self.s.model and model not in self._adapters:
            message = f"The model `{model}` does not exist."  # vLLM's answer
            return web.json_response(RENDERERS[api].error_body(404, message), status=404)
        if self._gate is not None:
            priority = body.get("priority")
            self._waiting.inc()
            try:
                await self._gate.acquire(priority if isinstance(priority, int | float) else 0)
            finally:
                self._waiting.dec()
            try:
                return await self._generate(request, api, body, received)
            finally:
                self._gate.release()
        if self._fleet is not None:
            return await self._on_replica(self._fleet, request, api, body, received)
        if self._slots is None:
            return await self._generate(request, api, body, received)
        self._waiting.inc()
        try:
            await self._slots.acquire()  # asyncio.Semaphore wakes waiters in FIFO order
        finally:
            self._waiting.dec()
        try:
            return await self._generate(request, api, body, received)
        finally:
            self._slots.release()

    async def _on_replica(
        self, pool: ReplicaPool, request: web.Request, api: str, body: Body, received: float
    ) -> web.StreamResponse:
        """A slot on one of the scripted replicas (waiting for one), the reply naming it."""
        pool.first_request(received)
        priority = body.get("priority")
        self._waiting.inc()
        try:
            replica = await pool.acquire(priority if isinstance(priority, int | float) else 0)
        finally:
            self._waiting.dec()
        try:
            return await self._generate(request, api, body, received, replica.id)
        finally:
            pool.release(replica)

    async def _generate(
        self, request: web.Request, api: str, body: Body, received: float, replica: str | None = None
    ) -> web.StreamResponse:
        self._in_flight += 1
        self._running.set(self._in_flight)
        if self.s.kv_slots and self._in_flight > self.s.kv_slots:
            self._preempted.inc()
        diverged = self._divergence.active and self._divergence.diverges(body, self._in_flight)
        try:
            return await self._reply(request, api, body, received, replica, diverged)
        finally:
            self._in_flight -= 1
            self._running.set(self._in_flight)

    async def _reply(
        self,
        request: web.Request,
        api: str,
        body: Body,
        received: float,
        replica: str | None = None,
        diverged: bool = False,
    ) -> web.StreamResponse:
        admitted = time.perf_counter()
        fault = self._fault_for_this()
        renderer = RENDERERS[api]
        serial = f"mock-{self._count}"  # the reply's own name: its tool call's id is call_<serial>
        rid = renderer.ID_PREFIX + serial
        if (failed := _scripted_failure(fault, renderer)) is not None:
            return failed
        chunks = self._plan(int(body.get("max_tokens") or self.s.output_tokens))
        delivery = Delivery(received, admitted, admitted - received, fault=fault)
        delivery.model, delivery.priority = body.get("model"), body.get("priority")
        delivery.traceparent, delivery.replica = request.headers.get("traceparent"), replica
        delivery.diverged_at = self.s.diverge_at if diverged else None
        if self.s.record_requests:
            delivery.headers = {k: v for k, v in request.headers.items() if k.lower().startswith("x-")}
            delivery.messages, delivery.prompt = body.get("messages"), body.get("prompt")
        images = 0
        if renderer.chat and isinstance(body.get("messages"), list):  # image parts: counted, then read as text
            messages, images = _without_images(body["messages"])
            body = {**body, "messages": messages} if images else body
            delivery.images = images
        if self.s.record_deliveries:
            self.deliveries[rid] = delivery
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        served_by = replica if replica is not None else self.s.served_by  # a scripted replica, else --served-by
        if served_by:
            headers[SERVED_BY_HEADER] = served_by
        resp = web.StreamResponse(headers=headers)
        await resp.prepare(request)
        asked = body  # the prompt as the usage counts it, once (the cache's lookup remembers it)
        events = renderer(rid, self.s.model, body, functools.cache(lambda: self._prompt(asked, images)))
        reply = _Reply(request, resp, delivery, events, fault, chunks, images, diverged=diverged)
        reply.include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        admitted += self._adapters.get(str(body.get("model")), 0.0) / 1e3  # an adapter's scripted cost
        reply.scripted = self._scripted(body, len(chunks.tokens), serial)
        if await self._write_chunks(reply, admitted, received):
            await self._write_end(reply)
            self._finished.inc()
            if self._exporter is not None:  # server spans: the reply's span, as vLLM would send it
                prompt = len(json.dumps(body.get("messages") or body.get("prompt") or "").split())
                completion = sum(chunks.tokens)
                self._exporter.export(self._exporter.span(delivery, rid, prompt, completion))
        return resp

    def _plan(self, total: int) -> Plan:
        """What each chunk of a reply of ``total`` tokens carries: ``tokens_per_chunk`` each (the
        last chunk whole), or with speculation the prefill's token, then one verify step each."""
        if self.s.spec_tokens:
            return plan(total, self.s.spec_tokens, self.s.accept_cycle())
        k = self.s.tokens_per_chunk
        return Plan((k,) * max(1, -(-total // k)))

    def _scripted(self, body: Body, n_chunks: int, serial: str) -> tuple[list[Event], str] | None:
        """a structured reply's or tool call's deltas and finish reason (mock_structured)."""
        answer = answer_for(self._answers, body)  # --answers: the reply scripted for this prompt
        if answer is not None:
            key = "content" if body.get("messages") is not None else "text"
            return [{key: p} for p in pieces(answer, n_chunks)], "stop"
        if not (body.get("response_format") or body.get("structured_outputs") or body.get("json_schema")):
            if not body.get("tools"):
                return None
        self._structured += 1
        invalid = bool(self.s.invalid_every) and self._structured % self.s.invalid_every == 0
        return scripted_deltas(body, n_chunks, serial, invalid)

    async def _write_chunks(self, reply: _Reply, admitted: float, received: float) -> bool:
        """The content chunks on their scripted times, one write each; False when a fault ended the stream."""
        resp, delivery, fault, chunks, events = reply.resp, reply.delivery, reply.fault, reply.chunks, reply.events
        # chat, like vLLM: a role-only first chunk with empty content, not output; at once, or
        # in the first token's write (vLLM's own timing)
        opening = events.start()
        if opening and self.s.opening_chunk == "at-once":
            await resp.write(opening)
            opening = b""
        so_far = list(itertools.accumulate(chunks.tokens))
        n_chunks = len(chunks.tokens)
        reasoning = self.s.reasoning_chunks if events.chat else 0
        start = admitted + (self._ttft_ms(received) + reply.images * self.s.image_ms) / 1e3
        itl = self.s.itl_ms / 1e3
        for i in range(0 if fault != "no_content" else n_chunks, n_chunks):
            if fault and i == self.s.fault_after_chunks and not await self._fault_mid_stream(reply, i):
                return False
            delay = start + i * itl - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            delivery.chunk_times_s.append(time.perf_counter())
            n = chunks.tokens[i]
            if reply.scripted is not None:  # structured output or a tool call
                data = events.scripted(i, reply.scripted[0][i], so_far[i])
            elif self._divergence.active:  # answers that change (divergence.py): token by token
                data = events.content(
                    i, self._divergence.text(so_far[i] - n, n, reply.diverged), i < reasoning, so_far[i]
                )
            else:
                data = events.content(i, (" " + self.s.word) * n, i < reasoning, so_far[i])
            await resp.write(opening + data if i == 0 else data)
            if i == 0:
                self._ttft.observe(delivery.chunk_times_s[0] - received)
            self._generated.inc(n)
            if i and self._spec is not None:  # chunk i is verify step i - 1
                reply.accepted.append(chunks.accepted[i - 1])
                self._spec.step(chunks.accepted[i - 1])
        if opening and (fault == "no_content" or not n_chunks):  # no token to ride with: before the end
            await resp.write(opening)
        return True

    def _ttft_ms(self, received: float) -> float:
        """The scripted TTFT: slower while the warm-up lasts, then jittered."""
        if self._first_received is None:
            self._first_received = received
        ttft = self.s.ttft_ms
        if received - self._first_received < self.s.warmup_slow_s:
            ttft *= self.s.warmup_factor
        if self.s.ttft_jitter:
            ttft *= 1.0 + self.s.ttft_jitter * self._jitter.uniform(-1.0, 1.0)
        return ttft

    async def _fault_mid_stream(self, reply: _Reply, i: int) -> bool:
        """The scripted fault after ``i`` chunks; False when it ended the stream."""
        resp, fault = reply.resp, reply.fault
        if fault == "disconnect":
            reply.request.transport.close()  # type: ignore[union-attr]
            return False
        if fault == "malformed":
            await resp.write(reply.events.malformed())
        elif fault == "error_event":
            await resp.write(reply.events.error_event())
        elif fault == "stall":
            await asyncio.sleep(3600)
        elif fault == "abort":
            for part in reply.events.abort(i, sum(reply.chunks.tokens[:i])):
                await resp.write(part)
            await resp.write_eof()
            reply.delivery.finished_s = time.perf_counter()
            return False
        return True

    async def _write_end(self, reply: _Reply) -> None:
        """The finish reason and the usage in the API's events (unless the fault is ``no_end``),
        with vLLM's per-request ``metrics`` when asked for and the request asked for usage."""
        resp, tokens = reply.resp, reply.chunks.tokens
        if reply.fault == "no_end":
            await resp.write_eof()
            reply.delivery.finished_s = time.perf_counter()
            return
        completion = 0 if reply.fault == "no_content" else sum(tokens)
        reason = reply.scripted[1] if reply.scripted is not None else "length"
        k = self.s.reasoning_chunks if reply.events.chat else 0
        reasoning = sum(tokens[:k]) if k and completion else 0
        metrics = request_metrics(self.s, reply.delivery, completion, reply.accepted) if reply.include_usage else None
        for part in reply.events.end(reason, completion, reasoning, metrics):
            await resp.write(part)
        await resp.write_eof()
        reply.delivery.finished_s = time.perf_counter()

    def _prompt_tokens(self, body: Body, images: int = 0) -> int:
        """The prompt's tokens as the usage counts them (the words of its messages or prompt as
        JSON; with a prefix cache, its cache tokens), the images' added."""
        image_tokens = images * self.s.image_tokens
        if self.cache is None:
            return len(json.dumps(body.get("messages") or body.get("prompt") or "").split()) + image_tokens
        return len(self.cache.tokens(body)) + image_tokens

    def _prompt(self, body: Body, images: int = 0) -> Prompt:
        """The prompt's tokens and, with a prefix cache, those it hit (reported as vLLM does,
        prompt_tokens_details.cached_tokens); the images' tokens are never cached. Looked up once
        a request: the lookup counts the prompt as seen."""
        if self.cache is None:
            return Prompt(self._prompt_tokens(body, images))
        tokens = self.cache.tokens(body)
        cached = self.cache.lookup(tokens)
        self._queries.inc(len(tokens))
        self._hits.inc(cached)
        return Prompt(len(tokens) + images * self.s.image_tokens, cached)


@dataclass
class _Reply:
    """One streamed reply as it is written: where to, what the script says, and its events."""

    request: web.Request
    resp: web.StreamResponse
    delivery: Delivery
    events: Renderer  # the reply's events in its API's shape
    fault: str | None
    chunks: Plan  # what each content chunk carries (its tokens; with speculation, its step's accepted drafts)
    images: int = 0  # images: the request's image parts
    include_usage: bool = False  # the request asked for usage (stream_options.include_usage): vLLM's metrics go with it
    accepted: list[int] = field(default_factory=list)  # speculation: each verify step written, its accepted drafts
    scripted: tuple[list[Event], str] | None = None  # each chunk's delta, the finish reason
    diverged: bool = False  # --diverge-*: its words differ from diverge_at on


class _OpenAIEvents(Renderer):
    """The OpenAI shapes of chat and completions chunks, as vLLM streams them: ``data: <json>``
    events, the usage on every chunk when asked for (continuous_usage_stats), ``[DONE]`` last."""

    def __init__(self, rid: str, model: str, body: Body, prompt: Callable[[], Prompt]) -> None:
        super().__init__(rid, model, body, prompt)
        opts = body.get("stream_options") or {}  # usage on every chunk: vLLM sends it only with include_usage
        self.continuous = bool(opts.get("include_usage") and opts.get("continuous_usage_stats"))
        self.created = int(time.time())
        self._pieces: dict[tuple[str, bool], bytes] = {}  # a chunk's event by its text and whether it is reasoning

    @staticmethod
    def error_body(status: int, message: str) -> Event:
        return {"error": {"message": message, "code": status}}

    def usage_so_far(self, completion: int) -> Event | None:
        """vLLM's usage on every chunk (continuous_usage_stats): the completion tokens so far."""
        if not self.continuous:
            return None
        return {"prompt_tokens": 1, "completion_tokens": completion, "total_tokens": 1 + completion}

    def event(self, choice: Event | None, usage: Event | None = None, metrics: Event | None = None) -> bytes:
        data: Event = {
            "id": self.rid,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [choice] if choice else [],
        }
        if usage:
            data["usage"] = usage
        if metrics:  # vLLM's per-request metrics, beside the final usage
            data["metrics"] = metrics
        return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"

    def start(self) -> bytes:
        if not self.chat:
            return b""
        return self.event(
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}, self.usage_so_far(0)
        )

    def content(self, i: int, text: str, reasoning: bool, so_far: int) -> bytes:
        if self.continuous:  # vLLM's continuous_usage_stats: the tokens so far, this chunk's included
            return self.event(self._content(text, reasoning), self.usage_so_far(so_far))
        key = (text, reasoning)
        if key not in self._pieces:
            self._pieces[key] = self.event(self._content(text, reasoning))
        return self._pieces[key]

    def _content(self, text: str, reasoning: bool) -> Event:
        if self.chat:
            key = "reasoning_content" if reasoning else "content"
            return {"index": 0, "delta": {key: text}, "finish_reason": None}
        return {"index": 0, "text": text, "finish_reason": None}

    def scripted(self, i: int, delta: Event, so_far: int) -> bytes:
        """A scripted chunk: a chat delta, or a completion's ``{"text": ...}``."""
        choice = (
            {"index": 0, "delta": delta, "finish_reason": None}
            if self.chat
            else {"index": 0, **delta, "finish_reason": None}
        )
        return self.event(choice, self.usage_so_far(so_far))

    def _finish(self, reason: str) -> Event:
        if self.chat:
            return {"index": 0, "delta": {}, "finish_reason": reason}
        return {"index": 0, "text": "", "finish_reason": reason}

    def malformed(self) -> bytes:
        return b"data: {this is not json\n\n"

    def error_event(self) -> bytes:
        return b'data: {"error": {"message": "scripted error event"}}\n\n'

    def abort(self, i: int, so_far: int) -> list[bytes]:
        """``finish_reason: "abort"``, usage and ``[DONE]``, as vLLM ends a request its engine aborted."""
        usage: Event = {"prompt_tokens": 1, "completion_tokens": i, "total_tokens": i + 1}
        return [self.event(self._finish("abort")), self.event(None, usage), b"data: [DONE]\n\n"]

    def end(self, reason: str, completion: int, reasoning: int, metrics: Event | None) -> list[bytes]:
        """The finish reason, the usage (with vLLM's metrics object when given), ``[DONE]``."""
        finish = self.event(self._finish(reason), self.usage_so_far(completion))
        prompt = self.prompt()
        usage: Event = {
            "prompt_tokens": prompt.tokens,
            "completion_tokens": completion,
            "total_tokens": prompt.tokens + completion,
        }
        if prompt.cached is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": prompt.cached}
        if self.chat and reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return [finish, self.event(None, usage, metrics), b"data: [DONE]\n\n"]


class _CompletionsEvents(_OpenAIEvents):
    chat = False  # a prompt: no reasoning chunks, no images


# Each API's events (the chat-shaped reply in its shape), by the name the routes give it.
RENDERERS: dict[str, type[Renderer]] = {
    "chat": _OpenAIEvents,
    "completions": _CompletionsEvents,
    "messages": MessagesEvents,
    "responses": ResponsesEvents,
}


def _without_images(messages: list[Any]) -> tuple[list[Any], int]:
    """Chat messages with their image_url parts counted and left out: a message whose content is
    a list of parts becomes its text parts joined by newlines (how many image parts there were)."""
    out, images = [], 0
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, list):
            out.append(m)
            continue
        parts = [p for p in content if isinstance(p, dict)]
        images += sum(1 for p in parts if p.get("type") == "image_url")
        text = "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
        out.append({**m, "content": text})
    return out, images


def serve(settings: MockSettings, host: str = "127.0.0.1", port: int = 9000) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover
        pass
    web.run_app(MockServer(settings).app, host=host, port=port, print=None, access_log=None, shutdown_timeout=1.0)


def _scripted_failure(fault: str | None, renderer: type[Renderer]) -> web.Response | None:
    """The HTTP error (in the API's shape) a request drawing a scripted ``http_*`` fault gets instead of a reply."""
    if fault not in ("http_500", "http_429", "http_400"):
        return None
    status = int(fault[5:])
    return web.json_response(renderer.error_body(status, f"scripted {fault}"), status=status)
