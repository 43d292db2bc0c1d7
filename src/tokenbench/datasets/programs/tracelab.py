"""TraceLab's coding-agent round trace (uw-syfi/TraceLab ``example_sessions/sanitized/round_trace.jsonl``
and the released dataset's JSONL: one LLM round a line, real Claude Code and Codex sessions), and
the prompts TraceLab's replay runner builds for rounds (``RoundPrompts``, which tracelab_csv.py
shares).

A line is a round: ``session_id``, ``round_index``, ``input_tokens_total`` (its prompt),
``prefix_tokens`` (of those, what the recorded server's cache held), ``newly_append_tokens`` (the
rest), ``output_tokens`` (reasoning included), ``model``, ``provider``, ``timing_events``
(``user_message`` and ``tool_result`` events are the round's input; ``reasoning``, ``text``,
``tool_call`` and ``usage_report`` its reply) and ``tools`` (the tool calls of its reply, each with
``tool_wall_latency_ms``). Read as:

- **Sessions.** Rounds are grouped by ``session_id`` (in the order first seen) and ordered by
  ``round_index`` (then by line). A session starts at its earliest event: ``start_s`` is seconds
  after the file's earliest session (the fixture's two sessions are 72 days apart).
- **Chain.** Each round waits on the end of the round before it. The delay is that round's tool
  time (``tool_s``): the sum of its tools' ``tool_wall_latency_ms``, nulls and negatives skipped,
  as TraceLab's CSV exporter computes ``tool_wait_after_ms`` (artifacts/trace_facts/csv_export/
  convert.py: a sum even where the tools ran side by side). When the round holds a person's
  message, the person's time is added: the ``user_message`` timestamp less the previous round's
  last reply event and its tool time (at least 0). A round whose input is tool results only
  follows a tool (``after_tool``); one with a person's message is a ``follow_up``.
- **Prompts** (a prefix cache must be offered the prefix the session had). ``prefix_tokens`` is the
  recorded server's cache hit, not how much of the previous prompt a round reuses: Claude's cache
  read lags a round behind its breakpoints (round 1 of the Claude session reads 29,380 tokens of a
  35,740-token prompt that holds all 33,203 of round 0's prompt and reply), and Codex's cache
  misses now and then (round 3 reads 3,456 of 10,152). So a round whose prompt is at least the
  previous round's prompt and reply is that prompt (``PromptOf``), that reply (``Output``), then
  the difference as new tokens. A round whose prompt shrank (a new Codex turn drops the last turn's
  reasoning; a compaction) is built as TraceLab's replay runner builds every round
  (replay/src/tokens.rs): the first ``prefix_tokens`` of the previous round's context, then
  ``newly_append_tokens`` new. A first round's ``prefix_tokens`` were cached by an earlier session
  (the harness's system prompt and tools): blocks every session of the ``provider`` shares.
- ``max_tokens`` is ``output_tokens``; ``api_s`` the time from the round's last input event to its
  last reply event.

The text has no hash ids: blocks get ids of their own, counted up within a session (scope: the
session id), so a prompt that starts with another's reuses its ids, and new text is new.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tokenbench.datasets.programs.model import Blocks, Call, Edge, Output, Program, PromptOf, Recorded, Segment, role_of
from tokenbench.errors import BadInput

FORMAT = "tracelab"
BLOCK_TOKENS = 64  # the synthetic blocks' size: any size gives the same text for the same prefix
INPUT_EVENTS = ("user_message", "tool_result")

Piece = Blocks | Output


def looks_like(obj: object) -> bool:
    return isinstance(obj, dict) and "session_id" in obj and "round_index" in obj and "input_tokens_total" in obj


# --- the runner's prompts ------------------------------------------------------------------------


def shared_blocks(scope: str, tokens: int, role: str = "system") -> Blocks:
    """``tokens`` of blocks numbered from 0 in ``scope``: the same text wherever they are used."""
    return Blocks(tuple(range(math.ceil(tokens / BLOCK_TOKENS))), tokens, BLOCK_TOKENS, scope, role)


@dataclass(frozen=True, slots=True)
class _Prompt:
    pieces: tuple[Piece, ...]  # blocks and whole replies, in order
    tokens: int
    out: int  # the recorded reply's tokens
    starts: tuple[tuple[int, str], ...]  # (pieces, call) of each prompt this one starts with, its own last


class RoundPrompts:
    """One session's prompts, built as TraceLab's replay runner builds them (replay/src/tokens.rs,
    ``PromptBuilder``): a round's prompt is the first ``prefix`` tokens of the previous round's
    context (that round's prompt, then its reply), new tokens for any of ``prefix`` the context
    lacks, then ``new`` new tokens. A prefix that ends inside a reply takes the whole reply (a reply
    is sent whole or not at all). Written as segments: the longest earlier prompt the pieces start
    with (``PromptOf``), then the rest."""

    def __init__(self, scope: str) -> None:
        self._scope = scope
        self._next_id = 0
        self._prompts: dict[str, _Prompt] = {}

    def context_tokens(self, call: str) -> int:
        """The tokens of ``call``'s prompt and recorded reply."""
        p = self._prompts[call]
        return p.tokens + p.out

    def build(
        self, call: str, prev: str | None, prefix: int, new: int, out: int, role: str, lead: tuple[Blocks, ...] = ()
    ) -> tuple[tuple[Segment, ...], tuple[str, ...]]:
        """``call``'s prompt (``lead`` first when it has no previous round) and the earlier calls
        whose prompt or reply it reuses."""
        pieces: tuple[Piece, ...]
        if prev is None:
            pieces, covered, kept = lead, sum(b.tokens for b in lead), 0
            starts: tuple[tuple[int, str], ...] = ()
        else:
            before = self._prompts[prev]
            pieces, covered, kept = self._head(before.pieces + (Output(prev),), prefix)
            starts = tuple(s for s in before.starts if s[0] <= kept)
        fresh = new + max(0, prefix - covered)
        if fresh > 0 or not pieces:
            fresh = max(1, fresh)
            pieces = pieces + (self._fresh(fresh, role),)
            covered += fresh
        self._prompts[call] = _Prompt(pieces, covered, out, starts + ((len(pieces), call),))
        rest: tuple[Piece, ...] = pieces
        segments: list[Segment] = []
        uses: list[str] = []
        if starts:
            n, reused = starts[-1]
            segments.append(PromptOf(reused))
            uses.append(reused)
            rest = pieces[n:]
        for piece in rest:
            segments.append(piece)
            if isinstance(piece, Output) and piece.call not in uses:
                uses.append(piece.call)
        return tuple(segments), tuple(uses)

    def _fresh(self, tokens: int, role: str) -> Blocks:
        n = math.ceil(tokens / BLOCK_TOKENS)
        first, self._next_id = self._next_id, self._next_id + n
        return Blocks(tuple(range(first, first + n)), tokens, BLOCK_TOKENS, self._scope, role)

    def _head(self, context: tuple[Piece, ...], limit: int) -> tuple[tuple[Piece, ...], int, int]:
        """The first ``limit`` tokens of ``context``: its pieces, their tokens, how many are whole."""
        taken: list[Piece] = []
        covered = kept = 0
        for piece in context:
            if covered >= limit:
                break
            n = self._prompts[piece.call].out if isinstance(piece, Output) else piece.tokens
            if covered + n <= limit or isinstance(piece, Output):
                taken.append(piece)
                kept += 1
                covered += n
            else:
                k = limit - covered
                taken.append(replace(piece, hash_ids=piece.hash_ids[: math.ceil(k / piece.block_size)], tokens=k))
                covered = limit
        return tuple(taken), covered, kept


# --- the round trace -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Round:
    line: int
    index: int
    input: int
    prefix: int
    out: int
    model: str | None
    provider: str
    first_s: float | None  # the round's earliest event (epoch seconds)
    sent_s: float | None  # its last input event
    end_s: float | None  # its last reply event
    user_s: float | None  # its last user_message
    tool_s: float  # its tools' summed wall latency
    after_tool: bool


def read(path: Path) -> list[Program]:
    """Every session in the file, in the order first seen."""
    sessions: dict[str, list[_Round]] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BadInput(f"{path}:{n}: not JSON ({exc.msg})") from None
            sid, r = _round(obj, f"{path}:{n}", n)
            sessions.setdefault(sid, []).append(r)
    firsts = [r.first_s for rounds in sessions.values() for r in rounds if r.first_s is not None]
    origin = min(firsts) if firsts else 0.0
    return [_session(sid, sorted(rounds, key=lambda r: (r.index, r.line)), origin) for sid, rounds in sessions.items()]


def _session(sid: str, rounds: list[_Round], origin: float) -> Program:
    prompts = RoundPrompts(sid)
    calls: list[Call] = []
    prev: _Round | None = None
    for i, r in enumerate(rounds):
        cid = str(i)
        parents: list[Edge] = []
        if prev is None:
            lead = (shared_blocks(f"tracelab:{r.provider}", r.prefix),) if r.prefix > 0 else ()
            prompt, uses = prompts.build(cid, None, r.prefix, r.input - r.prefix, r.out, "user", lead)
        else:
            pid = str(i - 1)
            whole = prompts.context_tokens(pid)
            prefix = whole if r.input >= whole else min(r.prefix, r.input)
            role = "tool" if r.after_tool else "user"
            prompt, uses = prompts.build(cid, pid, prefix, r.input - prefix, r.out, role)
            person = 0.0
            if r.user_s is not None and prev.end_s is not None:
                person = max(0.0, r.user_s - prev.end_s - prev.tool_s)
            parents.append(Edge(pid, "end", prev.tool_s + person, prev.tool_s))
            parents += [Edge(u) for u in sorted(set(uses) - {pid}, key=int)]
        api = r.end_s - r.sent_s if r.end_s is not None and r.sent_s is not None else None
        calls.append(
            Call(
                id=cid,
                prompt=prompt,
                max_tokens=max(1, r.out),
                parents=tuple(parents),
                role=role_of(parents, 0, r.after_tool),
                model=r.model,
                recorded=Recorded(input_tokens=r.input, output_tokens=r.out, api_s=api),
            )
        )
        prev = r
    firsts = [r.first_s for r in rounds if r.first_s is not None]
    return Program(sid, tuple(calls), min(firsts) - origin if firsts else 0.0, FORMAT)


def _round(obj: Any, where: str, line: int) -> tuple[str, _Round]:
    if not isinstance(obj, dict):
        raise BadInput(f"{where}: not a TraceLab round (a JSON object)")
    sid = obj.get("session_id")
    if not isinstance(sid, str) or not sid:
        raise BadInput(f"{where}: no session_id")
    total = _count(obj, "input_tokens_total", where)
    prefix = _count(obj, "prefix_tokens", where, 0)
    events = obj.get("timing_events") or []
    if not isinstance(events, list):
        raise BadInput(f"{where}: timing_events is not a list")
    inputs: list[float] = []
    replies: list[float] = []
    users: list[float] = []
    kinds: set[str] = set()
    for e in events:
        if not isinstance(e, dict) or e.get("timestamp") is None:
            continue
        t = _time(e["timestamp"], where)
        kind = str(e.get("event_type"))
        kinds.add(kind)
        (inputs if kind in INPUT_EVENTS else replies).append(t)
        if kind == "user_message":
            users.append(t)
    person = "user_message" in kinds or bool(obj.get("current_user_message_count"))
    tool = "tool_result" in kinds or bool(obj.get("current_tool_result_count"))
    every = inputs + replies
    return sid, _Round(
        line=line,
        index=_count(obj, "round_index", where, line),  # none: file order, as the exporter sorts
        input=total,
        prefix=min(prefix, total),
        out=_count(obj, "output_tokens", where),
        model=obj.get("model") if isinstance(obj.get("model"), str) else None,
        provider=str(obj.get("provider") or sid.split(":", 1)[0]),
        first_s=min(every) if every else None,
        sent_s=max(inputs) if inputs else (min(every) if every else None),
        end_s=max(replies) if replies else None,
        user_s=max(users) if users else None,
        tool_s=_tool_s(obj.get("tools"), where),
        after_tool=tool and not person,
    )


def _count(obj: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = obj.get(key)
    if value is None:
        if default is None:
            raise BadInput(f"{where}: no {key}")
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise BadInput(f"{where}: {key} is {value!r}, not a count")
    return int(value)


def _tool_s(tools: Any, where: str) -> float:
    """The tools' summed ``tool_wall_latency_ms``, in seconds (as csv_export/convert.py sums them)."""
    if tools is None:
        return 0.0
    if not isinstance(tools, list):
        raise BadInput(f"{where}: tools is not a list")
    total = 0.0
    for tool in tools:
        ms = tool.get("tool_wall_latency_ms") if isinstance(tool, dict) else None
        if isinstance(ms, int | float) and not isinstance(ms, bool) and math.isfinite(ms) and ms >= 0:
            total += ms
    return total / 1000.0


def _time(value: Any, where: str) -> float:
    try:
        t = datetime.fromisoformat(str(value))
    except ValueError:
        raise BadInput(f"{where}: timestamp {value!r} is not an ISO-8601 time") from None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()
