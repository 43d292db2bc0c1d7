"""AIPerf's DAG JSONL (``--custom-dataset-type dag_jsonl`` / ``--graph-format dag_jsonl``): one
conversation a line, conversations joined by forks and spawns.

A line is ``{"session_id", "turns": [...], "pre_session_spawns"?, "context_mode"?}``; a turn is
``{"messages", "model"?, "max_tokens"?, "tools"?, "extra"?, "delay"? (ms), "forks"?, "spawns"?}``.
Read as AIPerf's own graph adapter expands it (``src/aiperf/dataset/graph/adapters/dag_jsonl/
tree.py`` and ``lowering.py``, over the loader ``src/aiperf/dataset/loader/dag_jsonl.py`` and its
schema ``dag_jsonl_models.py``, at ai-dynamo/aiperf 58028d5):

- **Programs.** A conversation no fork or spawn names is a root; each root is one program, holding
  every conversation reachable from it. A turn is a call ``<instance>:<turn index>``; a child
  spawned again is a fresh instance (``kid``, then ``kid#2``), a forked child appears once.
- **Chain.** Turn k waits on turn k-1 of its conversation, on its end, after the turn's ``delay``
  (ms). A conversation's first turn has no delay of its own: a root's turn 0 starts at once, a
  child's when its parent turn ends (AIPerf: "root turn-0 delay is NOT honored", children fire "at
  parent credit return").
- **Forks** (``forks: ["sid"]`` or ``{"child", "background"}``): the child's turn 0 waits on the
  forking turn's end and continues its conversation: its prompt is the forking turn's prompt
  (``PromptOf``), its live reply (``Output``), then the child's messages. A plain fork must be on
  the conversation's last turn (AIPerf rejects it elsewhere); ``background: true`` lets the parent
  go on, unjoined.
- **Spawns** (``spawns: ["sid"]`` or ``{"children": [...], "join_at": k}``): the child starts
  fresh when the spawning turn ends; the parent's turn ``join_at`` (default: the next turn; none
  when the spawn is on the last turn) also waits on the end of each child's last turn.
  ``pre_session_spawns`` children start with the conversation's turn 0 (on its parents, no
  prefix), never joined.
- **Prompts.** Turn k > 0 is ``PromptOf(turn k-1)``, ``Output(turn k-1)``, then its own messages
  (AIPerf's lineage: every earlier turn's messages and live replies); with ``context_mode:
  message_array_with_responses`` each turn sends only its own messages (AIPerf's loader: "NO
  accumulation of prior turns or live responses"). A message's text is its string content, or its
  text parts joined; other keys (``tool_calls``, ``tool_call_id``) are not kept.
- **The rest.** ``max_tokens`` as authored (AIPerf leaves it to the server when absent: here
  ``DEFAULT_MAX_TOKENS``); ``model`` as authored; ``tools`` the turn's own, else the nearest earlier
  turn's in its lineage (as AIPerf's ``_effective_tools``). A child conversation's calls are one
  level deeper than their parent's (a pre-session child's: depth 1) and have the role
  ``subagent``; a turn carrying a ``tool`` message follows a tool. ``extra`` (sampling settings)
  has no place in a call and is dropped; orchestrator conversations (request-free gate turns) are
  refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenbench.datasets.programs.model import Call, Edge, Message, Output, Program, PromptOf, Role, Segment, role_of
from tokenbench.errors import BadInput

FORMAT = "aiperf-dag"
DEFAULT_MAX_TOKENS = 128  # a turn without max_tokens (AIPerf sends none: the server's own cap)
ISOLATED = "message_array_with_responses"  # the context mode that sends each turn's messages alone


def looks_like(obj: object) -> bool:
    """A line ``{"session_id": str, "turns": [...]}`` whose turns carry messages (AIPerf's ``can_load``)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("session_id"), str):
        return False
    turns = obj.get("turns")
    return (
        isinstance(turns, list)
        and bool(turns)
        and all(isinstance(t, dict) for t in turns)
        and any(isinstance(t.get("messages"), list) or "forks" in t or "spawns" in t for t in turns)
    )


def message_text(content: object) -> str:
    """A chat message's text: its string content, or the text of its parts in order."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
        return "".join(parts)
    return json.dumps(content)


@dataclass
class _Turn:
    messages: tuple[Message, ...]
    max_tokens: int
    model: str | None
    tools: tuple[dict[str, object], ...] | None
    delay_s: float
    after_tool: bool
    forks: list[tuple[str, bool]]  # (child, background)
    spawns: list[tuple[list[str], int | None]]  # (children, join_at), as AIPerf groups them


@dataclass
class _Conversation:
    sid: str
    line: int
    turns: list[_Turn]
    isolated: bool
    pre_session: list[str] = field(default_factory=list)


def read(path: Path) -> list[Program]:
    """One program a root conversation, in the file's order."""
    convs: dict[str, _Conversation] = {}
    with open(path, encoding="utf-8-sig") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BadInput(f"{path}:{n}: not JSON ({exc.msg})") from None
            conv = _conversation(obj, f"{path}:{n}", n)
            if conv.sid in convs:
                raise BadInput(f"{path}:{n}: session_id {conv.sid!r} already on line {convs[conv.sid].line}")
            convs[conv.sid] = conv
    if not convs:
        raise BadInput(f"{path}: no conversation in it")
    _check_branches(convs, path)
    named = {c for conv in convs.values() for c in _children(conv)}
    return [_Tree(convs, path).program(conv) for conv in convs.values() if conv.sid not in named]


def _conversation(obj: Any, where: str, line: int) -> _Conversation:
    if not isinstance(obj, dict) or not isinstance(obj.get("session_id"), str) or not obj["session_id"]:
        raise BadInput(f"{where}: not a DAG conversation (needs an object with a session_id string)")
    sid = obj["session_id"]
    if obj.get("orchestrator"):
        raise BadInput(f"{where}: {sid!r} is an orchestrator conversation (request-free rounds): not read")
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns:
        raise BadInput(f"{where}: {sid!r} has no turns (needs a non-empty list)")
    pre = obj.get("pre_session_spawns") or []
    if not isinstance(pre, list) or not all(isinstance(c, str) for c in pre):
        raise BadInput(f"{where}: {sid!r}: pre_session_spawns must be a list of session ids")
    return _Conversation(
        sid,
        line,
        [_turn(t, f"{where}: {sid!r} turn {i}") for i, t in enumerate(turns)],
        obj.get("context_mode") == ISOLATED,
        list(pre),
    )


def _turn(t: Any, where: str) -> _Turn:
    if not isinstance(t, dict):
        raise BadInput(f"{where}: not an object")
    raw = t.get("messages")
    if not isinstance(raw, list) or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in raw):
        raise BadInput(f"{where}: messages must be a list of objects with a role")
    max_tokens = t.get("max_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise BadInput(f"{where}: max_tokens {max_tokens!r} (needs an integer >= 1)")
    delay = t.get("delay", 0.0)
    if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
        raise BadInput(f"{where}: delay {delay!r} (needs milliseconds >= 0)")
    tools = t.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(x, dict) for x in tools)):
        raise BadInput(f"{where}: tools must be a list of objects")
    model = t.get("model")
    return _Turn(
        messages=tuple(Message(m["role"], message_text(m.get("content"))) for m in raw),
        max_tokens=max_tokens or DEFAULT_MAX_TOKENS,
        model=model if isinstance(model, str) else None,
        tools=tuple(tools) if tools is not None else None,
        delay_s=float(delay) / 1000.0,
        after_tool=any(m["role"] == "tool" for m in raw),
        forks=_forks(t.get("forks") or [], where),
        spawns=_spawns(t.get("spawns") or [], where),
    )


def _forks(entries: Any, where: str) -> list[tuple[str, bool]]:
    out = []
    for e in entries if isinstance(entries, list) else [entries]:
        if isinstance(e, str):
            out.append((e, False))
        elif isinstance(e, dict) and isinstance(e.get("child"), str):
            out.append((e["child"], bool(e.get("background", False))))
        else:
            raise BadInput(f"{where}: a fork is a session id or {{child, background}}, not {e!r}")
    return out


def _spawns(entries: Any, where: str) -> list[tuple[list[str], int | None]]:
    """Consecutive bare ids are one group joined on the next turn; each object is its own group."""
    groups: list[tuple[list[str], int | None]] = []
    bare: list[str] = []
    for e in entries if isinstance(entries, list) else [entries]:
        if isinstance(e, str):
            bare.append(e)
            continue
        children = e.get("children") if isinstance(e, dict) else None
        join_at = e.get("join_at") if isinstance(e, dict) else None
        if not isinstance(children, list) or not children or not all(isinstance(c, str) for c in children):
            raise BadInput(f"{where}: a spawn is a session id or {{children, join_at}}, not {e!r}")
        if join_at is not None and (isinstance(join_at, bool) or not isinstance(join_at, int)):
            raise BadInput(f"{where}: join_at {join_at!r} (needs a turn index)")
        if bare:
            groups.append((bare, None))
            bare = []
        groups.append((list(children), join_at))
    if bare:
        groups.append((bare, None))
    return groups


def _children(conv: _Conversation) -> list[str]:
    out = list(conv.pre_session)
    for t in conv.turns:
        out += [c for c, _ in t.forks] + [c for group, _ in t.spawns for c in group]
    return out


def _check_branches(convs: dict[str, _Conversation], path: Path) -> None:
    """What AIPerf's loader rejects: unknown children, a child forked twice or with an isolated
    context, a plain fork before the last turn, a join outside the conversation, a cycle."""
    forked: dict[str, str] = {}
    for conv in convs.values():
        where = f"{path}:{conv.line}: {conv.sid!r}"
        for c in _children(conv):
            if c not in convs:
                raise BadInput(f"{where} names conversation {c!r}, which is not in the file")
        last = len(conv.turns) - 1
        for i, t in enumerate(conv.turns):
            for child, background in t.forks:
                if child in forked:
                    raise BadInput(f"{where} turn {i} forks {child!r}, already forked by {forked[child]!r}")
                forked[child] = conv.sid
                if convs[child].isolated:
                    raise BadInput(
                        f"{where} turn {i} forks {child!r}, whose context_mode {ISOLATED} drops what a fork inherits"
                    )
                if not background and i != last:
                    raise BadInput(f"{where} turn {i} forks {child!r} before its last turn (needs background: true)")
            for _, join_at in t.spawns:
                if join_at is not None and not i < join_at <= last:
                    raise BadInput(f"{where} turn {i}: join_at {join_at} outside turns {i + 1}..{last}")
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(sid: str, trail: list[str]) -> None:
        if state.get(sid) == 1:
            cycle = " -> ".join(trail[trail.index(sid) :] + [sid])
            raise BadInput(f"{path}:{convs[sid].line}: conversations in a cycle: {cycle}")
        if state.get(sid) == 2:
            return
        state[sid] = 1
        for c in _children(convs[sid]):
            visit(c, trail + [sid])
        state[sid] = 2

    for sid in convs:
        visit(sid, [])


@dataclass
class _Placed:
    id: str
    tools: tuple[dict[str, object], ...]  # its effective tools (its own, else its lineage's)


class _Tree:
    """One root's calls, expanded depth first as AIPerf's ``_TreeBuilder`` does: each branch right
    after the turn that fires it, so every parent comes before its children."""

    def __init__(self, convs: dict[str, _Conversation], path: Path) -> None:
        self.convs = convs
        self.path = path
        self.calls: list[Call] = []
        self.instances: dict[str, int] = {}

    def program(self, root: _Conversation) -> Program:
        self.expand(root, self.instance(root.sid), (), (), (), 0)
        return Program(root.sid, tuple(self.calls), format=FORMAT)

    def instance(self, sid: str) -> str:
        n = self.instances.get(sid, 0) + 1
        self.instances[sid] = n
        return sid if n == 1 else f"{sid}#{n}"

    def expand(
        self,
        conv: _Conversation,
        inst: str,
        parents: tuple[Edge, ...],
        prefix: tuple[Segment, ...],
        tools: tuple[dict[str, object], ...],
        depth: int,
    ) -> None:
        """The conversation instance ``inst``'s turns; its turn 0 waits on ``parents`` and starts
        its prompt with ``prefix`` (a fork's inherited context)."""
        joins: dict[int, list[str]] = {}  # turn index -> the spawned children's last calls it waits on
        prev: _Placed | None = None
        for k, turn in enumerate(conv.turns):
            cid = f"{inst}:{k}"
            edges = parents if prev is None else (Edge(prev.id, "end", turn.delay_s),)
            edges += tuple(Edge(leaf, "end", 0.0) for leaf in joins.pop(k, []))
            if prev is not None:
                prefix = () if conv.isolated else (PromptOf(prev.id), Output(prev.id))
                tools = prev.tools
            own = turn.tools if turn.tools is not None else tools
            role: Role = "subagent" if depth > 0 else role_of(edges, depth, turn.after_tool)
            self.calls.append(
                Call(
                    id=cid,
                    prompt=prefix + turn.messages,
                    max_tokens=turn.max_tokens,
                    parents=edges,
                    role=role,
                    depth=depth,
                    model=turn.model,
                    tools=own,
                )
            )
            placed = _Placed(cid, own)
            if k == 0:
                for child in conv.pre_session:  # fire with turn 0, on its own parents
                    self.expand(self.convs[child], self.instance(child), edges, (), (), 1)
            for child, _ in sorted(turn.forks, key=lambda f: f[1]):  # AIPerf: plain forks, then background ones
                context = (PromptOf(cid), Output(cid))
                self.expand(self.convs[child], self.instance(child), (Edge(cid, "end", 0.0),), context, own, depth + 1)
            for children, join_at in turn.spawns:
                at = join_at if join_at is not None else k + 1
                for child in children:
                    sub = self.convs[child]
                    name = self.instance(child)
                    self.expand(sub, name, (Edge(cid, "end", 0.0),), (), (), depth + 1)
                    if at < len(conv.turns):
                        joins.setdefault(at, []).append(f"{name}:{len(sub.turns) - 1}")
            prev = placed
