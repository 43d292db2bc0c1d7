"""What a protocol is: a ``Wire`` (URL, JSON body, framing) and the ``Stream`` it reads, one
decoded payload at a time, saying whether it carried content; and the two framings (SSE, newline-
delimited JSON). clients/stream.py sends and times; a protocol module (openai.py, tgi.py,
triton.py, ollama.py) is one Wire and one Stream subclass.
"""

from __future__ import annotations

from array import array
from typing import Any, Literal, Protocol

from orjson import loads as _loads  # payloads are parsed on the hot path

from tokenbench.clients.sse import SSEDecoder
from tokenbench.config.target import ResolvedTarget
from tokenbench.records import ABORT_REASONS, Request

ERROR_BODY_CHARS = 500

Framing = Literal["sse", "ndjson", "json"]  # json: one whole body, no stream
# One decoded payload of a framing: bytes, or the bytearray a line was split from (never copied).
Payload = bytes | bytearray
# A JSON object as a server sent it: a true edge, any shape. Each Stream reads the fields its
# protocol defines and checks the type of each it uses.
JsonObject = dict[str, Any]
# A request's JSON body as a Wire builds it.
Body = dict[str, object]


class ToolCallParts:
    """One streamed tool call as its deltas arrive: its id, name and the pieces of its arguments."""

    __slots__ = ("id", "name", "arguments")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.arguments: list[str] = []

    def as_message(self) -> dict[str, object]:
        """The call as an assistant message's ``tool_calls`` entry (a conversation sends it back)."""
        return {
            "id": self.id or "call_0",
            "type": "function",
            "function": {"name": self.name or "", "arguments": "".join(self.arguments)},
        }


class Stream:
    """What one response stream said so far. Subclasses implement ``handle``."""

    # pooling APIs: False for an answer read whole (clients/embeddings.py): it has no
    # chunks, it is ok when ``done``, and its record ends when the body did
    chunked = True

    __slots__ = (
        "text",
        "done",
        "failed",
        "error",
        "prompt_tokens",
        "completion_tokens",
        "response_id",
        "http_error",
        "server_timings",
        "server_metrics",
        "sglext",
        "decoded_per_iter",
        "finish_reason",
        "reasoning_chunks",
        "first_output_chunk",
        "reasoning_tokens",
        "cached_prompt_tokens",
        "reasoning_at",
        "chunk_usage",
        "tool_calls",
        "tool_chunks",
        "first_tool_chunk",
    )

    def __init__(self) -> None:
        self.text: list[str] = []
        self.done = False  # the server said the reply is complete (its protocol's end marker)
        self.finish_reason: str | None = None
        self.failed = False
        self.error: str | None = None
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.response_id: str | None = None
        self.http_error: str | None = None
        self.server_timings: dict[str, float] | None = None
        # vLLM's per-request ``metrics`` object on the final usage chunk, SGLang's ``sglext`` on its
        # own choice-less chunk, and TensorRT-LLM's ``avg_decoded_tokens_per_iter`` on the finishing
        # choice, as sent (server_report.py reads them)
        self.server_metrics: JsonObject | None = None
        self.sglext: JsonObject | None = None
        self.decoded_per_iter: object = None
        # Reasoning content (a protocol that streams it apart: OpenAI chat, Ollama): the content
        # chunks that were reasoning, the index among all content chunks of the first that was
        # not (None until one arrives; stays None for a protocol that never counts reasoning,
        # where every chunk is output), and the server's reasoning token count.
        self.reasoning_chunks = 0
        self.first_output_chunk: int | None = None
        self.reasoning_tokens: int | None = None
        self.cached_prompt_tokens: int | None = None  # prompt tokens served from the prefix cache
        self.reasoning_at: list[int] = []  # which pieces of ``text`` were reasoning
        # With usage on every chunk asked for (TargetConfig.continuous_usage; StreamingClient sets
        # a list): the cumulative completion_tokens each content chunk carried, None for a chunk
        # without. None: not tracked (a protocol without per-chunk usage never appends).
        self.chunk_usage: list[int | None] | None = None
        # tool calls: the calls streamed so far by their index (OpenAI chat's
        # delta.tool_calls), the chunks that carried only a call's name or arguments, and the index
        # among all content chunks of the first that carried one (None: no call)
        self.tool_calls: dict[int, ToolCallParts] = {}
        self.tool_chunks = 0
        self.first_tool_chunk: int | None = None

    def reasoning(self, piece: str) -> bool:
        """A piece of reasoning content: a chunk (TTFT counts it), counted apart from the answer."""
        self.reasoning_chunks += 1
        self.reasoning_at.append(len(self.text))
        self.text.append(piece)
        return True

    def tool_delta(self, calls: object, with_content: bool) -> bool:
        """A delta's ``tool_calls``: True when one carried a name or arguments (output: a chunk).
        ``with_content``: the delta's content is counted as the chunk already."""
        got = False
        for call in calls if isinstance(calls, list) else ():
            if not isinstance(call, dict):
                continue
            index = call.get("index")
            fn = call.get("function")
            name, arguments = (fn.get("name"), fn.get("arguments")) if isinstance(fn, dict) else (None, None)
            got = self.tool_part(index if type(index) is int else 0, call.get("id"), name, arguments) or got
        if got:
            self.tool_chunk(with_content)
        return got

    def tool_part(self, index: int, call_id: object, name: object, arguments: object) -> bool:
        """One piece of the call at ``index`` (its id, its name, a piece of its arguments, any of
        them absent, as each protocol streams them): True when it carried a name or arguments."""
        parts = self.tool_calls.setdefault(index, ToolCallParts())
        if isinstance(call_id, str):
            parts.id = call_id
        got = False
        if isinstance(name, str) and name:
            parts.name = name
            got = True
        if isinstance(arguments, str) and arguments:
            parts.arguments.append(arguments)
            got = True
        return got

    def tool_chunk(self, with_content: bool = False) -> None:
        """A chunk carried a tool call's name or arguments: the first such is the first tool chunk;
        one without content of its own is counted as a tool chunk."""
        if self.first_tool_chunk is None:
            self.first_tool_chunk = len(self.text) + self.tool_chunks
        if not with_content:
            self.tool_chunks += 1

    def tool_output(self, got: bool) -> bool:
        """A tool call's name or a piece of its arguments on its own event (a typed stream's): output,
        a chunk; every chunk before the first output was reasoning."""
        if not got:
            return False
        self.tool_chunk()
        if self.first_output_chunk is None:
            self.first_output_chunk = self.reasoning_chunks
        return True

    def output(self, piece: str) -> bool:
        """A piece of the answer: a chunk; the first marks where the output began (every chunk
        before it was reasoning)."""
        if self.first_output_chunk is None:
            self.first_output_chunk = self.reasoning_chunks
        self.text.append(piece)
        return True

    def answer_text(self) -> str:
        """The reply without its reasoning: what a conversation sends back as the assistant's turn."""
        if not self.reasoning_at:
            return "".join(self.text)
        skip = set(self.reasoning_at)
        return "".join(p for i, p in enumerate(self.text) if i not in skip)

    def first_output_index(self, num_chunks: int) -> int | None:
        """Which of the ``num_chunks`` content chunks was the first that was not reasoning."""
        if self.first_output_chunk is not None:
            return self.first_output_chunk
        if self.reasoning_chunks == 0 and num_chunks > 0:
            return 0  # nothing was reasoning: the first chunk is output
        return None  # all reasoning (or no chunk): no output yet

    def chunk_tokens(self) -> tuple[array[int] | None, int | None]:
        """Each content chunk's tokens (the cumulative count's step from the chunk before; the
        first chunk's from 0) and the first chunk's. None where a chunk carried no count; both
        None when the count went back (not cumulative: nothing to trust)."""
        usage = self.chunk_usage
        if not usage:
            return None, None
        totals = [t for t in usage if t is not None]
        if len(totals) < len(usage):
            return None, usage[0]
        steps = array("I")
        before = 0
        for total in totals:
            if total < before:
                return None, None
            steps.append(total - before)
            before = total
        return steps, totals[0]

    def fail(self, message: str) -> bool:
        if not self.failed:
            self.failed = True
            self.error = message
        return False

    def handle(self, data: Payload) -> bool:
        """Read one payload; return True when it carried content (a chunk to stamp)."""
        raise NotImplementedError

    def for_request(self, request: Request) -> None:
        """What the answer to ``request`` must hold (a pooling answer: one result per input)."""

    def finish(self, reason: object) -> None:
        """The server's finish reason: the reply is complete, or the engine aborted it (vLLM and
        SGLang end an aborted request with HTTP 200, finish_reason "abort" and [DONE]): then
        the stream fails, whatever content came before. SGLang may send {"type": "abort", ...}."""
        if isinstance(reason, dict):
            reason = reason.get("type")
        if reason in (None, "", "None"):
            return
        self.done = True
        self.finish_reason = str(reason)
        if self.finish_reason in ABORT_REASONS:
            self.fail(f"the engine ended the request: finish_reason {self.finish_reason!r}")

    def json_object(self, data: Payload, unit: str = "event") -> JsonObject | None:
        """The payload as a JSON object, or None after failing the stream with the reason: not
        JSON, not an object, or the server's ``{"error": ...}`` (with ``error_type`` if given)."""
        try:
            obj = _loads(data)
        except ValueError:
            self.fail(f"malformed {unit} (not JSON): {data[:200]!r}")
            return None
        if not isinstance(obj, dict):
            self.fail(f"malformed {unit} (not an object): {data[:200]!r}")
            return None
        if "error" in obj:
            kind = obj.get("error_type")
            message = str(obj["error"])[:ERROR_BODY_CHARS]
            self.fail(f"error {unit} ({kind}): {message}" if kind else f"error {unit}: {message}")
            return None
        return obj


class Wire(Protocol):
    """One protocol's side of a request (see clients/openai.py, tgi.py, triton.py, ollama.py)."""

    framing: Framing
    probe_path: str  # GET before any load: must answer 200

    def url(self, target: ResolvedTarget) -> str: ...

    def payload(self, request: Request, target: ResolvedTarget) -> Body: ...

    def new_stream(self) -> Stream: ...

    def model_ids(self, probe_json: object) -> list[str]:
        """Model names found in the probe's answer (may be empty)."""
        ...


class LineDecoder:
    """Newline-delimited JSON framing (Ollama): one payload per non-empty line, any size."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed_data(self, data: bytes) -> list[Payload]:
        self._buf += data
        if b"\n" not in data:
            return []
        *lines, rest = self._buf.split(b"\n")
        self._buf = bytearray(rest)
        return [line.rstrip(b"\r") for line in lines if line.strip()]

    def close_data(self) -> list[Payload]:
        tail, self._buf = bytes(self._buf).strip(), bytearray()
        return [tail] if tail else []


class WholeBody:
    """No framing (a pooling API's one JSON answer, embeddings): the body as one payload
    once it has all arrived."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed_data(self, data: bytes) -> list[Payload]:
        self._buf += data
        return []

    def close_data(self) -> list[Payload]:
        body, self._buf = self._buf, bytearray()
        return [body] if body.strip() else []


class SSEPayloads(SSEDecoder):
    """SSEDecoder seen as a stream of ``data`` payloads, the shape the client loop reads
    (``feed_data``: SSEDecoder's own, with its fast path for whole ``data:`` events)."""

    __slots__ = ()

    def close_data(self) -> list[Payload]:
        return [e.data for e in self.close()]
