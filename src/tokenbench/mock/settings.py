"""The scripted server's settings (MockSettings: timings, faults, caches, spans) and what it logs of
each request it served (Delivery): the known answers the tests compare results with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from tokenbench.common.frozen import FrozenModel
from tokenbench.config.flags import ENGINE_FIGURES, FAULTS, REPLIES, SCHEDULING, SPANS, Flag
from tokenbench.mock.scaler import parse_script

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
OtlpProtocol = Literal["http/protobuf", "grpc"]  # how the spans go (mock/otlp.py)
SpecMetrics = Literal["none", "summary", "detailed"]  # vLLM's --per-request-spec-decode-metrics


class MockSettings(FrozenModel):
    """What the server scripts. A field `tokenbench mock` sets declares its flag (``Flag``: name,
    help, default shown; cli/tools.py builds the command's options from them), named as the
    field (``ttft_ms``: ``--ttft-ms``, the knobs of tests/run_helpers.py's ``mock_command``); the
    others are set by the tests that serve it in their own process."""

    ttft_ms: Annotated[float, Flag("--ttft-ms", "Time to first content chunk.", REPLIES, default=True)] = 50.0
    itl_ms: Annotated[float, Flag("--itl-ms", "Gap between content chunks.", REPLIES, default=True)] = 10.0
    output_tokens: Annotated[
        int, Flag("--output-tokens", "Chunks per reply when a request sets no max_tokens.", REPLIES, default=True)
    ] = 128
    tokens_per_chunk: Annotated[
        int, Flag("--tokens-per-chunk", "Tokens each chunk stands for.", REPLIES, default=True)
    ] = 1
    word: str = "hi"
    model: Annotated[str, Flag("--model", "The model name /v1/models lists and replies carry.", default=True)] = (
        "mock-model"
    )
    # what /v1/models says of the model beside its name (vLLM's root: the weights' path; parent)
    model_root: Annotated[
        str, Flag("--model-root", "/v1/models' root of the model (vLLM: the weights' path; \"\": none).")
    ] = ""
    # answers that change (mock/divergence.py): a share of prompts, or the requests above a load,
    # get a reply that differs from output token diverge_at on; the salt stands for other weights
    diverge_share: Annotated[
        float,
        Flag(
            "--diverge-share",
            "A deterministic share F of prompts (by the hash of their text) get a reply that differs from "
            "output token --diverge-at on.",
            default=True,
        ),
    ] = Field(default=0.0, ge=0, le=1)
    diverge_at: Annotated[
        int, Flag("--diverge-at", "The output token (0-based) a diverging reply differs from.", default=True)
    ] = Field(default=0, ge=0)
    diverge_above_in_flight: Annotated[
        int,
        Flag(
            "--diverge-above-in-flight",
            "Replies differ from --diverge-at on when more than K requests (itself counted) are in flight as "
            "the request arrives: load-dependent answers (0: never).",
            default=True,
        ),
    ] = Field(default=0, ge=0)
    fingerprint_salt: Annotated[
        str,
        Flag(
            "--fingerprint-salt",
            "Every reply's words carry this (hi-SALT): other weights under the same name, so the served "
            "model's fingerprint differs.",
        ),
    ] = ""
    # when a chat stream's role-only opening chunk is written: at once (the request's first byte
    # back, the default), or in the first token's write, as vLLM does (it yields the role chunk on
    # its engine's first output): a tool that times the first event as the first token reads the
    # prefill as ~0 against the first and right against the second (benchmarks/conformance.py)
    opening_chunk: Annotated[
        Literal["at-once", "with-first-token"],
        Flag("--opening-chunk", "When a chat stream's role-only first chunk is written.", REPLIES, default=True),
    ] = "at-once"
    fault: Annotated[
        Fault,
        Flag("--fault", "The fault scripted on every --fault-every-th request (none: no fault).", FAULTS, default=True),
    ] = "none"
    fault_every: Annotated[
        int, Flag("--fault-every", "Apply the fault to every N-th request.", FAULTS, default=True)
    ] = 1
    fault_after_chunks: Annotated[
        int, Flag("--fault-after-chunks", "Mid-stream faults happen after this many chunks.", FAULTS, default=True)
    ] = 3
    record_deliveries: bool = True
    # > 0: a request arriving above this many in flight counts a "preemption"
    kv_slots: Annotated[
        int,
        Flag(
            "--kv-slots",
            "Count a vllm:num_preemptions_total for each request arriving above this many in flight (0: never).",
            SCHEDULING,
            default=True,
        ),
    ] = 0
    # > 0: at most this many generate at once, the rest wait (FIFO)
    max_streams: Annotated[
        int,
        Flag(
            "--max-streams",
            "Capacity: at most this many requests generate at once; the rest wait FIFO (0: no limit).",
            SCHEDULING,
            default=True,
        ),
    ] = 0
    # a scripted scaler (mock/scaler.py): replicas over time, each with max_streams slots
    replicas_script: Annotated[
        str,
        Flag(
            "--replicas-script",
            "Scripted replicas, SECONDS:REPLICAS,... from the first request (e.g. 0:1,4:2,12:1), each with "
            "--max-streams slots; replies name theirs in x-served-by, GET /mock/replicas answers in Ray Serve's "
            'shape ("": one server).',
            SCHEDULING,
        ),
    ] = ""
    replica_startup_s: Annotated[
        float,
        Flag(
            "--replica-startup-s",
            "With --replicas-script: a new replica is STARTING this long before it is RUNNING and serves.",
            SCHEDULING,
            default=True,
        ),
    ] = Field(default=0.0, ge=0)
    # chat: the first K content chunks are reasoning (see the server's doc)
    reasoning_chunks: Annotated[
        int,
        Flag(
            "--reasoning-chunks",
            "Chat: the first K chunks of each reply are reasoning_content (TTFO = TTFT + K * ITL), "
            "and usage gives reasoning_tokens.",
            REPLIES,
            default=True,
        ),
    ] = 0
    # log each request's X-* headers and its messages (or prompt) in its delivery (tests of what
    # a client sent, e.g. a session's history and X-Session-ID)
    record_requests: Annotated[
        bool,
        Flag(
            "--record-requests",
            "Log each request's X-* headers and messages/prompt in /mock/deliveries.",
            REPLIES,
            default="no-record-requests",
        ),
    ] = False
    max_model_len: int = 0  # > 0: listed in /v1/models as vLLM does (a session's history limit)
    # > 0: a prefix cache of blocks of this many prompt tokens (see PrefixCache); 0: none, and no
    # cached_tokens in the usage
    cache_block_tokens: Annotated[
        int,
        Flag(
            "--cache-block-tokens",
            "A prefix cache of blocks of N prompt tokens (words, or token ids): usage reports cached_tokens, "
            "/metrics vLLM's prefix_cache counters, POST /reset_prefix_cache empties it (0: none).",
            SCHEDULING,
            default=True,
        ),
    ] = 0
    # embeddings, rerank, score: a pooling answer's cost per input (pooling.py: ttft_ms + N * input_ms)
    input_ms: Annotated[
        float,
        Flag(
            "--input-ms",
            "/v1/embeddings, /v1/rerank, /v1/score: each input's cost (answer at TTFT + N * this).",
            REPLIES,
            default=True,
        ),
    ] = 5.0
    # images: each image_url part's prefill cost (added to TTFT) and prompt tokens
    image_ms: Annotated[
        float,
        Flag(
            "--image-ms",
            "Chat: each image_url part adds this to the reply's TTFT (prefill cost).",
            REPLIES,
            default=True,
        ),
    ] = 0.0
    image_tokens: Annotated[
        int,
        Flag("--image-tokens", "Chat: each image_url part adds this to usage.prompt_tokens.", REPLIES, default=True),
    ] = 0
    # routing by priority and by LoRA adapter (see the server's doc)
    priority_queue: Annotated[
        bool,
        Flag(
            "--priority-queue",
            "With --max-streams: admit waiting requests by their priority field (lower first).",
            SCHEDULING,
            default="no-priority-queue",
        ),
    ] = False
    adapters: Annotated[
        str,
        Flag(
            "--adapters",
            "LoRA adapters served, NAME=MS,...: each one's extra TTFT; other model names get 404.",
            REPLIES,
        ),
    ] = ""
    # every N-th request asking for structure or offering tools gets invalid output
    # (structured.py); 0: all valid
    invalid_every: Annotated[
        int,
        Flag(
            "--invalid-every",
            "Structured output and tool calls: every N-th request asking for structure (or offering tools) "
            "gets invalid JSON (0: all valid).",
            FAULTS,
            default=True,
        ),
    ] = 0
    # answers by prompt (mock/answers.py): a graded run's known answers; "": the usual words
    answers: Annotated[
        str,
        Flag(
            "--answers",
            'JSONL of {"prompt": ..., "reply": ...}: a request whose prompt (the last user message, or the '
            "completion prompt) equals one gets its reply as content; others the usual words.",
            panel=REPLIES,
        ),
    ] = ""
    # a scripted warm-up transient and jitter: a request received within warmup_slow_s of the
    # first one has its TTFT times warmup_factor; every TTFT is then times 1 + ttft_jitter * U
    # (U uniform on [-1, 1], drawn from random.Random(jitter_seed) in the order requests arrive:
    # a TTFT's relative standard deviation is ttft_jitter / sqrt(3))
    warmup_slow_s: Annotated[
        float,
        Flag(
            "--warmup-slow-s",
            "A scripted warm-up transient: requests received within N s of the first one have their TTFT "
            "times --warmup-factor.",
            REPLIES,
            default=True,
        ),
    ] = 0.0
    warmup_factor: Annotated[
        float, Flag("--warmup-factor", "TTFT multiplier during --warmup-slow-s.", REPLIES, default=True)
    ] = 1.0
    ttft_jitter: Annotated[
        float,
        Flag(
            "--ttft-jitter",
            "Each TTFT times 1 + J * U, U uniform on [-1, 1] (seeded by --jitter-seed): relative SD J/sqrt(3).",
            REPLIES,
            default=True,
        ),
    ] = 0.0
    jitter_seed: Annotated[int, Flag("--jitter-seed", "Seed of --ttft-jitter's draws.", REPLIES, default=True)] = 0
    # an OTLP endpoint to send each reply's span to (otlp.py; "": none), and its robustness
    # knobs: every N-th span never sent, each sent this late, an unknown attribute
    otlp_endpoint: Annotated[
        str,
        Flag(
            "--otlp-endpoint",
            "After each reply, post an llm_request span with vLLM's gen_ai.* attributes and the script's "
            "queue/prefill/decode times to this OTLP/HTTP URL (protobuf), in the request's traceparent's trace.",
            SPANS,
        ),
    ] = ""
    otlp_skip_every: Annotated[
        int, Flag("--otlp-skip-every", "With --otlp-endpoint: never send every N-th span.", SPANS, default=True)
    ] = 0
    otlp_delay_ms: Annotated[
        float, Flag("--otlp-delay-ms", "With --otlp-endpoint: send each span this late.", SPANS, default=True)
    ] = 0.0
    otlp_extra_attribute: Annotated[
        str,
        Flag(
            "--otlp-extra-attribute",
            "With --otlp-endpoint: add this attribute (one vLLM never sets) to each span.",
            SPANS,
        ),
    ] = ""
    # how the spans go: "http/protobuf" (a POST to the URL) or "grpc" (TraceService/Export to the
    # host:port, as an exporter left at OTEL_EXPORTER_OTLP_TRACES_PROTOCOL's default does)
    otlp_protocol: Annotated[
        OtlpProtocol,
        Flag(
            "--otlp-protocol",
            "With --otlp-endpoint: http/protobuf (POST to the URL) or grpc (TraceService/Export to the "
            "endpoint's host:port).",
            SPANS,
            default=True,
        ),
    ] = "http/protobuf"

    # speculative decoding as vLLM streams it (see the server's doc): the draft length k, and each
    # verify step's accepted drafts as a cycle ("": every step accepts all k)
    spec_tokens: Annotated[
        int,
        Flag(
            "--spec-tokens",
            "Speculative decoding: the draft length K. The first chunk is the prefill's token, each later one a "
            "verify step's accepted drafts plus its bonus token (--tokens-per-chunk ignored; 0: none).",
            ENGINE_FIGURES,
            default=True,
        ),
    ] = Field(default=0, ge=0)
    spec_accept: Annotated[
        str,
        Flag(
            "--spec-accept",
            "With --spec-tokens K: the drafts each verify step accepts, a comma-separated cycle of 0..K "
            "(e.g. 3,1,0,2; default: all K).",
            ENGINE_FIGURES,
        ),
    ] = ""
    # a fleet's replica: the header a router or proxy would set (nginx's add_header with
    # $upstream_addr), here set by the replica itself so a test knows which one served
    served_by: Annotated[
        str | None,
        Flag(
            "--served-by",
            "Answer every stream with an x-served-by: NAME header (a fleet's replica, as a proxy names it).",
            REPLIES,
        ),
    ] = None
    # vLLM's per-request ``metrics`` object on the final usage chunk (include_usage only)
    per_request_metrics: Annotated[
        bool,
        Flag(
            "--per-request-metrics",
            "As vLLM's --enable-per-request-metrics: the final usage chunk's metrics object gives the "
            "request's queue, prefill and generation times, mean ITL and tokens/s (as written).",
            ENGINE_FIGURES,
            default="no-per-request-metrics",
        ),
    ] = False
    spec_metrics: Annotated[
        SpecMetrics,
        Flag(
            "--spec-metrics",
            "As vLLM's --per-request-spec-decode-metrics: with --spec-tokens, the metrics object's "
            "speculative_decoding (summary: counts and histogram; detailed: each step's too).",
            ENGINE_FIGURES,
            default=True,
        ),
    ] = "none"

    @model_validator(mode="after")
    def _replicas_script(self) -> MockSettings:
        if not self.replicas_script.strip():
            return self
        parse_script(self.replicas_script)  # its own error says what to write
        if not self.max_streams:
            raise ValueError(
                f"--replicas-script {self.replicas_script!r} needs --max-streams N > 0: each replica's slots"
            )
        return self

    @field_validator("spec_accept")
    @classmethod
    def _spec_accept(cls, v: str, info: ValidationInfo) -> str:
        if not v.strip():
            return v
        k = info.data.get("spec_tokens")
        if not k:  # spec_tokens 0, or itself invalid (its own error says so)
            raise ValueError(f"{v!r} needs --spec-tokens K > 0 (the draft length)")
        try:
            cycle = [int(p) for p in v.split(",")]
        except ValueError:
            cycle = []
        if not cycle or not all(0 <= a <= k for a in cycle):
            raise ValueError(
                f"{v!r}: write the drafts each verify step accepts, comma-separated, each 0..{k} (--spec-tokens {k})"
            )
        return v

    def accept_cycle(self) -> tuple[int, ...]:
        """``spec_accept`` as each verify step's accepted drafts, in turn (all ``spec_tokens`` when unset)."""
        if not self.spec_accept.strip():
            return (self.spec_tokens,)
        return tuple(int(p) for p in self.spec_accept.split(","))

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
    images: int = 0  # image_url parts in the request's messages
    model: str | None = None  # the request's model (a LoRA adapter's name)
    priority: float | None = None  # the request's priority field
    traceparent: str | None = None  # the W3C traceparent the request carried
    replica: str | None = None  # --replicas-script: the scripted replica that served it
    diverged_at: int | None = None  # --diverge-*: the output token its reply differs from (None: the usual reply)
