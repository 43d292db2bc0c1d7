"""TraceLab's round trace and replay CSVs read as programs, checked by hand against the upstream
files in tests/fixtures/programs/tracelab: sessions, the chain's delays and tool time, which
prompt each round reuses (as TraceLab's replay runner builds it), max_tokens, roles, and the
critical path for chosen call times; bad rows named by file and line; detection."""

from pathlib import Path

import pytest

from tokenbench.datasets.programs import read_programs
from tokenbench.datasets.programs.model import Blocks, Edge, Output, PromptOf, critical_path_s
from tokenbench.errors import BadInput

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "programs"
ROUNDS = FIXTURES / "tracelab" / "round_trace.jsonl"
CLAUDE = "claude:92ee5b8a-429c-e80b-5db6-5381512f4697"
CODEX = "codex:a611041f-625d-6fad-5e59-845850dc6543"


def _blocks(first: int, tokens: int, scope: str, role: str = "user") -> Blocks:
    return Blocks(tuple(range(first, first + -(-tokens // 64))), tokens, 64, scope, role)


def _edges(call) -> list[tuple[str, str, float, float]]:
    """A call's edges, times to the microsecond (the trace's are milliseconds)."""
    return [(e.parent, e.anchor, round(e.delay_s, 6), round(e.tool_s, 6)) for e in call.parents]


def _tokens(program, call_id: str) -> int:
    """A call's prompt tokens, its reused prompts and replies (at their recorded length) counted in."""
    total = 0
    for s in program.call(call_id).prompt:
        if isinstance(s, PromptOf):
            total += _tokens(program, s.call)
        elif isinstance(s, Output):
            total += program.call(s.call).recorded.output_tokens
        else:
            total += s.tokens
    return total


def test_the_round_trace_is_two_sessions_started_on_the_files_clock():
    claude, codex = read_programs(ROUNDS)
    assert (claude.id, len(claude.calls), claude.format) == (CLAUDE, 10, "tracelab")
    assert (codex.id, len(codex.calls)) == (CODEX, 9)
    # Codex's first event 2026-03-21T10:05:59.328Z is the file's earliest; Claude's first,
    # 2026-06-01T05:40:20.151Z, is 72 days (6,220,800 s) less 4:25:39.177 (15,939.177 s) later.
    assert codex.start_s == 0.0
    assert claude.start_s == pytest.approx(6_204_860.823, abs=1e-3)


def test_a_claude_round_waits_on_the_last_for_its_tools_or_its_person():
    claude = read_programs(ROUNDS)[0]
    first = claude.call("0")
    assert (first.parents, first.role, first.max_tokens, first.model) == ((), "root", 931, "claude-opus-4-8")
    # round 0 ran from its user message (05:40:20.151) to its last tool call (05:40:31.647)
    assert first.recorded.api_s == pytest.approx(11.496)
    # round 0's tools: Bash 860 ms + WebSearch 19,291 ms, summed as TraceLab's exporter sums them
    assert _edges(claude.call("1")) == [("0", "end", 20.151, 20.151)]
    assert claude.call("1").role == "after_tool"
    assert claude.call("3").parents[0].delay_s == pytest.approx(21.467)  # round 2's Write
    # round 4 ran no tool; round 5 is the person's message at 05:42:43.333, 19.913 s after round 4's
    # last event (05:42:23.420): think time, no tool time
    assert _edges(claude.call("5")) == [("4", "end", 19.913, 0.0)]
    assert claude.call("5").role == "follow_up"
    assert [c.max_tokens for c in claude.calls] == [931, 1016, 2475, 117, 1275, 273, 232, 2162, 90, 852]


def test_a_claude_round_is_the_last_prompt_its_reply_and_what_is_new():
    claude = read_programs(ROUNDS)[0]
    # round 0: the 27,217 cached tokens (the harness's system prompt and tools, cached by an earlier
    # session: shared by every Claude session) and 5,055 of its own
    assert claude.call("0").prompt == (_blocks(0, 27217, "tracelab:claude", "system"), _blocks(0, 5055, CLAUDE))
    # round 1: 35,740 tokens = round 0's prompt (32,272) + its reply (931) + 2,537 new (tool results),
    # though Claude's cache read only 29,380 of them (prefix_tokens)
    assert claude.call("1").prompt == (PromptOf("0"), Output("0"), _blocks(79, 2537, CLAUDE, "tool"))
    # round 5 (a person's message): 42,876 - 41,589 - 1,275 = 12 new tokens
    assert claude.call("5").prompt == (PromptOf("4"), Output("4"), _blocks(155, 12, CLAUDE))
    assert [_tokens(claude, c.id) for c in claude.calls] == [c.recorded.input_tokens for c in claude.calls]


def test_a_codex_turn_that_drops_reasoning_reuses_the_recorded_cache_hit():
    codex = read_programs(ROUNDS)[1]
    system = _blocks(0, 6912, "tracelab:codex", "system")
    assert codex.call("0").prompt == (system, _blocks(0, 2412, CODEX))
    assert codex.call("1").prompt == (PromptOf("0"), Output("0"), _blocks(38, 149, CODEX, "tool"))
    # round 5 (a new turn): 10,436 tokens, fewer than round 4's prompt and reply (10,472 + 294): the
    # turn dropped turn 1's reasoning. Its recorded cache hit, 9,216 tokens, is the head of round
    # 0's prompt (the runner's context[:prefix_len]); then its 1,220 new tokens.
    assert codex.call("5").prompt == (system, _blocks(0, 2304, CODEX), _blocks(45, 1220, CODEX))
    assert _edges(codex.call("5")) == [("4", "end", 6.333, 0.0)]  # 10:06:23.374 -> 10:06:29.707
    # round 7 (turn 3) reuses 10,368 tokens: the head of round 5's prompt, its new blocks cut at 1,152
    assert codex.call("7").prompt == (
        system,
        _blocks(0, 2304, CODEX),
        _blocks(45, 1152, CODEX),
        _blocks(80, 1359, CODEX),
    )
    assert [_tokens(codex, c.id) for c in codex.calls] == [c.recorded.input_tokens for c in codex.calls]
    assert [c.role for c in codex.calls] == ["root"] + ["after_tool"] * 4 + ["follow_up", "after_tool"] * 2


def test_the_codex_sessions_critical_path():
    codex = read_programs(ROUNDS)[1]
    # every call 1 s (first token at 0.5): 9 calls = 9 s, plus the delays: tools 1.322 (67 + 79 +
    # 1,176 ms), 5.002, 0.008, 0.267 (91 + 176), the person 6.333, tools 0.119, the person 18.362,
    # tools 0.058 = 31.471 s: 40.471 s
    assert critical_path_s(codex, {c.id: (0.0, 0.5, 1.0) for c in codex.calls}) == pytest.approx(40.471)


def test_the_replay_examples_as_the_runner_builds_them():
    path = FIXTURES / "tracelab" / "multi_session_example.csv"
    s0, s1, s2 = read_programs(path)
    assert [(p.id, p.start_s, len(p.calls), p.format) for p in (s0, s1, s2)] == [
        ("0", 0.0, 3, "tracelab-csv"),
        ("1", 0.2, 2, "tracelab-csv"),
        ("2", 0.5, 3, "tracelab-csv"),
    ]
    scope = "multi_session_example.csv:0"
    assert s0.call("0").prompt == (_blocks(0, 512, scope),)
    # prefix_len 576 = round 0's 512 + its 64-token reply: then 128 new
    assert s0.call("1").prompt == (PromptOf("0"), Output("0"), _blocks(8, 128, scope, "tool"))
    assert s0.call("1").parents == (Edge("0", "end", 0.1, 0.1),)
    assert [c.max_tokens for c in s0.calls] == [64, 64, 64]
    assert [c.role for c in s0.calls] == ["root", "after_tool", "after_tool"]
    # session 2's round 2: prefix_len 784 is round 1's prompt (664 + 120), not its reply
    assert s2.call("2").prompt == (PromptOf("1"), _blocks(12, 80, "multi_session_example.csv:2", "tool"))
    # each call 0.3 s: round 0 ends at 0.3, round 1 starts 0.05 later and ends at 0.65, round 2
    # starts at 0.7 and ends at 1.0
    assert critical_path_s(s2, {c.id: (0.0, 0.1, 0.3) for c in s2.calls}) == pytest.approx(1.0)


def test_the_large_example_is_cumulative():
    programs = read_programs(FIXTURES / "tracelab" / "multi_session_large.csv")
    assert (len(programs), sum(len(p.calls) for p in programs)) == (48, 303)
    assert programs[0].start_s == 0.0 and programs[1].start_s == pytest.approx(0.276)  # 393 - 117 ms
    # "each round's prefix_len equals the prior round's full context" (replay/README.md)
    for p in programs:
        for i, c in enumerate(p.calls[1:], 1):
            assert c.prompt[:2] == (PromptOf(str(i - 1)), Output(str(i - 1)))


def test_a_prefix_short_of_the_last_prompt_is_its_head():
    (p,) = read_programs(FIXTURES / "tracelab" / "session_workload_example.csv")
    scope = "session_workload_example.csv:0"
    assert (p.start_s, len(p.calls)) == (0.0, 11)  # no arrival_time column: 0
    assert p.call("0").prompt == (_blocks(0, 12461 + 5875, scope),)
    # prefix_len 18,333 stops 3 tokens short of round 0's 18,336-token prompt: its head, no reply
    assert p.call("1").prompt == (_blocks(0, 18333, scope), _blocks(287, 13570, scope, "tool"))
    assert p.call("1").parents == (Edge("0", "end", 0.182, 0.182),)
    assert p.call("1").max_tokens == 15950
    # round 10 (after round 9's wait of 0) goes back to 48,060 tokens, the head of round 3's prompt
    last = p.call("10")
    assert [b.tokens for b in last.prompt] == [18333, 13569, 16158, 9844]
    assert (last.role, last.parents) == ("follow_up", (Edge("9", "end", 0.0, 0.0),))


def test_detection_picks_each_format(tmp_path):
    assert {p.format for p in read_programs(ROUNDS)} == {"tracelab"}
    for name in ("multi_session_example", "multi_session_large", "session_workload_example"):
        assert {p.format for p in read_programs(FIXTURES / "tracelab" / f"{name}.csv")} == {"tracelab-csv"}
    for weka in sorted((FIXTURES / "weka").glob("*.json")):
        assert {p.format for p in read_programs(weka)} == {"weka"}
    # the exporter's canonical header (artifacts/trace_facts/csv_export): id, other column order
    exported = tmp_path / "coding_trace.csv"
    exported.write_text(
        "id,input_len,output_len,arrival_time,round_idx,tool_wait_after_ms,prefix_len\n"
        "0,100,10,0.000000,0,250.000000,0\n0,20,5,0.000000,1,0.000000,110\n"
    )
    (p,) = read_programs(exported)
    assert p.format == "tracelab-csv"
    assert p.call("1").prompt == (PromptOf("0"), Output("0"), _blocks(2, 20, "coding_trace.csv:0", "tool"))
    assert p.call("1").parents == (Edge("0", "end", 0.25, 0.25),)


def test_bad_rounds_name_the_file_and_line(tmp_path):
    first = ROUNDS.read_text().splitlines()[0]
    broken = tmp_path / "rounds.jsonl"
    broken.write_text(first + "\n{not json\n")
    with pytest.raises(BadInput, match=rf"{broken}:2: not JSON"):
        read_programs(broken, "tracelab")
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"session_id": "s", "round_index": 0, "input_tokens_total": 5}\n')
    with pytest.raises(BadInput, match=rf"{missing}:1: no output_tokens"):
        read_programs(missing)
    no_column = tmp_path / "no_wait.csv"
    no_column.write_text("session_id,round_idx,prefix_len,input_len,output_len\n0,0,0,10,5\n")
    with pytest.raises(BadInput, match=r"no tool_wait_after_ms column"):
        read_programs(no_column, "tracelab-csv")
    bad_value = tmp_path / "bad.csv"
    bad_value.write_text(
        "session_id,round_idx,prefix_len,input_len,output_len,tool_wait_after_ms\n0,0,0,10,5,0\n0,1,15,x,5,0\n"
    )
    with pytest.raises(BadInput, match=rf"{bad_value}:3: input_len 'x' is not a count"):
        read_programs(bad_value)
