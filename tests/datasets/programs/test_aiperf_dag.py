"""AIPerf's DAG JSONL read into programs: known answers worked by hand from AIPerf's own fixtures
(tests/fixtures/programs/aiperf, unchanged from ai-dynamo/aiperf), and the inputs AIPerf refuses."""

import json
from pathlib import Path

import pytest

from tokenbench.datasets.programs import _head, aiperf_dag, detect, read_programs, weka
from tokenbench.datasets.programs.model import Edge, Message, Output, Program, PromptOf, critical_path_s
from tokenbench.errors import BadInput

AIPERF = Path(__file__).parents[2] / "fixtures" / "programs" / "aiperf"


def _one(name: str) -> Program:
    programs = aiperf_dag.read(AIPERF / name)
    assert len(programs) == 1
    return programs[0]


def _write(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "t.dag.jsonl"
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def test_mixed_full_is_one_program_of_six_calls_with_a_delayed_join_and_a_closing_fork():
    p = _one("mixed_full.dag.jsonl")  # root spawns helper (join_at 2), forks finisher on its last turn
    assert p.id == "root" and p.format == "aiperf-dag"
    assert [c.id for c in p.calls] == ["root:0", "helper:0", "helper:1", "root:1", "root:2", "finisher:0"]
    c = {x.id: x for x in p.calls}
    assert c["root:0"].parents == ()
    assert c["helper:0"].parents == (Edge("root:0", "end", 0.0),)  # a child fires when its parent turn ends
    assert c["helper:1"].parents == (Edge("helper:0", "end", 0.010),)  # delay 10 ms
    assert c["root:1"].parents == (Edge("root:0", "end", 0.020),)  # delay 20 ms
    assert c["root:2"].parents == (Edge("root:1", "end", 0.0), Edge("helper:1", "end", 0.0))  # the join
    assert c["finisher:0"].parents == (Edge("root:2", "end", 0.0),)
    assert c["root:0"].prompt == (
        Message("system", "You are a planner."),
        Message("user", "Draft the migration plan."),
    )
    assert c["helper:0"].prompt == (Message("user", "Inventory the affected services."),)  # a spawn starts fresh
    assert c["helper:1"].prompt == (PromptOf("helper:0"), Output("helper:0"), Message("user", "Rank them by risk."))
    assert c["root:2"].prompt == (
        PromptOf("root:1"),
        Output("root:1"),
        Message("user", "Incorporate the helper results and finalize."),
    )
    # a fork continues the forking turn's conversation
    assert c["finisher:0"].prompt == (
        PromptOf("root:2"),
        Output("root:2"),
        Message("user", "Write the executive summary."),
    )
    assert [x.max_tokens for x in p.calls] == [32, 12, 8, 24, 16, 8]
    assert [x.model for x in p.calls] == ["mixed-model", None, "helper-model", None, "mixed-model", "finisher-model"]
    assert [(x.role, x.depth) for x in p.calls] == [
        ("root", 0),
        ("subagent", 1),
        ("subagent", 1),
        ("follow_up", 0),
        ("follow_up", 0),
        ("subagent", 1),
    ]
    assert all(x.not_before_s == 0.0 for x in p.calls)
    # tools: root:0's own, inherited along its lineage (the fork's too), not by the fresh spawn
    names = {x.id: [t["function"]["name"] for t in x.tools] for x in p.calls}
    assert names == {
        "root:0": ["lookup_docs"],
        "helper:0": [],
        "helper:1": [],
        "root:1": ["lookup_docs"],
        "root:2": ["lookup_docs"],
        "finisher:0": ["lookup_docs"],
    }
    # Every call 1 s to its end, helper:0 2 s. root:0 ends 1.0; helper:0 1.0-3.0; helper:1 starts
    # 3.0 + 0.010, ends 4.01; root:1 starts 1.0 + 0.020, ends 2.02; root:2 waits on both: starts
    # max(2.02, 4.01) = 4.01, ends 5.01; finisher:0 5.01-6.01.
    times = {x.id: (0.0, 0.1, 1.0) for x in p.calls} | {"helper:0": (0.0, 0.2, 2.0)}
    assert critical_path_s(p, times) == pytest.approx(6.01)


def test_fork_toolcalls_forks_a_two_turn_child_from_the_root_turn():
    p = _one("fork_toolcalls.dag.jsonl")
    assert [c.id for c in p.calls] == ["root:0", "branch-a:0", "branch-a:1"]
    root, a0, a1 = p.calls
    assert root.prompt == (
        Message("system", "You are a careful planning assistant."),
        Message("user", "Plan the rollout and call the planner [tool]."),
    )
    assert a0.parents == (Edge("root:0", "end", 0.0),)
    assert a0.prompt == (
        PromptOf("root:0"),
        Output("root:0"),
        Message("user", "Just invoke the checker, no prose [tool-only]."),
    )
    assert a1.parents == (Edge("branch-a:0", "end", 0.0),)
    assert a1.prompt == (
        PromptOf("branch-a:0"),
        Output("branch-a:0"),
        Message("user", "Now summarize what the tools returned."),
    )
    assert [c.max_tokens for c in p.calls] == [128, 96, 64]
    assert [(c.role, c.depth) for c in p.calls] == [("root", 0), ("subagent", 1), ("subagent", 1)]
    assert {c.model for c in p.calls} == {"Qwen3-0.6B"}
    # 0.5 s each, chained: 1.5 s
    assert critical_path_s(p, {c.id: (0.0, 0.1, 0.5) for c in p.calls}) == pytest.approx(1.5)


def test_delayed_turn_waits_250_ms_after_the_first_turn_ends():
    p = _one("delayed_turn.dag.jsonl")
    assert p.id == "seq" and [c.id for c in p.calls] == ["seq:0", "seq:1"]
    assert p.calls[1].parents == (Edge("seq:0", "end", 0.25),)
    assert p.calls[1].prompt == (PromptOf("seq:0"), Output("seq:0"), Message("user", "Second turn, gated by delay."))
    assert [c.max_tokens for c in p.calls] == [16, 16] and p.calls[1].role == "follow_up"
    # 0.5 s, then 0.25 s, then 0.5 s
    assert critical_path_s(p, {c.id: (0.0, 0.1, 0.5) for c in p.calls}) == pytest.approx(1.25)


def test_a_child_spawned_twice_is_two_instances_and_a_spawn_on_the_last_turn_is_never_joined():
    p = _one("spawn_repeat.dag.jsonl")  # both root turns spawn "kid" (bare: joined on the next turn)
    assert [c.id for c in p.calls] == ["root:0", "kid:0", "root:1", "kid#2:0"]
    c = {x.id: x for x in p.calls}
    assert c["root:1"].parents == (Edge("root:0", "end", 0.0), Edge("kid:0", "end", 0.0))
    assert c["kid#2:0"].parents == (Edge("root:1", "end", 0.0),)
    assert c["kid:0"].prompt == c["kid#2:0"].prompt == (Message("user", "work"),)
    # root 1 s, kid 3 s: root:1 waits for kid:0 (ends 4.0), ends 5.0; kid#2:0 5.0-8.0
    times = {"root:0": (0, 0.1, 1.0), "kid:0": (0, 0.1, 3.0), "root:1": (0, 0.1, 1.0), "kid#2:0": (0, 0.1, 3.0)}
    assert critical_path_s(p, times) == pytest.approx(8.0)


def test_a_pre_session_spawn_starts_with_turn_zero_and_is_never_joined():
    p = _one("prespawn.dag.jsonl")
    assert [c.id for c in p.calls] == ["root:0", "bg-child:0", "root:1"]
    child = p.calls[1]
    assert child.parents == () and child.prompt == (Message("user", "Background child work item."),)
    assert (child.role, child.depth) == ("subagent", 1)
    assert p.calls[2].parents == (Edge("root:0", "end", 0.0),)


def test_an_isolated_conversation_sends_each_turn_alone_and_a_tool_message_follows_a_tool(tmp_path):
    path = _write(
        tmp_path,
        {
            "session_id": "iso",
            "context_mode": "message_array_with_responses",
            "turns": [
                {
                    "messages": [
                        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
                    ]
                },
                {"messages": [{"role": "tool", "tool_call_id": "x", "content": "42"}], "delay": 1500},
            ],
        },
    )
    (p,) = aiperf_dag.read(path)
    first, second = p.calls
    assert first.prompt == (Message("user", "ab"),)  # text parts joined
    assert second.prompt == (Message("tool", "42"),)  # no earlier turns
    assert second.parents == (Edge("iso:0", "end", 1.5),) and second.role == "after_tool"
    assert first.max_tokens == aiperf_dag.DEFAULT_MAX_TOKENS  # none authored


def test_two_roots_are_two_programs_and_a_background_fork_lets_its_parent_go_on(tmp_path):
    path = _write(
        tmp_path,
        {
            "session_id": "a",
            "turns": [{"messages": [], "forks": [{"child": "c", "background": True}]}, {"messages": []}],
        },
        {"session_id": "b", "turns": [{"messages": [{"role": "user", "content": "hi"}]}]},
        {"session_id": "c", "turns": [{"messages": []}]},
    )
    a, b = aiperf_dag.read(path)
    assert (a.id, b.id) == ("a", "b")
    assert [c.id for c in a.calls] == ["a:0", "c:0", "a:1"]
    assert a.call("a:1").parents == (Edge("a:0", "end", 0.0),)  # not joined with c
    assert a.call("c:0").prompt == (PromptOf("a:0"), Output("a:0"))


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        (['{"session_id": "a", "turns": [{"messages": []}]}', '{"session_id": "b", "turns": [}'], ":2: not JSON"),
        (
            [{"session_id": "a", "turns": [{"messages": []}]}, {"session_id": "a", "turns": [{"messages": []}]}],
            ":2: session_id 'a' already on line 1",
        ),
        ([{"session_id": "a", "turns": []}], ":1: 'a' has no turns"),
        ([{"session_id": "a", "turns": [{"messages": [{"content": "x"}]}]}], ":1: 'a' turn 0: messages must be"),
        ([{"session_id": "a", "turns": [{"messages": [], "max_tokens": 0}]}], ":1: 'a' turn 0: max_tokens 0"),
        ([{"session_id": "a", "turns": [{"messages": [], "delay": -1}]}], ":1: 'a' turn 0: delay -1"),
        ([{"session_id": "a", "turns": [{"messages": [], "spawns": ["zz"]}]}], ":1: 'a' names conversation 'zz'"),
        (
            [
                {"session_id": "a", "turns": [{"messages": [], "spawns": [{"children": ["b"], "join_at": 1}]}]},
                {"session_id": "b", "turns": [{"messages": []}]},
            ],
            ":1: 'a' turn 0: join_at 1 outside turns 1..0",
        ),
        (
            [
                {"session_id": "a", "turns": [{"messages": [], "forks": ["b"]}, {"messages": []}]},
                {"session_id": "b", "turns": [{"messages": []}]},
            ],
            ":1: 'a' turn 0 forks 'b' before its last turn",
        ),
        (
            [
                {"session_id": "a", "turns": [{"messages": [], "spawns": ["b"]}]},
                {"session_id": "b", "turns": [{"messages": [], "spawns": ["a"]}]},
            ],
            "conversations in a cycle: a -> b -> a",
        ),
        (
            [{"session_id": "o", "orchestrator": True, "spawns": ["a"], "turns": []}],
            ":1: 'o' is an orchestrator conversation",
        ),
    ],
)
def test_what_aiperf_refuses_is_bad_input_naming_the_line(tmp_path, lines, says):
    path = _write(tmp_path, *lines)
    with pytest.raises(BadInput) as err:
        aiperf_dag.read(path)
    assert says in str(err.value) and str(path) in str(err.value)


def test_looks_like_a_conversation_line_and_not_a_weka_session():
    assert aiperf_dag.looks_like({"session_id": "s", "turns": [{"messages": []}]})
    assert not aiperf_dag.looks_like({"session_id": "s", "turns": []})
    assert not aiperf_dag.looks_like({"id": "t", "block_size": 64, "requests": []})
    assert not aiperf_dag.looks_like('{"session_id": "s"}')


WEKA = Path(__file__).parents[2] / "fixtures" / "programs" / "weka"


@pytest.mark.parametrize("name", sorted(p.name for p in AIPERF.glob("*.dag.jsonl")))
def test_detection_picks_the_dag_reader_for_each_fixture(name):
    path = AIPERF / name
    assert detect(path) is aiperf_dag
    assert read_programs(path) == aiperf_dag.read(path)


@pytest.mark.parametrize("name", sorted(p.name for p in WEKA.glob("*.json")))
def test_a_weka_trace_is_not_taken_for_a_dag_file(name):
    assert detect(WEKA / name) is weka
    assert not any(aiperf_dag.looks_like(h) for h in _head(WEKA / name))
