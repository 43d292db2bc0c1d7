"""The Weka reader against its public files: real kv-cache-tester sessions (sub-agents nested,
inner times relative to the marker, a parent going on while a sub-agent runs) and AIPerf's
fixtures (times absolute; a sub-agent spawned while its parent's call ran: a start anchor).
Every number below is read off the files by hand."""

from pathlib import Path

import pytest

from tokenbench.datasets.programs import read_programs
from tokenbench.datasets.programs.model import Blocks, Edge, Output, PromptOf, critical_path_s
from tokenbench.errors import BadInput

WEKA = Path(__file__).parents[2] / "fixtures" / "programs" / "weka"


def _one(name: str):
    [program] = read_programs(WEKA / name)
    return program


def _edges(call):
    """(parent, anchor, delay, tool) of each edge, to the microsecond."""
    return [(e.parent, e.anchor, round(e.delay_s, 6), round(e.tool_s, 6)) for e in call.parents]


def _recorded(program):
    """Each call at its recorded time on the recorded server: (0, api_time, api_time)."""
    return {c.id: (0.0, c.recorded.api_s, c.recorded.api_s) for c in program.calls}


def test_a_subagent_fans_out_from_its_spawner_and_joins_the_next_call():
    p = _one("aiperf_subagent.json")
    assert p.id == "trace_sub_n2s1" and p.format == "weka"
    calls = {c.id: c for c in p.calls}
    assert list(calls) == ["0.0", "1.1", "1.2", "0.3"]
    root, sub1, sub2, last = calls.values()
    assert root.parents == () and root.role == "root" and root.max_tokens == 25
    assert root.prompt == (Blocks((1, 2), 180, 64, "trace_sub_n2s1"),)
    # inner t 1.2 >= the marker's 1.0: absolute; the spawner ended at 0.8
    assert _edges(sub1) == [("0.0", "end", 0.4, 0.0)] and sub1.role == "subagent" and sub1.depth == 1
    assert sub1.prompt == (Blocks((10, 11), 200, 64, "trace_sub_n2s1"),)  # a fresh context
    # 2.4 - (1.2 + 0.9); its prompt is sub1's, sub1's reply, then 260 - 200 - 30 new tokens
    assert _edges(sub2) == [("1.1", "end", 0.3, 0.0)]
    assert sub2.prompt == (PromptOf("1.1"), Output("1.1"), Blocks((12,), 30, 64, "trace_sub_n2s1"))
    # the sub-agent completed at 1.0 + 4.0 <= 6.0: the next call waits on its last call too
    assert _edges(last) == [("0.0", "end", 5.2, 0.0), ("1.2", "end", 2.5, 0.0)]
    assert last.prompt == (PromptOf("0.0"), Output("0.0"), Blocks((3, 4), 75, 64, "trace_sub_n2s1"))
    assert last.role == "follow_up" and last.depth == 0
    # the recording replayed at its own call times ends where it did: 6.0 + 1.3
    assert critical_path_s(p, _recorded(p)) == pytest.approx(7.3)


def test_a_subagent_spawned_while_its_parent_ran_waits_on_the_parents_start():
    p = _one("aiperf_start_anchor.json")
    calls = {c.id: c for c in p.calls}
    assert list(calls) == ["0.0", "1.1", "1.2", "0.3"]
    # the first call runs 0 - 8 s; the sub-agents' calls start at 2.5 and 5.0, while it runs
    assert calls["1.1"].parents == (Edge("0.0", "start", 2.5),)
    assert calls["1.2"].parents == (Edge("0.0", "start", 5.0),)
    # async_launched sub-agents are never joined; 256 - 128 - 200 < 0: no new tokens
    assert calls["0.3"].parents == (Edge("0.0", "end", 1.0),)
    assert calls["0.3"].prompt == (PromptOf("0.0"), Output("0.0"))
    assert critical_path_s(p, _recorded(p)) == pytest.approx(9.5)
    # with every wait halved: 0.0 ends at 8, 0.3 at 8 + 0.5 + 0.5
    assert critical_path_s(p, _recorded(p), time_scale=0.5) == pytest.approx(9.0)


def test_a_real_session_with_subagents_relative_times_and_a_parent_that_goes_on():
    p = _one("trace_0291.json")
    assert len(p.calls) == 32
    subagent = [c for c in p.calls if c.depth == 1]
    assert len(subagent) == 12 and all(c.role == "subagent" for c in subagent)
    first_sub = subagent[0]
    # inner t counts from the marker (1148.013): the first inner call waits 1148.013 - (1085 + 15.64)
    # after the call before the marker
    assert _edges(first_sub) == [("0.15", "end", round(1148.013 - 1100.64, 6), 0.0)]
    # agent_001 (1148.013 + 46.656 s) completed before the call at 1209; agent_002 (1180.553 +
    # 79.184 s) had not: the parent went on without it
    joined = [c for c in p.calls if len(c.parents) == 2]
    assert len(joined) == 1 and {e.parent for e in joined[0].parents} == {"0.15", subagent[4].id}
    # after_tool: the call's input was a tool result; its wait is the tool's
    after = [c for c in p.calls if c.role == "after_tool"]
    assert len(after) == 16 and all(c.parents[0].tool_s == c.parents[0].delay_s for c in after)
    # the recording's own length: the last call at 1363 s plus its 3.47 s
    assert critical_path_s(p, _recorded(p)) == pytest.approx(1366.47)
    # the file's own totals: parent and sub-agent output tokens
    assert sum(c.max_tokens for c in p.calls) == 12771 + 6733


def test_a_directory_reads_every_file_and_a_malformed_file_is_named(tmp_path):
    programs = read_programs(WEKA)  # every file, in name order (its README left out)
    assert [p.id for p in programs] == [
        "trace_start_anchor",
        "trace_sub_n2s1",
        "trace_0026",
        "trace_0277",
        "trace_0291",
        "play-a",  # weka-two-plays.jsonl: Dynamo's fixture, one session a line
        "play-b",
    ]
    bad = tmp_path / "bad.json"
    bad.write_text('{"id": "x", "block_size": 64, "requests": [{"t": 0, "type": "q", "in": 1, "out": 1}]}')
    with pytest.raises(BadInput, match="type 'q'"):
        read_programs(bad)
    with pytest.raises(BadInput, match="not an agent-trace format"):
        read_programs(Path(__file__))


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"target": {"api": "embeddings"}}, "not with --api embeddings"),
        ({"lora_mix": {"a": 1.0}}, "not with --dataset programs"),
        ({"dataset": {"unique_prefix": True}}, "--unique-prefix"),
        ({"dataset": {"path": None}}, "needs --dataset-path"),
    ],
)
def test_settings_that_cannot_apply_to_programs_are_refused(settings, error):
    from pydantic import ValidationError

    from tokenbench.config import RunConfig

    data = {
        "dataset": {"name": "programs", "path": str(WEKA)},
        "target": {"url": "http://127.0.0.1:1"},
        "loads": [{"kind": "users", "users": 1}],
        "stop": {"max_requests": 1},
    }
    for key, value in settings.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) and key in data else value
    with pytest.raises(ValidationError, match=error):
        RunConfig.model_validate(data)
