"""AIPerf's native Graph IR (``--graph-format native``): a graph of LLM nodes and timed edges, and
the traces that run it, as a YAML document (``graph:`` and ``traces:``) or JSONL records (``{"kind":
"graph", ...}`` first, then ``{"kind": "trace", ...}``).

Read as AIPerf documents and runs it (``docs/benchmark-modes/agentic.md``; the schema
``src/aiperf/dataset/graph/models.py``; prompts as ``native_lowering.py`` builds them; timing as
``TraceExecutor._compute_firing_gate_us`` computes it; at ai-dynamo/aiperf 58028d5):

- **Programs.** One a trace (``traces[i].id``), every node of the graph a call of it (``id`` the
  node's), with the trace's ``initial_state`` as the static channel values. A graph without traces
  is one program named after the file; a graph without nodes is the linear-chat shorthand, one call
  of ``graph.system`` and the trace's ``messages``. A trace's ``graph_ref`` (another graph) is
  refused, its ``replay_outputs`` unused; ``extra_body``, ``extra_headers`` and ``streaming`` have
  no place in a call.
- **Calls.** Nodes of ``node_type: llm`` (the only type; the default): ``max_tokens`` (absent:
  ``DEFAULT_MAX_TOKENS``; AIPerf leaves it uncapped), ``model``, ``raw_tools`` as the call's tools.
- **Edges** ``{source, target}`` (``START`` and ``END`` virtual): a node waits on every real source,
  on its end after ``delay_after_predecessor_us``, on its start after
  ``delay_after_predecessor_start_us``, or on its first token after
  ``delay_after_predecessor_first_token_us`` (AIPerf falls back to the start delay when no first
  token came; a replay always has one). ``min_start_delay_us`` (on the node, or on any edge into it)
  holds the node that long after its inputs were ready: on a root, from the trace's start
  (``not_before``); on any other node, folded into each of its edges' delays (the runtime's gate,
  max over edges of anchor + delay, and input-ready + min_start, is the same number). Microseconds
  become seconds; no edge carries tool time (AIPerf folds it into the delay).
- **Joins.** A node waits on all its incoming edges (AIPerf fires one without ``inputs`` when its
  first predecessor finishes; every node in AIPerf's fixtures has one predecessor, and an AND-join
  is what a replay of a recording means), on every writer of each channel its ``inputs`` name
  (AIPerf's AND fan-in; a k-of-n count is refused), and on every node whose reply its prompt uses.
- **Prompts.** A message item is a ``Message`` (content a string, or string blocks joined). A
  ``"@channel"`` reads a channel: written by no completion-ancestor of the node, it is the trace's
  ``initial_state`` value (messages at prompt level, text inside a message); written by upstream
  nodes, it is their live replies. At prompt level that rebuilds the conversation: the initial
  messages, then each writer's own items (its prompt less its leading ``@channel``) and
  ``Output(writer)`` in completion order, written ``PromptOf(last writer)`` and ``Output(last
  writer)`` when the last writer's prompt starts with that channel (the accumulate chain). Inside a
  message (``["Review this plan: ", "@plan_out"]``) the one writer's reply is ``Output(writer)``
  between the message's text before and after it: the same text in the same order, the reply sent
  as its own assistant message where AIPerf splices it into the user's. ``"@@x"`` is the literal
  ``@x``. Writers concurrent with the reader, or not in one completion chain, are refused as AIPerf
  refuses them.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML is not a dependency)

from tokenbench.datasets.programs.aiperf_dag import DEFAULT_MAX_TOKENS, message_text
from tokenbench.datasets.programs.model import (
    Anchor,
    Call,
    Edge,
    Message,
    Output,
    Program,
    PromptOf,
    Segment,
    role_of,
)
from tokenbench.errors import BadInput

FORMAT = "aiperf-graph"
START, END = "START", "END"
US_PER_S = 1e6


def looks_like(obj: object) -> bool:
    """A YAML document with a ``graph`` mapping (or its first line, ``graph:``), or a JSONL graph record."""
    if isinstance(obj, str):
        return obj.startswith("graph:")
    return isinstance(obj, dict) and (isinstance(obj.get("graph"), dict) or obj.get("kind") == "graph")


def read(path: Path) -> list[Program]:
    graph, traces = _load(path)
    where = str(path)
    nodes = graph.get("nodes") or {}
    if not isinstance(nodes, dict):
        raise BadInput(f"{where}: graph.nodes must be a mapping of node id to node")
    if not isinstance(traces, list) or not all(isinstance(t, dict) for t in traces):
        raise BadInput(f"{where}: traces must be a list of objects")
    if not traces:
        traces = [{"id": path.stem}]
    if not nodes:
        return [_shorthand(graph, t, where) for t in traces]
    g = _Graph(nodes, graph.get("edges") or [], where)
    return [g.program(t) for t in traces]


def _load(path: Path) -> tuple[dict[str, Any], Any]:
    """The graph record and the traces, from a YAML document or native JSONL records."""
    text = path.read_text(encoding="utf-8")
    first = next((line for line in text.splitlines() if line.strip()), "")
    if first.lstrip().startswith("{"):
        try:
            json.loads(first)
            return _records(text, path)
        except json.JSONDecodeError:
            pass  # a YAML flow mapping
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise BadInput(f"{path}{line}: not YAML ({getattr(exc, 'problem', None) or exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("graph", {}), dict):
        raise BadInput(f"{path}: not an AIPerf graph (needs a graph: mapping and traces:)")
    return doc.get("graph") or {}, doc.get("traces") or []


def _records(text: str, path: Path) -> tuple[dict[str, Any], list[Any]]:
    graph: dict[str, Any] | None = None
    traces: list[Any] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{path}:{n}: not JSON ({exc.msg})") from None
        kind = rec.get("kind") if isinstance(rec, dict) else None
        if kind == "graph":
            if graph is not None or traces:
                raise BadInput(f"{path}:{n}: a second graph record, or one after the traces (one graph, first)")
            graph = {k: v for k, v in rec.items() if k != "kind"}
        elif kind == "trace":
            traces.append({k: v for k, v in rec.items() if k != "kind"})
        else:
            raise BadInput(f"{path}:{n}: a record of kind {kind!r} (graph or trace)")
    return graph or {}, traces


def _trace_id(trace: dict[str, Any], where: str) -> str:
    tid = trace.get("id")
    if not isinstance(tid, str) or not tid:
        raise BadInput(f"{where}: a trace without an id")
    if trace.get("graph_ref") is not None:
        raise BadInput(f"{where}: traces[{tid}].graph_ref: one graph a file (as AIPerf's native lowering)")
    return tid


def _shorthand(graph: dict[str, Any], trace: dict[str, Any], where: str) -> Program:
    """The linear-chat shorthand: one call of the graph's system prompt and the trace's messages."""
    tid = _trace_id(trace, where)
    messages = trace.get("messages") or []
    if not isinstance(messages, list) or not messages:
        raise BadInput(f"{where}: traces[{tid}] has neither graph nodes nor messages")
    prompt: list[Segment] = [Message("system", graph["system"])] if isinstance(graph.get("system"), str) else []
    prompt += _static_messages(messages, f"{where}: traces[{tid}].messages")
    return Program(tid, (Call("chat", tuple(prompt), DEFAULT_MAX_TOKENS),), format=FORMAT)


def _static_messages(value: Any, where: str) -> list[Segment]:
    if not isinstance(value, list):
        raise BadInput(f"{where}: a messages value must be a list of messages")
    out: list[Segment] = []
    for i, m in enumerate(value):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadInput(f"{where}[{i}]: a message needs a role")
        out.append(Message(m["role"], message_text(m.get("content"))))
    return out


def _ref(item: str) -> str | None:
    """The channel ``@name`` reads; None for text (and the ``@@`` escape)."""
    return item[1:] if item.startswith("@") and not item.startswith("@@") else None


@dataclass(frozen=True)
class _Node:
    id: str
    prompt: list[Any]
    output: str
    max_tokens: int
    model: str | None
    tools: tuple[dict[str, object], ...]
    min_start_us: float
    inputs: list[tuple[str, int | str]]


@dataclass(frozen=True)
class _Arrow:
    source: str
    anchor: Anchor
    delay_us: float


class _Graph:
    """The topology, checked once; ``program`` lowers the prompts for one trace."""

    def __init__(self, nodes: dict[str, Any], edges: Any, where: str) -> None:
        self.where = where
        self.nodes = {str(nid): self._node(str(nid), spec) for nid, spec in nodes.items()}
        self.incoming: dict[str, list[_Arrow]] = {nid: [] for nid in self.nodes}
        self.entry_min_us: dict[str, float] = {nid: 0.0 for nid in self.nodes}
        if not isinstance(edges, list):
            raise BadInput(f"{where}: graph.edges must be a list")
        for i, e in enumerate(edges):
            self._edge(e, f"{where}: graph.edges[{i}]")
        self.writers: dict[str, list[str]] = {}
        for n in self.nodes.values():
            self.writers.setdefault(n.output, []).append(n.id)
        self.order = self._topological()
        self.ancestors = self._completion_ancestors()

    def _node(self, nid: str, spec: Any) -> _Node:
        loc = f"{self.where}: graph.nodes.{nid}"
        if nid in (START, END):
            raise BadInput(f"{loc}: {nid} is reserved for the virtual entry and exit")
        if not isinstance(spec, dict):
            raise BadInput(f"{loc}: not a mapping")
        kind = spec.get("node_type", "llm")
        if kind != "llm":
            raise BadInput(f"{loc}: node_type {kind!r} (only llm nodes are calls)")
        prompt, output = spec.get("prompt"), spec.get("output")
        if not isinstance(prompt, list) or not prompt:
            raise BadInput(f"{loc}.prompt: needs a non-empty list")
        if not isinstance(output, str) or not output:
            raise BadInput(f"{loc}.output: needs the channel name the reply is written to")
        max_tokens = spec.get("max_tokens")
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise BadInput(f"{loc}.max_tokens: {max_tokens!r} (needs an integer >= 1)")
        tools = spec.get("raw_tools") or []
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            raise BadInput(f"{loc}.raw_tools: needs a list of tool objects")
        inputs = []
        for req in spec.get("inputs") or []:
            count = req.get("count", 1) if isinstance(req, dict) else None
            if (
                not isinstance(req, dict)
                or not isinstance(req.get("channel"), str)
                or not (count == "all" or isinstance(count, int))
            ):
                raise BadInput(f"{loc}.inputs: {req!r} (needs {{channel, count: N or all}})")
            inputs.append((req["channel"], count))
        model = spec.get("model")
        return _Node(
            nid,
            prompt,
            output,
            max_tokens or DEFAULT_MAX_TOKENS,
            model if isinstance(model, str) else None,
            tuple(tools),
            _micros(spec.get("min_start_delay_us"), f"{loc}.min_start_delay_us"),
            inputs,
        )

    def _edge(self, e: Any, loc: str) -> None:
        if not isinstance(e, dict) or not isinstance(e.get("source"), str) or not isinstance(e.get("target"), str):
            raise BadInput(f"{loc}: an edge needs a source and a target")
        source, target = e["source"], e["target"]
        if target == END:
            return
        if target not in self.nodes:
            raise BadInput(f"{loc}: target {target!r} is not a node")
        if source != START and source not in self.nodes:
            raise BadInput(f"{loc}: source {source!r} is not a node")
        after_end = e.get("delay_after_predecessor_us")
        after_start = e.get("delay_after_predecessor_start_us")
        after_first = e.get("delay_after_predecessor_first_token_us")
        min_start = _micros(e.get("min_start_delay_us"), f"{loc}.min_start_delay_us")
        self.entry_min_us[target] = max(self.entry_min_us[target], min_start)
        if source == START:
            if after_start is not None or after_first is not None:
                raise BadInput(
                    f"{loc}: START is never sent (use min_start_delay_us for a delay from the trace's start)"
                )
            return
        if after_end is not None and after_start is not None:
            raise BadInput(f"{loc}: both delay_after_predecessor_us and delay_after_predecessor_start_us (one anchor)")
        if after_first is not None:
            arrow = _Arrow(source, "first_token", _micros(after_first, f"{loc}.delay_after_predecessor_first_token_us"))
        elif after_start is not None:
            arrow = _Arrow(source, "start", _micros(after_start, f"{loc}.delay_after_predecessor_start_us"))
        else:
            arrow = _Arrow(source, "end", _micros(after_end, f"{loc}.delay_after_predecessor_us"))
        self.incoming[target].append(arrow)

    def _topological(self) -> list[str]:
        """Every node after its sources and its inputs' writers, else in declaration order."""
        index = {nid: i for i, nid in enumerate(self.nodes)}
        before: dict[str, set[str]] = {nid: {a.source for a in self.incoming[nid]} for nid in self.nodes}
        for n in self.nodes.values():
            for channel, _ in n.inputs:
                before[n.id] |= {w for w in self.writers.get(channel, []) if w != n.id}
        after: dict[str, list[str]] = {nid: [] for nid in self.nodes}
        for nid, sources in before.items():
            for s in sources:
                after[s].append(nid)
        waiting = {nid: len(s) for nid, s in before.items()}
        ready = [index[nid] for nid, w in waiting.items() if w == 0]
        heapq.heapify(ready)
        names = list(self.nodes)
        order: list[str] = []
        while ready:
            nid = names[heapq.heappop(ready)]
            order.append(nid)
            for t in after[nid]:
                waiting[t] -= 1
                if waiting[t] == 0:
                    heapq.heappush(ready, index[t])
        if len(order) < len(self.nodes):
            stuck = sorted(set(self.nodes) - set(order), key=index.__getitem__)
            raise BadInput(f"{self.where}: the graph has a cycle through {', '.join(stuck)}")
        return order

    def _completion_ancestors(self) -> dict[str, set[str]]:
        """The nodes that end before each node is sent, along completion (end-anchored) edges."""
        out: dict[str, set[str]] = {}
        for nid in self.order:
            seen: set[str] = set()
            for a in self.incoming[nid]:
                if a.anchor == "end":
                    seen |= {a.source} | out[a.source]
            out[nid] = seen
        return out

    def program(self, trace: dict[str, Any]) -> Program:
        tid = _trace_id(trace, self.where)
        init = trace.get("initial_state") or {}
        if not isinstance(init, dict):
            raise BadInput(f"{self.where}: traces[{tid}].initial_state must be a mapping")
        calls = [self._call(self.nodes[nid], init, f"{self.where}: traces[{tid}]") for nid in self.order]
        return Program(tid, tuple(calls), format=FORMAT)

    def _call(self, node: _Node, init: dict[str, Any], where: str) -> Call:
        loc = f"{self.where}: graph.nodes.{node.id}.prompt"
        prompt, producers = self._prompt(node, node.prompt, init, loc, where)
        hold = max(node.min_start_us, self.entry_min_us[node.id])
        edges = [Edge(a.source, a.anchor, max(a.delay_us, hold) / US_PER_S) for a in self.incoming[node.id]]
        needed = list(producers)
        for channel, count in node.inputs:
            writers = [w for w in self.writers.get(channel, []) if w != node.id]
            if count != "all" and count != len(writers):
                raise BadInput(
                    f"{self.where}: graph.nodes.{node.id}.inputs: {count} of {channel!r}'s {len(writers)} writers "
                    "(only a wait on all of them is a call's parents)"
                )
            needed += writers
        for w in dict.fromkeys(needed):
            mine = [e for e in edges if e.parent == w]
            if any(e.anchor != "end" for e in mine):
                raise BadInput(f"{loc}: uses {w!r}'s reply but is sent at {w!r}'s start or first token")
            if not mine:
                edges.append(Edge(w, "end", hold / US_PER_S))
        return Call(
            id=node.id,
            prompt=tuple(prompt),
            max_tokens=node.max_tokens,
            parents=tuple(edges),
            not_before_s=0.0 if edges else hold / US_PER_S,  # a root's hold counts from the trace's start
            role=role_of(edges, 0, False),
            model=node.model,
            tools=node.tools,
        )

    def _prompt(
        self, node: _Node, items: list[Any], init: dict[str, Any], loc: str, where: str
    ) -> tuple[list[Segment], list[str]]:
        """The segments of ``items`` in ``node``'s prompt, and the nodes whose replies they use."""
        out: list[Segment] = []
        used: list[str] = []
        for item in items:
            if isinstance(item, str):
                channel = _ref(item)
                if channel is None:
                    raise BadInput(f"{loc}: a prompt-level string must be an '@channel' splice, not {item!r}")
                chain = self._writers_before(node, channel, loc)
                if not chain:
                    if channel not in init:
                        raise BadInput(
                            f"{where}.initial_state.{channel}: '@{channel}' reads it, and no node writes it first"
                        )
                    out += _static_messages(init[channel], f"{where}.initial_state.{channel}")
                    continue
                last = self.nodes[chain[-1]]
                if last.prompt and last.prompt[0] == f"@{channel}":  # it read the rest: reuse its prompt
                    out += [PromptOf(last.id), Output(last.id)]
                    used.append(last.id)
                    continue
                if channel in init:
                    out += _static_messages(init[channel], f"{where}.initial_state.{channel}")
                for w in chain:
                    writer = self.nodes[w]
                    delta = writer.prompt[1:] if writer.prompt and writer.prompt[0] == f"@{channel}" else writer.prompt
                    segments, live = self._prompt(writer, delta, init, f"{self.where}: graph.nodes.{w}.prompt", where)
                    if live:
                        raise BadInput(f"{loc}: '@{channel}' rebuilds {w!r}'s turn, which itself uses a live reply")
                    out += segments + [Output(w)]
                    used.append(w)
            elif isinstance(item, dict):
                role = item.get("role")
                if not isinstance(role, str) or not role:
                    raise BadInput(f"{loc}: a message item needs a role")
                segments, live = self._content(node, role, item.get("content"), init, loc, where)
                out += segments
                used += live
            else:
                raise BadInput(f"{loc}: a prompt item is a message or an '@channel' string, not {item!r}")
        return out, used

    def _content(
        self, node: _Node, role: str, content: Any, init: dict[str, Any], loc: str, where: str
    ) -> tuple[list[Segment], list[str]]:
        """One message: its text, with an upstream node's reply where a block reads its channel."""
        if content is None or isinstance(content, str):
            return [Message(role, content or "")], []
        if not isinstance(content, list) or not all(isinstance(b, str) for b in content):
            raise BadInput(f"{loc}: message content must be a string or a list of string blocks")
        out: list[Segment] = []
        used: list[str] = []
        text = ""
        for block in content:
            channel = _ref(block)
            if channel is None:
                text += block[1:] if block.startswith("@@") else block
                continue
            chain = self._writers_before(node, channel, loc)
            if not chain:
                value = init.get(channel)
                if not isinstance(value, str):
                    raise BadInput(f"{where}.initial_state.{channel}: '@{channel}' in a message needs its text")
                text += value
                continue
            if len(chain) > 1:
                raise BadInput(f"{loc}: '@{channel}' inside a message has {len(chain)} writers {chain} (one at most)")
            if channel in init:
                raise BadInput(f"{loc}: '@{channel}' is both in initial_state and written by {chain[0]!r}")
            if text:
                out.append(Message(role, text))
                text = ""
            out.append(Output(chain[0]))
            used.append(chain[0])
        if text or not out:
            out.append(Message(role, text))
        return out, used

    def _writers_before(self, node: _Node, channel: str, loc: str) -> list[str]:
        """The channel's writers that end before ``node`` is sent, in the order they end (later
        writers read the channel after it; concurrent ones have no order and are refused)."""
        writers = [w for w in self.writers.get(channel, []) if w != node.id]
        before = [w for w in writers if w in self.ancestors[node.id]]
        racing = [w for w in writers if w not in before and node.id not in self.ancestors[w]]
        early = [a.source for a in self.incoming[node.id] if a.source in racing]
        if early:
            raise BadInput(
                f"{loc}: '@{channel}' is {early[0]!r}'s reply, but the node is sent at its start or first token"
            )
        if racing:
            raise BadInput(
                f"{loc}: '@{channel}' is written by {racing}, sent alongside {node.id!r} (no order to read it in)"
            )
        before.sort(key=lambda w: len(self.ancestors[w] & set(before)))
        for earlier, later in zip(before, before[1:], strict=False):
            if earlier not in self.ancestors[later]:
                raise BadInput(f"{loc}: '@{channel}' writers {earlier!r} and {later!r} are not one after the other")
        return before


def _micros(value: Any, loc: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise BadInput(f"{loc}: {value!r} (needs microseconds >= 0)")
    return float(value)
