"""The scripted server's settings (MockSettings: timings, faults, caches, spans) and what it logs of
each request it served (Delivery): the known answers the tests compare results with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeGuard, get_args

Fault = Literal[
    "none",
    "http_500",
    "http_429",
    "http_400",
    "disconnect",
    "malformed",
    "error_event",
    "no_content",
    "stall",
    "abort",
    "no_end",
]


FAULTS: tuple[str, ...] = get_args(Fault)


def is_fault(value: str) -> TypeGuard[Fault]:
    """``value`` names a fault (the command line gives text; MockSettings takes a Fault)."""
    return value in FAULTS


@dataclass(frozen=True)
class MockSettings:
    ttft_ms: float = 50.0
    itl_ms: float = 10.0
    output_tokens: int = 128  # chunks per reply when the request sets no max_tokens
    tokens_per_chunk: int = 1
    word: str = "hi"
    model: str = "mock-model"
    fault: Fault = "none"
    fault_every: int = 1
    fault_after_chunks: int = 3
    record_deliveries: bool = True
    kv_slots: int = 0  # > 0: a request arriving above this many in flight counts a "preemption"
    max_streams: int = 0  # > 0: at most this many generate at once, the rest wait (FIFO)
    reasoning_chunks: int = 0  # chat: the first K content chunks are reasoning (see module doc)
    # log each request's X-* headers and its messages (or prompt) in its delivery (tests of what
    # a client sent, e.g. a session's history and X-Session-ID)
    record_requests: bool = False
    max_model_len: int = 0  # > 0: listed in /v1/models as vLLM does (a session's history limit)
    # > 0: a prefix cache of blocks of this many prompt tokens (see PrefixCache); 0: none, and no
    # cached_tokens in the usage
    cache_block_tokens: int = 0
    # pooling APIs: a pooling answer's cost per input (mock_pooling.py: ttft_ms + N * input_ms)
    input_ms: float = 5.0
    # images: each image_url part's prefill cost (added to TTFT) and prompt tokens
    image_ms: float = 0.0
    image_tokens: int = 0
    # routing: (see the module doc)
    priority_queue: bool = False
    adapters: str = ""

    # every N-th request asking for structure or offering tools gets invalid output
    # (mock_structured.py); 0: all valid
    invalid_every: int = 0
    # autostop: a scripted warm-up transient and jitter: a request received within warmup_slow_s of
    # the first one has its TTFT times warmup_factor; every TTFT is then times 1 + ttft_jitter * U
    # (U uniform on [-1, 1], drawn from random.Random(jitter_seed) in the order requests arrive:
    # a TTFT's relative standard deviation is ttft_jitter / sqrt(3))
    warmup_slow_s: float = 0.0
    warmup_factor: float = 1.0
    ttft_jitter: float = 0.0
    jitter_seed: int = 0
    # server spans: an OTLP/HTTP endpoint to post each reply's span to (mock_otlp.py; "": none), and its
    # robustness knobs: every N-th span never sent, each sent this late, an unknown attribute
    otlp_endpoint: str = ""
    otlp_skip_every: int = 0
    otlp_delay_ms: float = 0.0
    otlp_extra_attribute: str = ""
    # how the spans go: "http/protobuf" (a POST to the URL) or "grpc" (TraceService/Export to the
    # host:port, as an exporter left at OTEL_EXPORTER_OTLP_TRACES_PROTOCOL's default does)
    otlp_protocol: str = "http/protobuf"

    def adapter_costs_ms(self) -> dict[str, float]:
        """``adapters`` as {name: extra TTFT ms}."""
        costs = {}
        for part in filter(None, (p.strip() for p in self.adapters.split(","))):
            name, _, ms = part.partition("=")
            costs[name.strip()] = float(ms or 0)
        return costs


@dataclass
class Delivery:
    received_s: float
    admitted_s: float | None = None  # when it got a generation slot (= received without a cap)
    wait_s: float | None = None  # admitted - received: queueing inside the server
    chunk_times_s: list[float] = field(default_factory=list)
    fault: str | None = None
    finished_s: float | None = None  # the end of the stream was written
    headers: dict[str, str] | None = None  # record_requests: the request's X-* headers
    messages: object = None  # record_requests: the chat messages sent
    prompt: str | None = None  # record_requests: the completions prompt sent
    images: int = 0  # images: image_url parts in the request's messages
    model: str | None = None  # the request's model (a LoRA adapter's name)
    priority: float | None = None  # the request's priority field
    traceparent: str | None = None  # server spans: the W3C traceparent the request carried
