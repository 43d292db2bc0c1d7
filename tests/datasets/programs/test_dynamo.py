"""Dynamo's Agentic Mooncake rows read into programs: known answers worked by hand from the
hand-made fixtures (tests/fixtures/programs/dynamo/README.md says what each number is), Dynamo's
Weka-format test file, and the rows refused."""

import json
from pathlib import Path

import pytest

from tokenbench.datasets.programs import _head, detect, dynamo, read_programs, weka
from tokenbench.datasets.programs.model import Blocks, Edge, Recorded, critical_path_s
from tokenbench.errors import BadInput

FIXTURES = Path(__file__).parents[2] / "fixtures" / "programs"
ROWS = FIXTURES / "dynamo" / "agentic-rows.jsonl"
V2 = FIXTURES / "dynamo" / "agentic-v2.jsonl"
HEADER = {"schema": "dynamo.agentic_mooncake", "version": 2, "block_size": 4, "hash_id_scope": "local", "source": {}}


def _write(tmp_path: Path, *rows: object) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_rows_are_one_program_a_set_of_sessions_their_waits_join():
    root, other = dynamo.read(ROWS)
    assert (root.id, root.start_s, root.format) == ("root", 0.0, "dynamo")
    assert (other.id, other.start_s) == ("other", 2.5)  # its first row's timestamp, 2,500 ms
    assert [c.id for c in root.calls] == ["parent-1", "child-1", "parent-2"]
    p1, child, p2 = root.calls
    assert p1.parents == () and p1.not_before_s == 0.0
    assert p1.prompt == (Blocks((0, 1), 1000, 512, "agentic-rows.jsonl"),)  # Mooncake's 512 tokens a hash id
    assert child.parents == (Edge("parent-1", "end", 0.1),)  # delay 100 ms; its timestamp is not read
    assert child.not_before_s == 0.0
    # delay 150 ms + tool wait 250 ms on each wait_for, the tool's part kept apart
    assert p2.parents == (Edge("parent-1", "end", 0.4, 0.25), Edge("child-1", "end", 0.4, 0.25))
    assert [(c.role, c.depth) for c in root.calls] == [("root", 0), ("subagent", 1), ("after_tool", 0)]
    assert [c.max_tokens for c in root.calls] == [40, 20, 30]
    assert p2.recorded == Recorded(input_tokens=1500, output_tokens=30)
    # parent-1 ends 1.0; child-1 1.1-1.6; parent-2 waits max(1.0, 1.6) + 0.4 = 2.0, ends 4.0
    times = {"parent-1": (0.0, 0.2, 1.0), "child-1": (0.0, 0.1, 0.5), "parent-2": (0.0, 0.1, 2.0)}
    assert critical_path_s(root, times) == pytest.approx(4.0)
    s1, s2 = other.calls
    assert s1.not_before_s == 0.0 and s2.parents == (Edge("solo-1", "end", 0.05),)
    assert s2.max_tokens == 1 and s2.recorded.output_tokens == 0  # a prefill-only row asks for one token
    assert critical_path_s(other, {"solo-1": (0, 0.1, 1.0), "solo-2": (0, 0.1, 1.0)}) == pytest.approx(2.05)


def test_versioned_rows_are_one_program_a_play_with_typed_dependencies():
    a, b = dynamo.read(V2)
    assert (a.id, a.start_s, b.id, b.start_s) == ("play-a", 0.0, "play-b", 0.0)
    # the file is in request_id order (a:r3 before a:r4 it waits on); the calls in an order they can run
    assert [c.id for c in a.calls] == ["a:r0", "a:r1", "a:r2", "a:r4", "a:r3"]
    c = {x.id: x for x in a.calls}
    assert c["a:r0"].parents == () and c["a:r0"].recorded == Recorded(200, 20, 0.5)
    assert c["a:r0"].prompt == (Blocks((1, 2, 3, 4), 200, 64, "play-a"),)  # the header's block size
    assert c["a:r1"].parents == (Edge("a:r0", "start", 0.3),)  # dispatch
    assert c["a:r2"].parents == (Edge("a:r0", "end", 1.0),)  # completion
    assert c["a:r4"].parents == (Edge("a:r1", "end", 0.2), Edge("a:r2", "end", 0.0))  # sequence, replay barrier
    assert c["a:r3"].parents == (Edge("a:r2", "end", 0.8), Edge("a:r4", "end", 0.1))  # sequence, join
    assert [c[i].not_before_s for i in ("a:r0", "a:r1", "a:r2", "a:r4", "a:r3")] == [0.0, 0.3, 1.5, 2.5, 4.0]
    assert [(x.role, x.depth) for x in a.calls] == [
        ("root", 0),
        ("subagent", 1),
        ("follow_up", 0),
        ("subagent", 1),
        ("follow_up", 0),
    ]
    assert {x.model for x in a.calls} == {"m"}
    # 1 s each: r0 0-1; r1 max(0.3, 0 + 0.3) = 0.3, ends 1.3; r2 max(1.5, 1 + 1) = 2.0, ends 3.0;
    # r4 max(2.5, 1.3 + 0.2, 3.0) = 3.0, ends 4.0; r3 max(4.0, 3.0 + 0.8, 4.0 + 0.1) = 4.1, ends 5.1
    assert critical_path_s(a, {x.id: (0.0, 0.1, 1.0) for x in a.calls}) == pytest.approx(5.1)
    # 0.1 s each: not_before holds every row to its recorded send; r3 at 4.0, ends 4.1
    assert critical_path_s(a, {x.id: (0.0, 0.05, 0.1) for x in a.calls}) == pytest.approx(4.1)
    (b0,) = b.calls
    assert b0.prompt == (Blocks((1,), 50, 64, "play-b"),) and b0.max_tokens == 1  # hash ids local to the play


def test_plays_follow_their_source_ordinal_and_a_row_may_omit_input_length(tmp_path):
    row = {"model": "m", "output_length": 2, "not_before_ms": 0, "session_id": "s"}
    path = _write(
        tmp_path,
        HEADER,
        {**row, "request_id": "x", "play_id": "later", "source_play_ordinal": 1, "hash_ids": [1, 2]},
        {**row, "request_id": "y", "play_id": "first", "source_play_ordinal": 0, "hash_ids": [1]},
    )
    first, later = dynamo.read(path)
    assert (first.id, later.id) == ("first", "later")
    assert later.calls[0].prompt == (Blocks((1, 2), 8, 4, "later"),)  # two whole blocks of 4


def test_dynamos_weka_file_is_weka_one_session_a_line():
    play_a, play_b = weka.read(FIXTURES / "weka" / "weka-two-plays.jsonl")
    assert (play_a.id, len(play_a.calls), play_b.id, len(play_b.calls)) == ("play-a", 2, "play-b", 1)
    assert play_a.calls[1].parents == (Edge("0.0", "start", 0.005),)  # the sub-agent began while its parent ran
    assert not dynamo.looks_like(json.loads((FIXTURES / "weka" / "weka-two-plays.jsonl").read_text().splitlines()[0]))


ROW = {"session_id": "s", "input_length": 4, "output_length": 1, "hash_ids": [1]}


@pytest.mark.parametrize(
    ("rows", "says"),
    [
        ([{**ROW, "request_id": "a", "timestamp": 0}, '{"request_id": "b", '], "rows.jsonl:2: not JSON"),
        (
            [{**ROW, "request_id": "a", "timestamp": 0}, {**ROW, "request_id": "a", "timestamp": 1}],
            ":2: request_id 'a' already on line 1",
        ),
        (
            [{**ROW, "request_id": "a", "timestamp": 0}, {**ROW, "request_id": "b", "wait_for": ["zz"]}],
            ":2: 'b' waits on 'zz'",
        ),
        ([{**ROW, "request_id": "a"}], ":1: a row without wait_for needs its timestamp"),
        ([{**ROW, "request_id": "a", "timestamp": 0, "delay": -5}], ":1: delay -5"),
        ([{**ROW, "request_id": "a", "timestamp": 0, "hash_ids": "1,2"}], ":1: hash_ids must be a list"),
        (
            [
                {**ROW, "request_id": "r", "timestamp": 0},
                {**ROW, "request_id": "a", "wait_for": ["b"]},
                {**ROW, "request_id": "b", "wait_for": ["a"]},
            ],
            ":2: 'a' waits on a cycle",
        ),
        ([{**HEADER, "version": 3}], ":1: dynamo.agentic_mooncake version 3"),
        (
            [
                HEADER,
                {
                    **ROW,
                    "request_id": "a",
                    "play_id": "p",
                    "not_before_ms": 0,
                    "dependencies": [{"request_id": "a", "trigger": "soon"}],
                },
            ],
            ":2: trigger 'soon'",
        ),
        (
            [
                HEADER,
                {**ROW, "request_id": "a", "play_id": "p", "not_before_ms": 0},
                {
                    **ROW,
                    "request_id": "b",
                    "play_id": "q",
                    "not_before_ms": 0,
                    "dependencies": [
                        {"request_id": "a", "trigger": "completion", "delay_ms": 0, "relation": "sequence"}
                    ],
                },
            ],
            ":3: 'b' waits on 'a' of another play",
        ),
    ],
)
def test_bad_rows_are_bad_input_naming_the_line(tmp_path, rows, says):
    path = _write(tmp_path, *rows)
    with pytest.raises(BadInput) as err:
        dynamo.read(path)
    assert says in str(err.value) and str(path) in str(err.value)


def test_looks_like_a_row_or_the_header():
    assert dynamo.looks_like({"request_id": "r", "hash_ids": [1], "input_length": 4})
    assert dynamo.looks_like(HEADER)
    assert not dynamo.looks_like({"timestamp": 0, "input_length": 4, "hash_ids": [1]})  # plain Mooncake
    assert not dynamo.looks_like({"session_id": "s", "turns": [{"messages": []}]})


@pytest.mark.parametrize("path", [ROWS, V2], ids=["rows", "v2"])
def test_detection_picks_the_dynamo_reader_for_each_fixture(path):
    assert detect(path) is dynamo
    assert read_programs(path) == dynamo.read(path)


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "weka").glob("*.json*")))
def test_a_weka_trace_is_not_taken_for_dynamo_rows(name):
    path = FIXTURES / "weka" / name
    assert detect(path) is weka
    assert not any(dynamo.looks_like(h) for h in _head(path))
