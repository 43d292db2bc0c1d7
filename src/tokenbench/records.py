"""What is sent (Request) and what happened to it (RequestRecord): raw facts only.

Every metric is derived from records, so a metric bug never needs a re-run. Times are seconds on
the run's monotonic clock (``time.perf_counter()`` minus the run origin, see ``RunClock``).

A record's chunk arrival times are an ``array.array('d')``: 8 bytes a chunk, where a list of floats
costs ~32 (a point of 10 M chunks holds ~80 MB of them, not ~320 MB), and metrics.py reads them
as numpy arrays without a copy. An array never equals a list (``array('d', [1.0]) == [1.0]`` is
False): compare ``chunk_times_s.tolist()``. records.jsonl keeps them as a JSON list of floats.
"""

from __future__ import annotations

import enum
import hashlib
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

import orjson


class Outcome(str, enum.Enum):
    OK = "ok"
    HTTP_ERROR = "http_error"
    CONNECT_ERROR = "connect_error"
    TIMEOUT = "timeout"
    STREAM_ERROR = "stream_error"  # dropped connection, malformed or error event, engine abort
    NO_OUTPUT = "no_output"  # stream ended without a single content chunk
    CANCELLED = "cancelled"  # in flight when the run stopped (sent, no end yet)
    NOT_SENT = "not_sent"  # open loop: still waiting for a concurrency slot when the point ended
    WORKER_LOST = "worker_lost"  # its worker process (or Ray actor) died while it was in flight


# Outcomes the run imposed rather than the server: the request has no end of its own. They are
# censored, not failures: left out of error_rate and good_fraction alike (METRICS.md).
UNFINISHED = frozenset({Outcome.CANCELLED, Outcome.NOT_SENT, Outcome.WORKER_LOST})


def failed(outcome: Outcome) -> bool:
    """A request that finished and failed (the run's own cuts, UNFINISHED, are neither ok nor failed)."""
    return outcome is not Outcome.OK and outcome not in UNFINISHED


# finish_reason values by which an engine says it gave up on a request (vLLM and SGLang end an
# aborted request with HTTP 200, finish_reason "abort" and [DONE]; vLLM uses "error" for an
# engine error): the stream is a failure, whatever content came before.
ABORT_REASONS = frozenset({"abort", "error"})
# finish_reason values that mean the model produced its end-of-sequence token. Engines count that
# token in their usage (vLLM, SGLang, llama.cpp: completion_tokens; TGI: generated_tokens) but
# never stream it as content (see RequestRecord.streamed_tokens).
EOS_REASONS = frozenset({"stop", "eos_token", "eos"})


class TokenSource(str, enum.Enum):
    SERVER = "server"  # the server's usage report
    TOKENIZER = "tokenizer"  # client-side tokenizer over the received text
    CHUNKS = "chunks"  # one token per content chunk: an estimate


@dataclass(frozen=True, slots=True)
class Request:
    """One request to send. Exactly one of ``prompt`` / ``messages`` is set."""

    prompt: str | None = None
    # chat messages (a JSON edge: an assistant turn's ``tool_calls`` is a list, its content may be None)
    messages: tuple[dict[str, Any], ...] | None = None
    max_tokens: int | None = None
    expected_prompt_tokens: int | None = None  # the dataset's count (exact with a tokenizer)
    # A trace's row (its file line) and its time in the trace, seconds from the trace's first row:
    # a replay sends it at that time divided by the speed (load.replay_offsets).
    trace_row: int | None = None
    trace_time_s: float | None = None
    session: SessionTurn | None = None  # a multi-turn session's turn (its record keeps the same)
    # Sent on top of the target's headers (e.g. X-Session-ID for a sticky router).
    headers: tuple[tuple[str, str], ...] = ()
    # The prompt as token ids, sent instead of ``prompt`` on the completions API to a server whose
    # profile accepts them (vLLM, SGLang): the server's blocks are then exactly the trace's.
    # ``prompt`` holds a text rendering of the same request for everything else.
    prompt_token_ids: tuple[int, ...] | None = None
    # pooling APIs: a pooling request's inputs (--api embeddings: the strings to embed;
    # rerank and score: the documents scored against ``query``), ``prompt`` holding them joined
    inputs: tuple[str, ...] | None = None
    query: str | None = None
    # images: image URLs (data: or http(s):) sent as chat image_url parts after the last
    # user text (images.chat_messages), and their pixels in all (None: some image's are unknown)
    images: tuple[str, ...] = ()
    image_pixels: int | None = None
    # routing: the group it belongs to (datasets/mix.py; its tenant is also in ``headers``)
    group: Group | None = None
    # a graded dataset's row: the answer expected of the reply and the grader that checks it
    # (datasets/graders.py); the client grades the reply when it ends (RequestRecord.grade)
    expected: Expected | None = None

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("a Request needs exactly one of prompt or messages")
        if self.prompt_token_ids is not None and self.prompt is None:
            raise ValueError("a Request with prompt_token_ids needs the prompt's text too")

    def as_prompt_text(self) -> str:
        """Flatten chat messages for the completions API (and prompt text for chat)."""
        if self.prompt is not None:
            return self.prompt
        return "\n\n".join(m["content"] or "" for m in self.messages or ())

    def prompt_key(self) -> str:
        """The prompt's identity across runs (``prompt_hash``): the hash of its text as
        ``as_prompt_text`` flattens it."""
        return prompt_hash(self.as_prompt_text())

    def as_messages(self) -> list[dict[str, Any]]:
        if self.messages is not None:
            return list(self.messages)
        return [{"role": "user", "content": self.prompt or ""}]


def prompt_hash(text: str) -> str:
    """A prompt's identity: the first 16 hex digits of the sha256 of its text (UTF-8). Two runs
    that sent the same prompts pair their replies by it (metrics/agreement.py); the mock chooses
    its diverging prompts by it (mock/divergence.py)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _no_chunks() -> array[float]:
    return array("d")


class ChunkEnds:
    """A record's chunk times with the middle dropped: how many there were, the first and the
    last, which is all a per-request metric reads (TTFT, E2E, TPOT, tokens per chunk). A point's
    summary keeps its records like this once their chunks are tallied (metrics.ChunkTally), so a
    point of any length never holds every chunk time at once. Reads like the array it replaces
    for ``len``, truth, ``[0]`` and ``[-1]``; anything else needs the full record."""

    __slots__ = ("n", "first", "last")

    def __init__(self, times: array[float] | ChunkEnds) -> None:
        self.n = len(times)
        self.first = times[0] if self.n else None
        self.last = times[-1] if self.n else None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> float:
        if self.n and i in (0, -self.n):
            return self.first  # type: ignore[return-value]
        if self.n and i in (-1, self.n - 1):
            return self.last  # type: ignore[return-value]
        raise IndexError(f"chunk {i} of {self.n}: only the first and last are kept (ChunkEnds)")

    def __repr__(self) -> str:
        return f"ChunkEnds(n={self.n}, first={self.first}, last={self.last})"


# A record's parts: what a request had or met when its concept applies (None when it does not),
# each declared once. On the line (records.jsonl: a public interface) a part's fields are keys of
# their own, in the part's place, and an absent part writes its fields' defaults: the line keeps the
# flat keys it always had (RequestRecord.to_line).


@dataclass(frozen=True, slots=True)
class Group:
    """routing: the group a request belongs to (datasets/mix.py): the LoRA adapter it is sent to
    (its ``model``), its class, its tenant and the priority it carries. A multi-turn conversation
    carries one, which every turn's request takes; the request's record keeps the same."""

    adapter: str | None = None
    request_class: str | None = None
    tenant: str | None = None
    priority: int | None = None


@dataclass(frozen=True, slots=True)
class SessionTurn:
    """A multi-turn session's turn (datasets.sessions, loadgen/sessions.py): the conversation's id,
    the turn's 0-based index, and the tokens of the history before this turn's new user text
    (system prompt + earlier user turns + the server's own replies)."""

    session_id: str | None = None
    turn_index: int | None = None
    history_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class ProgramCall:
    """An agent program's call (datasets/programs, loadgen/programs.py): the session as run and the
    program it replays (its id in the file), the call's id there, its sub-agent depth and role,
    when its session started and when its parents allowed it to be sent (run clock; the record's
    ``scheduled_s`` is the same, so its queue delay is the schedule's lag), and the edge that
    allowed it last: the parent, what of it was waited on (end, start, first_token), the delay
    after it and the part of that delay that was a tool's (None: a root, allowed by its session's
    start and its own offset). ``program_parents``: every parent's id."""

    program_session: str | None = None
    program_id: str | None = None
    program_call: str | None = None
    program_depth: int | None = None
    program_role: str | None = None
    program_start_s: float | None = None
    program_ready_s: float | None = None
    program_after: str | None = None
    program_anchor: str | None = None
    program_delay_s: float | None = None
    program_tool_s: float | None = None
    program_parents: tuple[str, ...] | None = None
    # the prompt's leading tokens that repeat a parent's prompt and reply (what a prefix cache
    # holding the parent's request could serve; a reply's last token is never fed back: less one)
    program_prefix_tokens: int | None = None
    program_calls: int | None = None  # the program's calls: a session with fewer records did not complete

    def __post_init__(self) -> None:
        if self.program_parents is not None and not isinstance(self.program_parents, tuple):  # a line's list
            object.__setattr__(self, "program_parents", tuple(self.program_parents))


@dataclass(slots=True)
class Reasoning:
    """Reasoning models: the arrival of the first chunk that is not reasoning content (the answer;
    equal to chunk_times_s[0] when nothing was reasoning; None without such a chunk), how many
    chunks were reasoning content, and the server's count of reasoning tokens
    (usage.completion_tokens_details.reasoning_tokens, when it gives one). A record without any
    of them (no chunk, no reasoning) has none."""

    first_output_s: float | None = None
    reasoning_chunks: int = 0
    reasoning_tokens: int | None = None


@dataclass(slots=True)
class Pooling:
    """pooling APIs: the inputs a pooling request sent (strings embedded, documents scored). Its
    record has no chunks: end_s is when the answer completed. None: a generative request."""

    inputs: int | None = None

    @staticmethod
    def of(request: Request) -> Pooling | None:
        return Pooling(len(request.inputs)) if request.inputs is not None else None


@dataclass(slots=True)
class ImageInput:
    """images: how many images the request carried and their pixels in all (None: some image's
    size unknown: a URL sent as given). None: text only."""

    images: int | None = None
    image_pixels: int | None = None

    @staticmethod
    def of(request: Request) -> ImageInput | None:
        return ImageInput(len(request.images), request.image_pixels) if request.images else None


@dataclass(frozen=True, slots=True)
class Expected:
    """A graded dataset row's expected answer and its grader's spec (datasets/graders.py:
    exact, normalised, regex:PATTERN, numeric[:TOL], json:FIELD, choice)."""

    answer: str
    grader: str


@dataclass(slots=True)
class Grade:
    """A graded request (Request.expected): the grader's spec, whether the reply was graded (True:
    an ok reply; False: the request failed, so there was no reply to grade), whether it was correct
    and what the grader read from it (None: nothing it could read, or not graded)."""

    grader: str | None = None
    graded: bool | None = None
    correct: bool | None = None
    graded_answer: str | None = None


@dataclass(slots=True)
class OutputCheck:
    """structured output (clients/structured.py): the constraint the request asked for
    (--response-format's kind), whether the reply parsed as JSON (the JSON kinds) and met the
    constraint (schema, choice, regex; None: not checkable, e.g. a grammar, or no reply). None:
    unconstrained."""

    structured: str | None = None
    output_parsed: bool | None = None
    output_valid: bool | None = None


@dataclass(slots=True)
class ToolUse:
    """--tools: the calls the reply made, whether every call's arguments parsed as a JSON object,
    the arrival of the first chunk carrying a call (time to first tool-call token), the chunks
    that carried calls, and the arguments' tokens (client tokenizer, when there is one). None:
    no tools offered."""

    tool_calls: int | None = None
    tool_args_parsed: bool | None = None
    first_tool_call_s: float | None = None
    tool_call_chunks: int = 0
    tool_args_tokens: int | None = None


@dataclass(slots=True)
class JoinKey:
    """server spans: the join key the request carried (spans/keys.py): its W3C traceparent header
    and its X-Request-Id (the trace id); a server's span for the request has the same trace id."""

    traceparent: str | None = None
    x_request_id: str | None = None


@dataclass(slots=True)
class HttpPhases:
    """server spans: the HTTP phases as the client saw them, on the run's clock (each attempt has
    its own; the record keeps the last attempt's): http_start_s the client asked to send;
    pool_wait_s seconds waited for a connection from the pool (0: none waited); conn_reused a
    kept-alive connection was handed out, else connect_s the seconds a new connection took to
    open; headers_sent_s the request's headers written; the record's sent_s its body;
    response_headers_s the response's headers received (time to first byte); first_body_s the first
    read of the body (content or not); the record's chunk_times_s[0] the first content chunk. None:
    the request never got that far (no phases: it was never sent)."""

    http_start_s: float | None = None
    pool_wait_s: float | None = None
    conn_reused: bool | None = None
    connect_s: float | None = None
    headers_sent_s: float | None = None
    response_headers_s: float | None = None
    first_body_s: float | None = None


@dataclass(slots=True)
class Speculation:
    """speculative decoding: what the server said of one request's verify steps (clients/
    server_report.py reads each engine's fields; names here, the engine's in the docstring there).
    ``spec_steps``: verify steps (each proposes drafts and keeps the accepted ones plus one token
    of its own: the bonus); ``spec_draft_tokens`` proposed in all, ``spec_accepted_tokens`` of them
    accepted (draft only, no bonus); ``spec_acceptance_length`` the server's mean tokens a step,
    bonus included (1 + accepted / steps); ``spec_acceptance_rate`` accepted / drafted;
    ``spec_tokens`` the configured draft length (the most a step proposes);
    ``spec_accepted_histogram`` steps by accepted count (index j: steps that accepted exactly j;
    vLLM's dense histogram); ``spec_step_accepted`` / ``spec_step_drafted`` each step's, in order
    (vLLM's ``detailed`` level); ``spec_from`` the engine shape read. None: the server said
    nothing of speculation for it."""

    spec_steps: int | None = None
    spec_draft_tokens: int | None = None
    spec_accepted_tokens: int | None = None
    spec_acceptance_length: float | None = None
    spec_acceptance_rate: float | None = None
    spec_tokens: int | None = None
    spec_accepted_histogram: tuple[int, ...] | None = None
    spec_step_accepted: tuple[int, ...] | None = None
    spec_step_drafted: tuple[int, ...] | None = None
    spec_from: str | None = None

    def __post_init__(self) -> None:
        for name in ("spec_accepted_histogram", "spec_step_accepted", "spec_step_drafted"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):  # a line's list
                setattr(self, name, tuple(value))

    def by_position(self) -> tuple[list[int], list[int] | None] | None:
        """Draft position i (0-based) accepted how often, and drafted how often (None: not known):
        from the steps in order when given (exact), else from the histogram (a step that accepted
        j accepted positions 0..j-1), its drafts by position known only when every step proposed
        ``spec_tokens`` (an n-gram step may propose fewer). None: neither given."""
        if self.spec_step_accepted is not None and self.spec_step_drafted is not None:
            k = max(self.spec_step_drafted, default=0)
            accepted, drafted = [0] * k, [0] * k
            for a, d in zip(self.spec_step_accepted, self.spec_step_drafted, strict=False):
                for i in range(min(a, k)):
                    accepted[i] += 1
                for i in range(d):
                    drafted[i] += 1
            return accepted, drafted
        hist = self.spec_accepted_histogram
        if hist is None:
            return None
        k = len(hist) - 1
        accepted = [sum(hist[i + 1 :]) for i in range(k)]
        steps = sum(hist)
        full = self.spec_tokens is not None and self.spec_draft_tokens == steps * self.spec_tokens
        return accepted, ([steps] * k if full else None)


@dataclass(slots=True)
class ServerTiming:
    """The server's own timing of one request, from its response (clients/server_report.py: vLLM's
    ``metrics`` object, llama.cpp's ``timings``, ...), in seconds: ``reported_queue_s`` waiting to be
    scheduled; ``reported_prefill_s`` from scheduled to the first token; ``reported_ttft_s`` from the
    engine taking the request (vLLM: into its queue, after the API server's tokenizing; llama.cpp: a
    slot starting it) to the first token; ``reported_decode_s`` from the first token to the last;
    ``reported_itl_s`` the mean gap between tokens after the first; ``reported_timing_from`` the engine
    shape read. None: the server did not say (a field it does not time stays None, never 0)."""

    reported_queue_s: float | None = None
    reported_prefill_s: float | None = None
    reported_ttft_s: float | None = None
    reported_decode_s: float | None = None
    reported_itl_s: float | None = None
    reported_timing_from: str | None = None


@dataclass(slots=True)
class Served:
    """The replica of a fleet that served one request, where the stack made it knowable:
    ``replica`` its host:port (a router's or proxy's response header, ``TargetConfig.replica_header``)
    or the ``service.instance.id`` of its span's resource (the span join); ``replica_from`` which
    ("header", "span"). None: one server, or a fleet that does not say (per-replica totals then come
    from the replicas' own counters, results.FleetStats)."""

    replica: str | None = None
    replica_from: str | None = None


_PART = "part"  # a RequestRecord field's metadata key: the part's class


def _part(kind: type) -> Any:
    """A RequestRecord field holding a part of class ``kind`` (None: its concept does not apply)."""
    return field(default=None, metadata={_PART: kind})


@dataclass(slots=True)
class RequestRecord:
    """What happened to one request. ``chunk_times_s`` holds the arrival of every content chunk,
    as an ``array('d')`` (a sequence of chunk times given to the constructor, e.g. a list, is
    converted to one). Its parts (Group, HttpPhases, ...) are declared in line order."""

    point: int
    id: int
    scheduled_s: float
    sent_s: float | None = None
    chunk_times_s: array[float] | ChunkEnds = field(default_factory=_no_chunks)
    end_s: float | None = None  # last content chunk
    closed_s: float | None = None  # stream ended (or failed)
    outcome: Outcome = Outcome.CANCELLED
    status: int | None = None
    error: str | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    output_tokens_source: TokenSource | None = None
    server_output_tokens: int | None = None
    client_output_tokens: int | None = None
    user: int | None = None
    response_id: str | None = None  # the server's id for the reply, to match server logs
    # re-sends (at most clients.stream.MAX_RESENDS) after a reused keep-alive connection was
    # found dead before any response byte; sent_s is the last attempt's
    retries: int = 0
    # The server's own per-request timing fields, verbatim by its names and units (Ollama's
    # eval_count / eval_duration ns / prompt_eval_duration ns, llama.cpp's "timings"). Raw facts.
    server_timings: dict[str, float] | None = None
    finish_reason: str | None = None  # the server's, verbatim (OpenAI, TGI, Triton, Ollama done_reason)
    # The stream carried its protocol's end marker ([DONE] or a finish reason, TGI's details,
    # Ollama's done, Triton's finish). False on an ok record: the server (or a proxy) closed the
    # stream cleanly without saying the reply was complete; counted apart in results.
    end_marker: bool = False
    dataset_prompt_tokens: int | None = None  # Request.expected_prompt_tokens of what was sent
    trace_row: int | None = None  # Request.trace_row: the trace file's line this request replays
    reasoning: Reasoning | None = _part(Reasoning)
    session: SessionTurn | None = _part(SessionTurn)  # Request.session
    # Prompt tokens the server served from its prefix cache: usage.prompt_tokens_details.
    # cached_tokens, else llama.cpp's timings.cache_n. None: the server did not say.
    cached_prompt_tokens: int | None = None
    # The output tokens each content chunk carried, one per chunk, from the server's cumulative
    # usage on every chunk (stream_options.continuous_usage_stats: vLLM, SGLang): chunk i's is
    # the cumulative completion_tokens on it less that on the chunk before (tokens counted
    # between two chunks without content go to the next one; an EOS after the last, to none).
    # None: not asked for, or some chunk came without a count. An array('I') (4 bytes a chunk);
    # records.jsonl keeps a JSON list. first_chunk_tokens: the first chunk's, kept when the chunk
    # times are dropped (ChunkEnds), and when only the first chunk carried a count.
    chunk_tokens: array[int] | None = None
    first_chunk_tokens: int | None = None
    worker: int | None = None  # the worker process or Ray actor that sent it (--workers); None: one process
    pooling: Pooling | None = _part(Pooling)
    image_input: ImageInput | None = _part(ImageInput)
    group: Group | None = _part(Group)  # Request.group
    output_check: OutputCheck | None = _part(OutputCheck)
    tool_use: ToolUse | None = _part(ToolUse)
    join_key: JoinKey | None = _part(JoinKey)
    phases: HttpPhases | None = _part(HttpPhases)  # the last attempt's
    program: ProgramCall | None = _part(ProgramCall)  # an agent program's call
    speculation: Speculation | None = _part(Speculation)  # speculative decoding, as the server said
    server_timing: ServerTiming | None = _part(ServerTiming)  # the server's own timing, from its response
    served: Served | None = _part(Served)  # the fleet's replica that served it
    grade: Grade | None = _part(Grade)  # a graded dataset's reply against its expected answer
    # Carried, not facts of the record: the reply's text (records.jsonl keeps it only with
    # --keep-text, as "output_text", and beside it "prompt_hash", Request.prompt_key: the
    # prompt's identity that pairs two runs' replies; a session's next turn sends it back as history) and a
    # multi-turn turn's tool calls as the assistant message's tool_calls (loadgen/sessions.py; never
    # written). Read and set as ``output_text`` and ``tool_messages``; the "_" keeps them off
    # the line (to_line, to_json).
    _output_text: str | None = None
    _prompt_hash: str | None = None
    _tool_messages: tuple[dict[str, object], ...] | None = None

    @property
    def output_text(self) -> str | None:
        return self._output_text

    @output_text.setter
    def output_text(self, text: str | None) -> None:
        self._output_text = text

    @property
    def prompt_hash(self) -> str | None:
        return self._prompt_hash

    @prompt_hash.setter
    def prompt_hash(self, key: str | None) -> None:
        self._prompt_hash = key

    @property
    def tool_messages(self) -> tuple[dict[str, object], ...] | None:
        return self._tool_messages

    @tool_messages.setter
    def tool_messages(self, messages: tuple[dict[str, object], ...] | None) -> None:
        self._tool_messages = messages

    def __post_init__(self) -> None:
        times = self.chunk_times_s
        if not isinstance(times, ChunkEnds) and (type(times) is not array or times.typecode != "d"):
            self.chunk_times_s = array("d", times)
        counts = self.chunk_tokens
        if counts is not None and (type(counts) is not array or counts.typecode != "I"):
            self.chunk_tokens = array("I", counts)

    def without_chunks(self) -> RequestRecord:
        """A copy for a point's summary once its chunks are tallied: chunk times as ChunkEnds,
        no per-chunk token counts, and no text or server timings (nothing a summary reads)."""
        return replace(
            self,
            chunk_times_s=ChunkEnds(self.chunk_times_s),
            chunk_tokens=None,
            _output_text=None,
            _prompt_hash=None,
            server_timings=self.server_timings if self.program is not None else None,  # a program's breakdown
            _tool_messages=None,
            response_id=None,
        )

    def chunk_times(self) -> array[float]:
        """Every chunk time: a record as sent or read back, not one whose chunks were dropped."""
        if isinstance(self.chunk_times_s, ChunkEnds):
            raise ValueError("a record whose chunk times were dropped (ChunkEnds) holds only the first and last")
        return self.chunk_times_s

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def ttft_s(self) -> float | None:
        if not self.chunk_times_s or self.sent_s is None:
            return None
        return self.chunk_times_s[0] - self.sent_s

    @property
    def ttfo_s(self) -> float | None:
        """Time to first output: the first chunk that is not reasoning content, from sent. Equals
        TTFT when nothing was reasoning; None when the reply was all reasoning (or empty)."""
        first = self.reasoning.first_output_s if self.reasoning is not None else None
        if first is None or self.sent_s is None:
            return None
        return first - self.sent_s

    @property
    def ttftc_s(self) -> float | None:
        """Time to the first tool-call token: the first chunk carrying a call, from sent."""
        first = self.tool_use.first_tool_call_s if self.tool_use is not None else None
        if first is None or self.sent_s is None:
            return None
        return first - self.sent_s

    @property
    def ttft_outside_server_s(self) -> float | None:
        """The client's TTFT less the server's own (ServerTiming.reported_ttft_s): the time outside
        the engine's clock (the network, HTTP, the API server's tokenizing and hand-off, delivery)."""
        server = self.server_timing.reported_ttft_s if self.server_timing is not None else None
        ttft = self.ttft_s
        return ttft - server if ttft is not None and server is not None else None

    @property
    def e2e_s(self) -> float | None:
        if self.end_s is None or self.sent_s is None:
            return None
        return self.end_s - self.sent_s

    @property
    def queue_s(self) -> float | None:
        if self.sent_s is None:
            return None
        return self.sent_s - self.scheduled_s

    @property
    def wait_s(self) -> float | None:
        """Queue delay, or for a request never sent its wait until the point gave up on it: a
        lower bound of the delay it would have had (leaving it out is coordinated omission)."""
        if self.sent_s is not None:
            return self.sent_s - self.scheduled_s
        if self.outcome is Outcome.NOT_SENT and self.closed_s is not None:
            return self.closed_s - self.scheduled_s
        return None

    @property
    def eos_unstreamed(self) -> bool:
        """The server's token count includes an end-of-sequence token that was never streamed:
        the reply ended on EOS and the count is the server's."""
        return (
            self.finish_reason in EOS_REASONS
            and self.output_tokens_source is TokenSource.SERVER
            and self.output_tokens is not None
            and self.output_tokens > len(self.chunk_times_s)
        )

    @property
    def streamed_tokens(self) -> int | None:
        """Output tokens that arrived as content: ``output_tokens`` less an EOS the server counted
        but never streamed (the rule: a reply ended on EOS with a server count > its chunks)."""
        if self.output_tokens is None:
            return None
        return self.output_tokens - 1 if self.eos_unstreamed else self.output_tokens

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (streamed_tokens - 1): the mean gap between streamed tokens after the
        first. Undefined (None) below 2 streamed tokens, and when the content arrived at a
        single instant (one chunk or one read): there is no decode time to divide, not 0."""
        n = self.streamed_tokens
        times = self.chunk_times_s
        if n is None or n < 2 or len(times) < 2 or times[-1] == times[0]:
            return None
        ttft, e2e = self.ttft_s, self.e2e_s
        if ttft is None or e2e is None:
            return None
        return (e2e - ttft) / (n - 1)

    def to_line(self) -> bytes:
        """This record's records.jsonl line, newline included, without its text: the same keys
        and values as ``to_json()``, its parts' fields flat in their places. orjson writes the dict
        _line_fields fills (2.4 µs a 4-token record, where orjson reading the flat record's 59
        fields straight from its slots took 3.3: docs/measurement.md)."""
        if type(self.chunk_times_s) is not array:
            raise ValueError("a record whose chunk times were dropped (ChunkEnds) cannot be written")
        return orjson.dumps(_line_fields(self), default=_json_array, option=orjson.OPT_APPEND_NEWLINE)

    def to_json(self, keep_text: bool = False) -> dict[str, Any]:  # a records.jsonl line: field -> JSON value
        # Not dataclasses.asdict: it deep-copies every chunk list (measured ~3% of client CPU at
        # 256 streams with py-spy)
        if isinstance(self.chunk_times_s, ChunkEnds):
            raise ValueError("a record whose chunk times were dropped (ChunkEnds) cannot be written")
        data = _json_fields(self)
        data["chunk_times_s"] = self.chunk_times_s.tolist()  # JSON: a list of floats, same values
        counts = self.chunk_tokens  # (a list when one was given after construction)
        data["chunk_tokens"] = (
            (counts.tolist() if type(counts) is array else list(counts)) if counts is not None else None
        )
        # _value_: the member's value without the enum property's Python-level __get__ (two a record)
        data["outcome"] = self.outcome._value_
        source = self.output_tokens_source
        data["output_tokens_source"] = source._value_ if source else None
        if keep_text:
            data["output_text"] = self._output_text
            data["prompt_hash"] = self._prompt_hash
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RequestRecord:  # a records.jsonl line, any version's fields
        data = dict(data)
        data["outcome"] = Outcome(data["outcome"])
        if "end_marker" not in data:  # records written before the field existed
            data["end_marker"] = data["outcome"] is Outcome.OK
        src = data.get("output_tokens_source")
        data["output_tokens_source"] = TokenSource(src) if src else None
        if "output_text" in data:  # a --keep-text line
            data["_output_text"] = data.pop("output_text")
        if "prompt_hash" in data:  # a --keep-text line since prompts were keyed
            data["_prompt_hash"] = data.pop("prompt_hash")
        parts = {}
        for name, kind, keys, absent in _LINE_PARTS:  # a part whose keys all hold its defaults is absent
            values = [data.pop(key, default) for key, default in zip(keys, absent)]
            if values != absent:
                parts[name] = kind(*values)
        if not data.keys() <= _OWN_KEYS:  # fields of another version: dropped
            data = {k: v for k, v in data.items() if k in _OWN_KEYS}
        return cls(**data, **parts)  # chunk_times_s: a list, held as an array (__post_init__)


def _flat_fields(line: bool) -> Callable[[RequestRecord], dict[str, Any]]:
    """A function that reads a record's line into a dict, key by key in line order: its own fields
    (every one whose name does not start with "_") and in each part's place the part's fields, or
    for an absent part its fields' defaults (for ``line``, to orjson, one ``orjson.Fragment`` under
    its first key: the defaults already JSON). Made once from the declarations, as dataclasses makes
    ``__init__``: one statement a key, 1.2 µs a typical record, where ``dict(zip(keys, values))``
    alone, the values already read, took 1.6 and a comprehension of getattr 2.5."""
    code = ["def read(record):", "    d = {}"]
    absent: dict[str, Any] = {}
    for f in fields(RequestRecord):
        if f.name.startswith("_"):
            continue
        kind = f.metadata.get(_PART)
        if kind is None:
            code.append(f"    d[{f.name!r}] = record.{f.name}")
            continue
        defaults = {k.name: k.default for k in fields(kind)}
        first = next(iter(defaults))
        code += [f"    part = record.{f.name}", "    if part is None:"]
        if line:
            written, key = orjson.dumps(defaults), b"{" + orjson.dumps(first) + b":"
            absent[f.name] = orjson.Fragment(written[len(key) : -1])  # what follows the first key
            code.append(f"        d[{first!r}] = absent[{f.name!r}]")
        else:
            absent[f.name] = defaults
            code.append(f"        d.update(absent[{f.name!r}])")
        code += ["    else:", *(f"        d[{k!r}] = part.{k}" for k in defaults)]
    code.append("    return d")
    env: dict[str, Any] = {"absent": absent}
    exec("\n".join(code), env)
    read: Callable[[RequestRecord], dict[str, Any]] = env["read"]
    return read


_perf_counter = time.perf_counter  # RunClock.now, ~10 a request: a global, not a module's attribute
_line_fields = _flat_fields(line=True)  # to_line's
_json_fields = _flat_fields(line=False)  # to_json's
# from_json's: each part's field on the record, its class, its keys on the line and their defaults
_LINE_PARTS = tuple(
    (f.name, kind, [k.name for k in fields(kind)], [k.default for k in fields(kind)])
    for f in fields(RequestRecord)
    if (kind := f.metadata.get(_PART)) is not None
)
_OWN_KEYS = frozenset(
    f.name for f in fields(RequestRecord) if _PART not in f.metadata and not f.name.startswith("_")
) | {"_output_text", "_prompt_hash"}


def _json_array(value: object) -> list[float] | list[int]:
    """orjson's ``default`` for a record's arrays (chunk times, per-chunk tokens): a JSON list."""
    if type(value) is array:
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


@dataclass(frozen=True, slots=True)
class RunClock:
    """The run's one clock: monotonic seconds since ``origin`` plus the wall time of the origin."""

    origin_monotonic_s: float
    origin_unix_s: float

    @classmethod
    def start(cls) -> RunClock:
        return cls(time.perf_counter(), time.time())

    def now(self) -> float:
        return _perf_counter() - self.origin_monotonic_s
