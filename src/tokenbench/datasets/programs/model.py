"""Agent programs, format-neutral: a session is a graph of dependent LLM calls.

Every public agent-trace format (Weka kv-cache-tester, AIPerf's DAG JSONL and Graph IR, TraceLab
rounds, inference-perf's OTel GenAI spans, Dynamo's agentic rows) is read into this one model
(datasets/programs/*.py, one reader a format) and replayed by loadgen/programs.py.

- A **Program** is one recorded session: its calls in an order where every parent comes before
  its children, and when it started on the trace's own clock (seconds from the file's first
  session; 0 for a file of one session).
- A **Call** waits on its parents (``Edge``): each edge holds when the parent's *anchor* (its end,
  its start, or its first token) plus the edge's delay has passed; the call is ready when every
  edge holds, and no sooner than ``not_before_s`` after its session started. The delay is the
  recorded gap (think time, a tool's run); ``tool_s`` says how much of it was a tool's, so the
  results can split tool from think time.
- A call's **prompt** is an ordered list of segments: static messages (``Message``), tokens made
  of hash blocks (``Blocks``: the same id is the same text within the block's scope, so a prefix
  cache sees what the trace's cache saw), a parent's live reply (``Output``: substituted when the
  parent ends; the recorded reply instead with ``--program-output recorded``), and a parent's own
  prompt reused as this one's prefix (``PromptOf``).

Times are seconds; token counts are the recording's (``Blocks.tokens``), or a text's count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tokenbench.errors import BadInput

# What a child waits on of its parent: its reply's end (the default of every format), the moment
# it was sent (AIPerf's ``delay_after_predecessor_start``, Dynamo's ``dispatch`` trigger, a Weka
# subagent spawned while its parent's call ran) or its first token.
Anchor = Literal["end", "start", "first_token"]
ANCHORS: tuple[Anchor, ...] = ("end", "start", "first_token")

# What a call is in its program, for per-call metrics: the session's first calls (no parent), a
# sub-agent's calls, a call that follows a tool's result, or one that follows its parent otherwise.
Role = Literal["root", "subagent", "after_tool", "follow_up"]
ROLES: tuple[Role, ...] = ("root", "subagent", "after_tool", "follow_up")


@dataclass(frozen=True, slots=True)
class Edge:
    parent: str  # the parent call's id
    anchor: Anchor = "end"
    delay_s: float = 0.0  # after the anchor: think time and tool time together
    tool_s: float = 0.0  # the part of delay_s a tool ran (<= delay_s)

    def __post_init__(self) -> None:
        if self.delay_s < 0 or self.tool_s < 0:
            raise BadInput(f"an edge from {self.parent!r} has a negative delay ({self.delay_s}, tool {self.tool_s})")
        if self.anchor not in ANCHORS:
            raise BadInput(f"an edge from {self.parent!r} waits on {self.anchor!r}: one of {', '.join(ANCHORS)}")


@dataclass(frozen=True, slots=True)
class Message:
    """A static message: its role and text (a tool result, a user turn, a system prompt)."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class Blocks:
    """``tokens`` prompt tokens made of hash blocks: id ``h`` of ``scope`` is the same text
    wherever it appears (datasets.trace_prompts.BlockPrompts draws it), ``block_size`` tokens a
    block, the last one partial; ids past the last the tokens need are unused, and tokens past the
    last id's block are drawn from the last id's key. Sent as the text of a ``role`` message."""

    hash_ids: tuple[int, ...]
    tokens: int
    block_size: int
    scope: str = ""
    role: str = "user"


@dataclass(frozen=True, slots=True)
class Output:
    """The parent call ``call``'s reply, as an assistant message."""

    call: str


@dataclass(frozen=True, slots=True)
class PromptOf:
    """The parent call ``call``'s own prompt, its messages in order (a prefix this prompt reuses)."""

    call: str


Segment = Message | Blocks | Output | PromptOf


@dataclass(frozen=True, slots=True)
class Recorded:
    """What the recording says of a call: its tokens, its time on the recorded server, its reply."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    api_s: float | None = None
    output_text: str | None = None


@dataclass(frozen=True, slots=True)
class Call:
    id: str
    prompt: tuple[Segment, ...]
    max_tokens: int
    parents: tuple[Edge, ...] = ()
    not_before_s: float = 0.0  # from the session's start
    role: Role = "root"
    depth: int = 0  # sub-agent nesting: 0 the session's own agent, 1 its sub-agents, ...
    model: str | None = None  # the recording's (sent only with --program-models)
    tools: tuple[dict[str, object], ...] = ()
    recorded: Recorded = field(default_factory=Recorded)


@dataclass(frozen=True, slots=True)
class Program:
    id: str
    calls: tuple[Call, ...]
    start_s: float = 0.0  # on the trace's own clock
    format: str = ""

    def __post_init__(self) -> None:
        check_graph(self.id, self.calls)

    def call(self, call_id: str) -> Call:
        for c in self.calls:
            if c.id == call_id:
                return c
        raise KeyError(call_id)


def check_graph(program: str, calls: Sequence[Call]) -> None:
    """Ids unique; every parent, output and reused prompt names an earlier call (so the order is
    topological and there is no cycle); a call's reply or prompt is used only by its children."""
    if not calls:
        raise BadInput(f"program {program!r} has no call")
    seen: set[str] = set()
    for c in calls:
        if c.id in seen:
            raise BadInput(f"program {program!r}: call id {c.id!r} appears twice")
        if c.max_tokens <= 0:
            raise BadInput(f"program {program!r}: call {c.id!r} asks for {c.max_tokens} tokens (needs >= 1)")
        parents = {e.parent for e in c.parents}
        for e in c.parents:
            if e.parent not in seen:
                raise BadInput(f"program {program!r}: call {c.id!r} waits on {e.parent!r}, not an earlier call")
        for s in c.prompt:
            if isinstance(s, Output | PromptOf) and s.call not in parents:
                raise BadInput(f"program {program!r}: call {c.id!r} uses {s.call!r}'s reply or prompt, not a parent's")
        seen.add(c.id)


def role_of(parents: Iterable[Edge], depth: int, after_tool: bool) -> Role:
    """A call's role: root without parents, else a sub-agent's, else after a tool's result, else a follow-up."""
    if not tuple(parents):
        return "root"
    if depth > 0:
        return "subagent"
    return "after_tool" if after_tool else "follow_up"


def critical_path_s(program: Program, call_s: dict[str, tuple[float, float, float]], time_scale: float = 1.0) -> float:
    """The program's length when each call takes ``call_s[id]`` = (to its start, to its first
    token, to its end), seconds from being sent (0 to its start on a perfect client), its recorded
    waits multiplied by ``time_scale``: the scheduled end of its last call, from the session's
    start. The known answer a replay is checked against."""
    start: dict[str, float] = {}
    ends: dict[str, tuple[float, float, float]] = {}
    for c in program.calls:
        ready = c.not_before_s * time_scale
        for e in c.parents:
            sent, first, end = ends[e.parent]
            at = {"start": sent, "first_token": first, "end": end}[e.anchor]
            ready = max(ready, at + e.delay_s * time_scale)
        start[c.id] = ready
        to_start, to_first, to_end = call_s[c.id]
        ends[c.id] = (ready + to_start, ready + to_first, ready + to_end)
    return max(end for _, _, end in ends.values())
