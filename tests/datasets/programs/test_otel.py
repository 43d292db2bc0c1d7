"""OTel GenAI traces read as programs, as inference-perf's otel_trace_replay reads them, checked by
hand against its test traces in tests/fixtures/programs/otel (parents found by reply matching and
the nearest earlier span that had ended, wait_ms capped at 15 s, shared/output/unique segments,
max_tokens), and OTel SDK span lines (Exgentic's otel_spans.jsonl layout) with tool calls and an
execute_tool span; bad input named; detection."""

import json
from pathlib import Path

import pytest

from tokenbench.datasets.programs import detect, otel, read_programs
from tokenbench.datasets.programs.model import Edge, Message, Output, PromptOf, critical_path_s
from tokenbench.errors import BadInput

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "programs"
TRACES = FIXTURES / "otel"


def _read(name: str):
    (program,) = read_programs(TRACES / name)
    return program


def _edges(call) -> list[tuple[str, float, float]]:
    return [(e.parent, round(e.delay_s, 6), round(e.tool_s, 6)) for e in call.parents]


def test_a_chain_reuses_each_prompt_and_reply():
    p = _read("simple/simple_chain.json")
    assert (p.id, p.start_s, p.format) == ("paris_conversation_chain", 0.0, "otel")
    first, second, third = p.calls
    assert (first.id, first.parents, first.role) == ("capital_question", (), "root")
    assert first.prompt == (Message("user", "What is the capital of France?"),)
    # 10:00:03.0 - the first's end at 10:00:02.5
    assert second.parents == (Edge("capital_question", "end", 0.5),)
    assert second.prompt == (
        PromptOf("capital_question"),
        Output("capital_question"),
        Message("user", "Tell me more about Paris landmarks."),
    )
    assert third.parents == (Edge("landmarks_question", "end", 1.0),)
    assert third.prompt[:2] == (PromptOf("landmarks_question"), Output("landmarks_question"))
    # no usage: the replies' lengths at 4 characters a token (151, 231 and 144 characters), not the
    # recorded cap (gen_ai.request.max_tokens 500)
    assert [c.max_tokens for c in p.calls] == [37, 57, 36]
    assert [c.role for c in p.calls] == ["root", "follow_up", "follow_up"]
    assert first.model == "gpt-4" and first.recorded.api_s == 2.5
    assert first.recorded.output_text.startswith("The capital of France is Paris.")
    assert _read("simple/simple_chain_alt.json").id == "paris_conversation_chain_COPY"


def test_parallel_calls_join_on_the_last_to_end():
    p = _read("advanced/parallel_requests.json")
    # span_002 (2.5-5.0 s) and span_003 (3.0-5.5) both follow span_001 (0-2.0) and use its reply;
    # span_004 (6.0) uses both replies: the delay is 6.0 - 5.5 on each edge
    assert _edges(p.call("span_002")) == [("span_001", 0.5, 0.0)]
    assert _edges(p.call("span_003")) == [("span_001", 1.0, 0.0)]
    assert _edges(p.call("span_004")) == [("span_002", 0.5, 0.0), ("span_003", 0.5, 0.0)]
    assert p.call("span_004").prompt == (
        PromptOf("span_002"),
        Output("span_002"),
        Message("user", "def process_list(items): return [x * 2 for x in items]"),
        Output("span_003"),
        Message("user", "Now write a fixed version of the calculate function."),
    )
    # each call 1 s (first token at 0.2): span_001 ends at 1.0; span_002 starts at 1.5 and ends at
    # 2.5, span_003 starts at 2.0 and ends at 3.0; span_004 starts at 3.0 + 0.5 and ends at 4.5;
    # span_005 starts at 5.0 and ends at 6.0
    assert critical_path_s(p, {c.id: (0.0, 0.2, 1.0) for c in p.calls}) == pytest.approx(6.0)


def test_a_fan_in_of_three_independent_questions():
    p = _read("advanced/fan_in_dependencies.json")
    # span_002 and span_003 share nothing with span_001 but wait on it: the nearest earlier span
    # that had ended (inference-perf's temporal edge)
    assert p.call("span_002").prompt == (Message("user", "What are the main features of JavaScript?"),)
    assert _edges(p.call("span_002")) == [("span_001", 0.5, 0.0)]
    last = p.call("span_004")
    assert _edges(last) == [("span_001", 1.0, 0.0), ("span_002", 1.0, 0.0), ("span_003", 1.0, 0.0)]
    assert [type(s).__name__ for s in last.prompt] == [
        "PromptOf",
        "Output",
        "Message",
        "Output",
        "Message",
        "Output",
        "Message",
    ]
    assert [s.call for s in last.prompt if isinstance(s, Output)] == ["span_001", "span_002", "span_003"]
    assert [c.max_tokens for c in p.calls] == [42, 49, 48, 100]


def test_a_reply_reused_by_a_later_call_is_an_edge_of_no_delay():
    p = _read("advanced/customer_support_escalation.json")
    # span_008 (26.0 s) quotes the replies of span_001, span_004 and span_005; its parents are
    # span_005 (its reply) and span_007 (ended 25.0), 1.0 s after span_007; span_001 and span_004,
    # ancestors of span_005, get edges of no delay
    final = p.call("span_008_final_coordination")
    assert _edges(final) == [
        ("span_005_customer_escalation", 1.0, 0.0),
        ("span_007_manager_resolution", 1.0, 0.0),
        ("span_001_initial_complaint", 0.0, 0.0),
        ("span_004_coordinator_synthesis", 0.0, 0.0),
    ]
    outputs = [s.call for s in final.prompt if isinstance(s, Output)]
    assert outputs == ["span_001_initial_complaint", "span_004_coordinator_synthesis", "span_005_customer_escalation"]
    # span_004 uses span_001's reply and waits on span_003 too (ended 6.5, span_004 starts 7.0)
    assert _edges(p.call("span_004_coordinator_synthesis")) == [
        ("span_001_initial_complaint", 0.5, 0.0),
        ("span_003_network_analysis", 0.5, 0.0),
    ]
    # each call 2 s (0.5 to the first token): span_001 ends at 2; span_002 (+1.0) ends at 5,
    # span_003 (+1.5) at 5.5; span_004 (span_003 + 0.5) starts at 6, ends at 8; span_005 (+5.0)
    # 13-15; span_006 16-18; span_007 19-21; span_008 (span_007 + 1.0) 22-24; span_009 25-27
    assert critical_path_s(p, {c.id: (0.0, 0.5, 2.0) for c in p.calls}) == pytest.approx(27.0)


def test_recorded_usage_and_output_messages():
    p = _read("advanced/prefix_sharing_example.json")
    # gen_ai.usage.completion_tokens, gen_ai.output.messages' text
    assert [c.max_tokens for c in p.calls] == [20, 15, 50, 60, 70, 55, 10]
    first = p.call("span_independent_1")
    assert (first.recorded.input_tokens, first.recorded.output_tokens) == (50, 20)
    assert first.recorded.output_text == "The capital of France is Paris."
    turn2 = p.call("span_conv_turn2")
    assert turn2.prompt == (
        PromptOf("span_conv_turn1"),
        Output("span_conv_turn1"),
        Message("user", "What is the time complexity for lookups?"),
    )
    # span_conv_turn1 shares nothing with span_independent_2 and waits 1.0 s after it all the same
    assert p.call("span_conv_turn1").prompt[0].role == "system"
    assert _edges(p.call("span_conv_turn1")) == [("span_independent_2", 1.0, 0.0)]


def test_every_inference_perf_trace_reads():
    counts = {
        p.relative_to(TRACES).as_posix(): len(_read(p.relative_to(TRACES).as_posix()).calls)
        for p in sorted(TRACES.rglob("*.json"))
    }
    assert counts == {
        "advanced/code_review_workflow.json": 15,
        "advanced/customer_support_escalation.json": 9,
        "advanced/fan_in_dependencies.json": 4,
        "advanced/multi_agent_research.json": 12,
        "advanced/parallel_requests.json": 5,
        "advanced/prefix_sharing_example.json": 7,
        "advanced/software_architecture_review.json": 15,
        "simple/simple_chain.json": 3,
        "simple/simple_chain_alt.json": 3,
    }
    for path in TRACES.rglob("*.json"):
        assert detect(path) is otel


def _span(sid: str, start: float, end: float, conv: str, name: str = "chat m", **attrs: object) -> dict[str, object]:
    """An OTel SDK span as ``span.to_json()`` writes it (times: seconds after midnight)."""

    def at(s: float) -> str:
        return f"2026-01-01T00:{int(s // 60):02d}:{s % 60:09.6f}Z"

    return {
        "name": name,
        "context": {"trace_id": "0xabc", "span_id": sid, "trace_state": "[]"},
        "kind": "SpanKind.CLIENT",
        "parent_id": None,
        "start_time": at(start),
        "end_time": at(end),
        "status": {"status_code": "UNSET"},
        "attributes": {"gen_ai.conversation.id": conv, **attrs},
        "events": [],
        "links": [],
        "resource": {"attributes": {"service.name": "agent"}, "schema_url": ""},
    }


def _sdk_spans() -> list[dict[str, object]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
    ask = [{"role": "system", "content": "S"}, {"role": "user", "content": "Find x."}]
    return [
        _span(
            "0xa",
            0.0,
            1.0,
            "conv-a",
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "m",
                "gen_ai.input.messages": json.dumps(ask),
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [{"type": "tool_call", "id": "call_1", "name": "search", "arguments": {"q": "x"}}],
                        }
                    ]
                ),
                "gen_ai.usage.output_tokens": 12,
            },
        ),
        _span("0xt", 1.2, 3.2, "conv-a", "execute_tool search", **{"gen_ai.operation.name": "execute_tool"}),
        _span("0xu", 2.0, 3.0, "conv-a", "execute_tool fetch"),  # beside 0xt: counted once
        _span(
            "0xb",
            3.5,
            4.5,
            "conv-a",
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(
                    [
                        *ask,
                        {"role": "assistant", "content": None, "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": "call_1", "content": "x is 4"},
                    ]
                ),
                "gen_ai.output.text": "x is 4.",
                "gen_ai.request.max_tokens": 256,
            },
        ),
        _span(
            "0xc",
            24.5,
            25.0,
            "conv-a",
            **{
                "gen_ai.input.messages": json.dumps([{"role": "user", "content": "Thanks"}]),
                "gen_ai.request.max_tokens": 64,
            },
        ),
        _span(
            "0xd",
            100.0,
            101.0,
            "conv-b",
            **{"gen_ai.operation.name": "chat", "gen_ai.input.messages": '[{"role": "developer", "content": "Hi"}]'},
        ),
    ]


def test_sdk_span_lines_with_a_tool_call(tmp_path):
    path = tmp_path / "otel_spans.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in _sdk_spans()))
    assert detect(path) is otel
    a, b = read_programs(path)
    assert (a.id, a.start_s, [c.id for c in a.calls]) == ("conv-a", 0.0, ["0xa", "0xb", "0xc"])
    assert (b.id, b.start_s) == ("conv-b", 100.0)
    # 0xb holds 0xa's tool call (by id) and its result: 3.5 s - 1.0 s, of it 2.0 s the tools' spans
    # (1.2-3.2 s, and 2.0-3.0 s beside it)
    after = a.call("0xb")
    assert _edges(after) == [("0xa", 2.5, 2.0)]
    assert after.prompt == (PromptOf("0xa"), Output("0xa"), Message("tool", "x is 4"))
    assert after.role == "after_tool"
    # usage, else the reply's length (7 characters: 1), else the cap, else inference-perf's 1000
    assert [c.max_tokens for c in a.calls] == [12, 1, 64]
    assert b.calls[0].max_tokens == 1000 and b.calls[0].prompt == (Message("system", "Hi"),)
    assert a.call("0xa").recorded.output_text == '<|tool_call|>search<|tool_args|>{"q": "x"}<|end|>'
    # 0xc starts 20 s after 0xb's end: inference-perf's cap holds it to 15 s (it has no chat
    # operation name: its name "chat m" makes it a chat span)
    assert _edges(a.call("0xc")) == [("0xb", 15.0, 0.0)]
    # each call 1 s: 0xa ends at 1; 0xb starts at 3.5 and ends at 4.5; 0xc at 19.5-20.5
    assert critical_path_s(a, {c.id: (0.0, 0.1, 1.0) for c in a.calls}) == pytest.approx(20.5)


def test_indented_sdk_spans_read_when_named(tmp_path):
    path = tmp_path / "otel_spans.jsonl"
    path.write_text("".join(json.dumps(s, indent=4) + "\n" for s in _sdk_spans()))
    assert [len(p.calls) for p in read_programs(path, "otel")] == [3, 1]


def test_bad_traces_name_the_file_and_span(tmp_path):
    lines = tmp_path / "spans.jsonl"
    lines.write_text(json.dumps(_sdk_spans()[0]) + "\n{broken\n")
    with pytest.raises(BadInput, match=rf"{lines}:2: not JSON"):
        read_programs(lines, "otel")
    trace = json.loads((TRACES / "simple" / "simple_chain.json").read_text())
    trace["spans"][1]["attributes"]["gen_ai.input.messages"] = "[{not json"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(trace))
    with pytest.raises(BadInput, match=r"span 1 \(landmarks_question\): gen_ai.input.messages is not JSON"):
        read_programs(bad)
    trace["spans"][1]["attributes"]["gen_ai.input.messages"] = '[{"content": "no role"}]'
    bad.write_text(json.dumps(trace))
    with pytest.raises(BadInput, match=r"not a message with a role"):
        read_programs(bad)
    trace["spans"][1]["start_time"] = "yesterday"
    bad.write_text(json.dumps(trace))
    with pytest.raises(BadInput, match=r"start_time 'yesterday' is not an ISO-8601 time"):
        read_programs(bad)
    empty = tmp_path / "empty.json"
    empty.write_text('{"trace_id": "t", "spans": []}')
    with pytest.raises(BadInput, match=r"no chat span"):
        read_programs(empty)
