"""AIPerf's Graph IR read into programs: AIPerf's own two native fixtures (unchanged, in
tests/fixtures/programs/aiperf), hand-written graphs for the timing fields and the prompt grammar,
and the graphs AIPerf refuses."""

import json
import textwrap
from pathlib import Path

import pytest

from tokenbench.datasets.programs import _head, aiperf_graph, detect, read_programs, weka
from tokenbench.datasets.programs.aiperf_dag import DEFAULT_MAX_TOKENS
from tokenbench.datasets.programs.model import Edge, Message, Output, Program, PromptOf, critical_path_s
from tokenbench.errors import BadInput

AIPERF = Path(__file__).parents[2] / "fixtures" / "programs" / "aiperf"


def _yaml(tmp_path: Path, text: str, name: str = "g.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _one(path: Path) -> Program:
    programs = aiperf_graph.read(path)
    assert len(programs) == 1
    return programs[0]


def test_planner_reviewer_splices_the_plans_reply_into_the_review():
    p = _one(AIPERF / "planner_reviewer.yaml")
    assert (p.id, p.format) == ("conv-dynamic-1", "aiperf-graph")
    plan, review = p.calls
    assert plan.id == "plan" and plan.parents == () and plan.not_before_s == 0.0
    assert plan.prompt == (Message("user", "Make a plan for testing a cache."),)
    assert review.id == "review" and review.parents == (Edge("plan", "end", 0.0),)
    # the block-level "@plan_out": the text before it, then plan's live reply
    assert review.prompt == (Message("user", "Review this plan: "), Output("plan"))
    assert [c.max_tokens for c in p.calls] == [16, 16]
    assert [c.role for c in p.calls] == ["root", "follow_up"]
    # plan 1.0 s, review 2.0 s: 3.0 s
    assert critical_path_s(p, {"plan": (0.0, 0.3, 1.0), "review": (0.0, 0.3, 2.0)}) == pytest.approx(3.0)


def test_accumulate_chain_rebuilds_the_conversation_from_the_seed_and_each_writer():
    p = _one(AIPERF / "accumulate_chain.yaml")
    assert p.id == "conv-chain-1" and [c.id for c in p.calls] == ["turn1", "turn2", "turn3"]
    t1, t2, t3 = p.calls
    # turn1 reads @hist before anyone wrote it: the trace's initial_state
    assert t1.prompt == (Message("system", "You are terse."), Message("user", "Name a primary color."))
    # turn2 and turn3 read what the writer before them read, and its reply
    assert t2.prompt == (PromptOf("turn1"), Output("turn1"), Message("user", "Name a farm animal."))
    assert t3.prompt == (PromptOf("turn2"), Output("turn2"), Message("user", "Combine your two answers."))
    assert t2.parents == (Edge("turn1", "end", 0.0),) and t3.parents == (Edge("turn2", "end", 0.0),)
    assert [c.max_tokens for c in p.calls] == [12, 12, 12]
    assert critical_path_s(p, {c.id: (0.0, 0.1, 0.5) for c in p.calls}) == pytest.approx(1.5)


TIMED = """\
    graph:
      nodes:
        a: {prompt: [{role: user, content: "a"}], output: a_out, min_start_delay_us: 500000, max_tokens: 4}
        b: {prompt: [{role: user, content: "b"}], output: notes}
        c: {prompt: [{role: user, content: "c"}], output: notes}
        d: {prompt: [{role: user, content: "d"}], output: d_out, model: small}
        e: {prompt: [{role: user, content: "e"}], output: e_out, min_start_delay_us: 1000000}
        f: {prompt: [{role: user, content: "f"}], output: f_out, inputs: [{channel: notes, count: all}]}
      edges:
        - {source: START, target: a, min_start_delay_us: 700000}
        - {source: a, target: b, delay_after_predecessor_us: 2000000}
        - {source: a, target: c, delay_after_predecessor_start_us: 300000}
        - {source: a, target: d, delay_after_predecessor_start_us: 200000, delay_after_predecessor_first_token_us: 100000}
        - {source: b, target: e, delay_after_predecessor_us: 0}
        - {source: c, target: e}
        - {source: e, target: END}
    traces:
      - id: t1
"""


def test_edge_delays_in_microseconds_anchor_on_end_start_and_first_token(tmp_path):
    p = _one(_yaml(tmp_path, TIMED))
    c = {x.id: x for x in p.calls}
    assert [x.id for x in p.calls] == ["a", "b", "c", "d", "e", "f"]
    assert c["a"].parents == () and c["a"].not_before_s == pytest.approx(0.7)  # the larger hold: START edge's
    assert c["b"].parents == (Edge("a", "end", 2.0),)
    assert c["c"].parents == (Edge("a", "start", 0.3),)
    assert c["d"].parents == (Edge("a", "first_token", 0.1),)
    # e's own min_start_delay_us (1 s from when its inputs are ready) held on each edge
    assert c["e"].parents == (Edge("b", "end", 1.0), Edge("c", "end", 1.0)) and c["e"].not_before_s == 0.0
    # f waits on every writer of the channel its inputs name
    assert c["f"].parents == (Edge("b", "end", 0.0), Edge("c", "end", 0.0))
    assert (c["a"].max_tokens, c["b"].max_tokens, c["d"].model) == (4, DEFAULT_MAX_TOKENS, "small")
    # a: sent 0.7, first token 0.9, ends 1.7. b: 1.7 + 2.0 = 3.7, ends 4.7. c: sent 0.7 + 0.3 = 1.0,
    # ends 4.0. d: 0.9 + 0.1 = 1.0, ends 1.5. e: max(4.7 + 1.0, 4.0 + 1.0) = 5.7, ends 6.7. f:
    # max(4.7, 4.0) = 4.7, ends 5.7. The last end: 6.7.
    times = {
        "a": (0.0, 0.2, 1.0),
        "b": (0.0, 0.1, 1.0),
        "c": (0.0, 0.1, 3.0),
        "d": (0.0, 0.1, 0.5),
        "e": (0.0, 0.1, 1.0),
        "f": (0.0, 0.1, 1.0),
    }
    assert critical_path_s(p, times) == pytest.approx(6.7)


def test_native_jsonl_records_with_one_program_a_trace(tmp_path):
    path = tmp_path / "g.jsonl"
    graph = {
        "kind": "graph",
        "version": "2.0",
        "nodes": {
            "ask": {
                "node_type": "llm",
                "prompt": [{"role": "user", "content": ["Question: ", "@question"]}],
                "output": "answer",
            }
        },
    }
    traces = [
        {"kind": "trace", "id": f"q{i}", "initial_state": {"question": q}} for i, q in enumerate(["Why?", "@@How?"])
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in [graph, *traces]))
    one, two = aiperf_graph.read(path)
    assert (one.id, two.id) == ("q0", "q1")
    assert one.calls[0].prompt == (Message("user", "Question: Why?"),)  # an initial_state text value, static
    assert two.calls[0].prompt == (Message("user", "Question: @@How?"),)  # a value is not an escape
    assert one.calls[0].max_tokens == DEFAULT_MAX_TOKENS


def test_the_linear_chat_shorthand_is_one_call(tmp_path):
    path = _yaml(
        tmp_path,
        """\
        graph: {version: "2.0", system: "Be brief."}
        traces:
          - id: hello-1
            messages: [{role: user, content: "Say hello."}]
        """,
    )
    (call,) = _one(path).calls
    assert call.prompt == (Message("system", "Be brief."), Message("user", "Say hello."))


def test_a_writer_that_reads_nothing_is_rebuilt_from_its_own_items_and_reply(tmp_path):
    path = _yaml(
        tmp_path,
        """\
        graph:
          nodes:
            w: {prompt: [{role: user, content: "A"}], output: notes}
            r: {prompt: ["@notes", {role: user, content: ["@@lit ", "C"]}], output: r_out}
          edges: [{source: w, target: r, delay_after_predecessor_us: 250000}]
        traces: [{id: t}]
        """,
    )
    w, r = _one(path).calls
    assert r.prompt == (Message("user", "A"), Output("w"), Message("user", "@lit C"))
    assert r.parents == (Edge("w", "end", 0.25),)


def test_a_reply_used_without_an_edge_is_waited_on(tmp_path):
    """A prompt that splices a node's reply waits on that node (AIPerf injects the same gate)."""
    path = _yaml(
        tmp_path,
        """\
        graph:
          nodes:
            a: {prompt: [{role: user, content: "a"}], output: a_out}
            b: {prompt: [{role: user, content: "b"}], output: b_out}
            c: {prompt: [{role: user, content: ["from a: ", "@a_out", " and b: ", "@b_out"]}], output: c_out}
          edges: [{source: a, target: b}, {source: b, target: c}]
        traces: [{id: t}]
        """,
    )
    c = _one(path).call("c")
    assert c.prompt == (Message("user", "from a: "), Output("a"), Message("user", " and b: "), Output("b"))
    assert c.parents == (Edge("b", "end", 0.0), Edge("a", "end", 0.0))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("graph:\n  nodes: {a: [\n", "g.yaml:3: not YAML"),
        ("graph:\n  nodes:\n    a: {node_type: tool, prompt: [x], output: o}\n", "graph.nodes.a: node_type 'tool'"),
        ("graph:\n  nodes:\n    a: {prompt: ['@h'], output: o}\ntraces: [{id: t}]\n", "traces[t].initial_state.h"),
        (
            "graph:\n  nodes:\n    a: {prompt: ['@h'], output: o}\ntraces: [{id: t, graph_ref: g2}]\n",
            "traces[t].graph_ref",
        ),
        (
            "graph:\n  nodes:\n    a: {prompt: [{role: user, content: x}], output: o}\n"
            "    b: {prompt: [{role: user, content: x}], output: o}\n"
            "    r: {prompt: [{role: user, content: ['@o']}], output: r}\n"
            "  edges: [{source: a, target: r}]\n",
            "'@o' is written by ['b'], sent alongside 'r'",
        ),
        (
            "graph:\n  nodes:\n    a: {prompt: [{role: user, content: x}], output: o}\n"
            "    b: {prompt: [{role: user, content: x}], output: p}\n"
            "  edges: [{source: a, target: b}, {source: b, target: a}]\n",
            "the graph has a cycle through a, b",
        ),
        (
            "graph:\n  nodes:\n    a: {prompt: [{role: user, content: x}], output: o}\n"
            "  edges: [{source: START, target: a, delay_after_predecessor_start_us: 5}]\n",
            "graph.edges[0]: START is never sent",
        ),
        (
            "graph:\n  nodes:\n    a: {prompt: [{role: user, content: x}], output: o}\n"
            "    b: {prompt: [{role: user, content: x}], output: o}\n"
            "    c: {prompt: [{role: user, content: x}], output: q, inputs: [{channel: o, count: 1}]}\n",
            "1 of 'o''s 2 writers",
        ),
        (
            "graph:\n  nodes:\n    a: {prompt: [{role: user, content: x}], output: o}\n"
            "    b: {prompt: [{role: user, content: ['@o']}], output: p}\n"
            "  edges: [{source: a, target: b, delay_after_predecessor_start_us: 5}]\n",
            "'@o' is 'a''s reply, but the node is sent at its start",
        ),
    ],
)
def test_what_aiperf_refuses_is_bad_input_naming_where(tmp_path, text, says):
    path = _yaml(tmp_path, text)
    with pytest.raises(BadInput) as err:
        aiperf_graph.read(path)
    assert says in str(err.value) and str(path) in str(err.value)


def test_a_malformed_jsonl_record_names_its_line(tmp_path):
    path = tmp_path / "g.jsonl"
    path.write_text('{"kind": "graph", "nodes": {}}\n{"kind": "trace", "id": \n')
    with pytest.raises(BadInput, match=r"g\.jsonl:2: not JSON"):
        aiperf_graph.read(path)


def test_looks_like_a_graph_document_or_record():
    assert aiperf_graph.looks_like({"graph": {"nodes": {}}, "traces": []})
    assert aiperf_graph.looks_like({"kind": "graph", "nodes": {}})
    assert aiperf_graph.looks_like("graph:")
    assert not aiperf_graph.looks_like({"id": "t", "block_size": 64, "requests": []})
    assert not aiperf_graph.looks_like({"session_id": "s", "turns": []})


WEKA = Path(__file__).parents[2] / "fixtures" / "programs" / "weka"


@pytest.mark.parametrize("name", ["planner_reviewer.yaml", "accumulate_chain.yaml"])
def test_detection_picks_the_graph_reader_for_each_fixture(name):
    path = AIPERF / name
    assert detect(path) is aiperf_graph  # its first line is a comment: found by reading it as YAML
    assert read_programs(path) == aiperf_graph.read(path)


def test_detection_finds_a_yml_document_and_native_jsonl_records(tmp_path):
    yml = _yaml(tmp_path, "graph:\n  nodes:\n    a: {prompt: [{role: user, content: x}], output: o}\n", "g.yml")
    records = tmp_path / "g.jsonl"
    records.write_text(
        '{"kind": "graph", "nodes": {"a": {"prompt": [{"role": "user", "content": "x"}], "output": "o"}}}\n'
    )
    assert detect(yml) is aiperf_graph and detect(records) is aiperf_graph
    assert [p.id for p in read_programs(yml)] == ["g"]  # no traces: one program named after the file


@pytest.mark.parametrize("name", sorted(p.name for p in WEKA.glob("*.json")))
def test_a_weka_trace_is_not_taken_for_a_graph(name):
    assert detect(WEKA / name) is weka
    assert not any(aiperf_graph.looks_like(h) for h in _head(WEKA / name))
