"""Records: what one request did, derived per-request figures from raw times, and the JSON line
a record is written as (and read back from, including lines of older and newer versions)."""

import hashlib
import json
from array import array
from pathlib import Path

import pytest

from tokenbench.records import (
    ChunkEnds,
    Grade,
    Group,
    HttpPhases,
    ImageInput,
    JoinKey,
    Outcome,
    OutputCheck,
    Pooling,
    ProgramCall,
    Reasoning,
    Request,
    RequestRecord,
    Served,
    ServerTiming,
    SessionTurn,
    Speculation,
    TokenSource,
    ToolUse,
    prompt_hash,
)

FIXTURE_RUNS = Path(__file__).resolve().parent / "fixtures" / "rundirs"


def _record(output_text: str | None = None, **fields) -> RequestRecord:
    base = dict(point=1, id=7, scheduled_s=1.0, sent_s=1.5, chunk_times_s=[2.0, 2.25, 2.5], end_s=2.5, closed_s=2.6)
    record = RequestRecord(**{**base, **fields})
    record.output_text = output_text  # carried, not a field of the line (RequestRecord._output_text)
    return record


def test_a_record_survives_its_json_line_unchanged():
    record = _record(
        outcome=Outcome.OK,
        status=200,
        output_tokens=3,
        output_tokens_source=TokenSource.SERVER,
        finish_reason="length",
        end_marker=True,
        server_timings={"eval_count": 3.0},
        output_text="abc",
    )
    line = json.dumps(record.to_json(keep_text=True))
    back = RequestRecord.from_json(json.loads(line))
    assert back == record
    assert type(back.chunk_times_s) is array and back.chunk_times_s.tolist() == [2.0, 2.25, 2.5]
    assert back.outcome is Outcome.OK and back.output_tokens_source is TokenSource.SERVER
    assert "output_text" not in record.to_json()  # text only when asked for
    assert "prompt_hash" not in record.to_json()  # the prompt's key goes with the text


def test_a_prompt_key_is_the_hash_of_its_text_whichever_api_sent_it():
    """--keep-text's prompt_hash: sha256 of the prompt's text, 16 hex digits; the same prompt as
    chat messages or a completions prompt keys alike, another prompt differently."""
    assert prompt_hash("hello") == "2cf24dba5fb0a30e"  # sha256("hello") = 2cf24dba5fb0a30e26e8...
    chat = Request(messages=({"role": "user", "content": "hello"},))
    assert chat.prompt_key() == Request(prompt="hello").prompt_key() == prompt_hash("hello")
    assert Request(prompt="hello!").prompt_key() != chat.prompt_key()


def test_a_records_line_written_by_orjson_from_its_fields_is_its_json():
    """the compiled client: to_line (orjson from the fields, its parts' flat) writes what to_json builds, key
    for key and in the same order; the carried text and tool calls are never in it."""
    record = _record(
        outcome=Outcome.OK,
        output_tokens=3,
        output_tokens_source=TokenSource.SERVER,
        server_timings={"cache_n": 24, "prompt_ms": 1.5},
        chunk_tokens=[1, 1, 1],
        output_text="abc",
        join_key=JoinKey(x_request_id="0af7"),
    )
    record.tool_messages = ({"role": "assistant"},)
    line = record.to_line()
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    data = json.loads(line)
    assert list(data.items()) == list(record.to_json().items())
    assert data["outcome"] == "ok" and data["chunk_tokens"] == [1, 1, 1] and data["chunk_times_s"] == [2.0, 2.25, 2.5]
    assert "output_text" not in data and "tool_messages" not in data and not any(k.startswith("_") for k in data)
    assert RequestRecord.from_json(data).output_text is None
    with pytest.raises(ValueError, match="cannot be written"):
        record.without_chunks().to_line()


def test_older_and_newer_record_lines_are_read():
    data = _record(outcome=Outcome.OK).to_json()
    del data["end_marker"]  # written before the field existed: an ok record then had its marker
    data["a_future_field"] = 1  # written by a later version: dropped
    back = RequestRecord.from_json(data)
    assert back.end_marker is True and back.outcome is Outcome.OK
    data["outcome"] = "stream_error"
    assert RequestRecord.from_json(data).end_marker is False
    assert data.pop("trace_row") is None  # written before replay: no trace row
    assert RequestRecord.from_json(data).trace_row is None
    replayed = RequestRecord(point=0, id=1, scheduled_s=0.0, trace_row=7)
    assert RequestRecord.from_json(json.loads(json.dumps(replayed.to_json()))).trace_row == 7


# Known answers, written by the flat RequestRecord (every fact a field of its own, before the
# parts): records.jsonl is a public interface, and a record written today must give the same line,
# byte for byte. EVERY_PART's line: a record with every part set (and every field of its own but
# the error), as no one request has them; NO_PART's: one with its defaults only.
EVERY_PART_LINE = (
    b'{"point":2,"id":41,"scheduled_s":10.0,"sent_s":10.002,"chunk_times_s":[10.25,10.5,10.75],"end_s":10.75,'
    b'"closed_s":10.8,"outcome":"ok","status":200,"error":null,"prompt_tokens":120,"output_tokens":3,'
    b'"output_tokens_source":"server","server_output_tokens":3,"client_output_tokens":3,"user":5,'
    b'"response_id":"chatcmpl-41","retries":1,"server_timings":{"prompt_n":120.0,"cache_n":96.0},'
    b'"finish_reason":"stop","end_marker":true,"dataset_prompt_tokens":118,"trace_row":7,"first_output_s":10.5,'
    b'"reasoning_chunks":1,"reasoning_tokens":4,"session_id":"conv-3","turn_index":2,"history_tokens":80,'
    b'"cached_prompt_tokens":96,"chunk_tokens":[1,1,1],"first_chunk_tokens":1,"worker":1,"inputs":2,"images":2,'
    b'"image_pixels":131072,"adapter":"lora-a","request_class":"short","tenant":"t1","priority":1,'
    b'"structured":"json_schema","output_parsed":true,"output_valid":false,"tool_calls":1,"tool_args_parsed":true,'
    b'"first_tool_call_s":10.75,"tool_call_chunks":1,"tool_args_tokens":6,'
    b'"traceparent":"00-0123456789abcdef0002000100000029-0123456700000029-01",'
    b'"x_request_id":"0123456789abcdef0002000100000029","http_start_s":10.001,"pool_wait_s":0.0,"conn_reused":false,'
    b'"connect_s":0.0005,"headers_sent_s":10.0015,"response_headers_s":10.2,"first_body_s":10.21,'
    b'"program_session":"p-3","program_id":"trace_0291","program_call":"1.17","program_depth":1,'
    b'"program_role":"subagent","program_start_s":9.0,"program_ready_s":10.0,"program_after":"1.16",'
    b'"program_anchor":"end","program_delay_s":0.003,"program_tool_s":0.003,"program_parents":["1.16"],'
    b'"program_prefix_tokens":90,"program_calls":32,"spec_steps":2,"spec_draft_tokens":6,"spec_accepted_tokens":3,'
    b'"spec_acceptance_length":2.5,"spec_acceptance_rate":0.5,"spec_tokens":3,"spec_accepted_histogram":[0,1,1,0],'
    b'"spec_step_accepted":[1,2],"spec_step_drafted":[3,3],"spec_from":"vllm","reported_queue_s":0.001,'
    b'"reported_prefill_s":0.2,"reported_ttft_s":0.201,"reported_decode_s":0.5,"reported_itl_s":0.25,'
    b'"reported_timing_from":"vllm","replica":"127.0.0.1:8001","replica_from":"header",'
    b'"grader":"numeric","graded":true,"correct":false,"graded_answer":"17"}\n'
)
NO_PART_LINE = (
    b'{"point":0,"id":1,"scheduled_s":0.5,"sent_s":null,"chunk_times_s":[],"end_s":null,"closed_s":null,'
    b'"outcome":"cancelled","status":null,"error":null,"prompt_tokens":null,"output_tokens":null,'
    b'"output_tokens_source":null,"server_output_tokens":null,"client_output_tokens":null,"user":null,'
    b'"response_id":null,"retries":0,"server_timings":null,"finish_reason":null,"end_marker":false,'
    b'"dataset_prompt_tokens":null,"trace_row":null,"first_output_s":null,"reasoning_chunks":0,'
    b'"reasoning_tokens":null,"session_id":null,"turn_index":null,"history_tokens":null,'
    b'"cached_prompt_tokens":null,"chunk_tokens":null,"first_chunk_tokens":null,"worker":null,"inputs":null,'
    b'"images":null,"image_pixels":null,"adapter":null,"request_class":null,"tenant":null,"priority":null,'
    b'"structured":null,"output_parsed":null,"output_valid":null,"tool_calls":null,"tool_args_parsed":null,'
    b'"first_tool_call_s":null,"tool_call_chunks":0,"tool_args_tokens":null,"traceparent":null,'
    b'"x_request_id":null,"http_start_s":null,"pool_wait_s":null,"conn_reused":null,"connect_s":null,'
    b'"headers_sent_s":null,"response_headers_s":null,"first_body_s":null,"program_session":null,'
    b'"program_id":null,"program_call":null,"program_depth":null,"program_role":null,"program_start_s":null,'
    b'"program_ready_s":null,"program_after":null,"program_anchor":null,"program_delay_s":null,'
    b'"program_tool_s":null,"program_parents":null,"program_prefix_tokens":null,"program_calls":null,'
    b'"spec_steps":null,"spec_draft_tokens":null,"spec_accepted_tokens":null,"spec_acceptance_length":null,'
    b'"spec_acceptance_rate":null,"spec_tokens":null,"spec_accepted_histogram":null,"spec_step_accepted":null,'
    b'"spec_step_drafted":null,"spec_from":null,"reported_queue_s":null,"reported_prefill_s":null,'
    b'"reported_ttft_s":null,"reported_decode_s":null,"reported_itl_s":null,"reported_timing_from":null,"replica":null,"replica_from":null,'
    b'"grader":null,"graded":null,"correct":null,"graded_answer":null}\n'
)
# tests/fixtures/rundirs' records.jsonl (tokenbench 0.2.1's lines) read back and written again by
# the flat RequestRecord: a sha256 of the lines
FIXTURE_LINES_SHA256 = {
    "0.2.1-sessions": "cf8180a3e521906bdea832b96c47cf22cdd8e303c576e5db61b298a9342c7035",  # + program_*, spec_*, reported_*, replica*, grade
    "0.2.1-workers": "d3b5260330f39b99b402f5b33e7689a8b2ef4e0920ca9a7444f0cfbc50748d13",
}


def _every_part() -> RequestRecord:
    record = RequestRecord(
        point=2,
        id=41,
        scheduled_s=10.0,
        sent_s=10.002,
        chunk_times_s=[10.25, 10.5, 10.75],
        end_s=10.75,
        closed_s=10.8,
        outcome=Outcome.OK,
        status=200,
        prompt_tokens=120,
        output_tokens=3,
        output_tokens_source=TokenSource.SERVER,
        server_output_tokens=3,
        client_output_tokens=3,
        user=5,
        response_id="chatcmpl-41",
        retries=1,
        server_timings={"prompt_n": 120.0, "cache_n": 96.0},
        finish_reason="stop",
        end_marker=True,
        dataset_prompt_tokens=118,
        trace_row=7,
        reasoning=Reasoning(first_output_s=10.5, reasoning_chunks=1, reasoning_tokens=4),
        session=SessionTurn(session_id="conv-3", turn_index=2, history_tokens=80),
        cached_prompt_tokens=96,
        chunk_tokens=[1, 1, 1],
        first_chunk_tokens=1,
        worker=1,
        pooling=Pooling(inputs=2),
        image_input=ImageInput(images=2, image_pixels=131072),
        group=Group(adapter="lora-a", request_class="short", tenant="t1", priority=1),
        output_check=OutputCheck(structured="json_schema", output_parsed=True, output_valid=False),
        tool_use=ToolUse(
            tool_calls=1, tool_args_parsed=True, first_tool_call_s=10.75, tool_call_chunks=1, tool_args_tokens=6
        ),
        join_key=JoinKey(
            traceparent="00-0123456789abcdef0002000100000029-0123456700000029-01",
            x_request_id="0123456789abcdef0002000100000029",
        ),
        phases=HttpPhases(
            http_start_s=10.001,
            pool_wait_s=0.0,
            conn_reused=False,
            connect_s=0.0005,
            headers_sent_s=10.0015,
            response_headers_s=10.2,
            first_body_s=10.21,
        ),
        program=ProgramCall(
            program_session="p-3",
            program_id="trace_0291",
            program_call="1.17",
            program_depth=1,
            program_role="subagent",
            program_start_s=9.0,
            program_ready_s=10.0,
            program_after="1.16",
            program_anchor="end",
            program_delay_s=0.003,
            program_tool_s=0.003,
            program_parents=("1.16",),
            program_prefix_tokens=90,
            program_calls=32,
        ),
        speculation=Speculation(
            spec_steps=2,
            spec_draft_tokens=6,
            spec_accepted_tokens=3,
            spec_acceptance_length=2.5,
            spec_acceptance_rate=0.5,
            spec_tokens=3,
            spec_accepted_histogram=(0, 1, 1, 0),
            spec_step_accepted=(1, 2),
            spec_step_drafted=(3, 3),
            spec_from="vllm",
        ),
        server_timing=ServerTiming(
            reported_queue_s=0.001,
            reported_prefill_s=0.2,
            reported_ttft_s=0.201,
            reported_decode_s=0.5,
            reported_itl_s=0.25,
            reported_timing_from="vllm",
        ),
        served=Served(replica="127.0.0.1:8001", replica_from="header"),
        grade=Grade(grader="numeric", graded=True, correct=False, graded_answer="17"),
    )
    record.output_text = "a reply"
    record.prompt_hash = "5a1d5c6bd1b8d0e3"
    return record


def test_a_record_with_every_part_writes_the_flat_records_line():
    """records.jsonl keeps its keys and their order: a part's fields are written flat in its place,
    and the line reads back to the same record (its parts again)."""
    record = _every_part()
    assert record.to_line() == EVERY_PART_LINE
    assert json.dumps(record.to_json(), separators=(",", ":")).encode() + b"\n" == EVERY_PART_LINE
    assert list(record.to_json(keep_text=True)) == [*json.loads(EVERY_PART_LINE), "output_text", "prompt_hash"]
    back = RequestRecord.from_json(json.loads(json.dumps(record.to_json(keep_text=True))))
    assert back == record and back.output_text == "a reply" and back.prompt_hash == "5a1d5c6bd1b8d0e3"
    assert RequestRecord.from_json(json.loads(EVERY_PART_LINE)).to_line() == EVERY_PART_LINE


def test_an_absent_part_writes_its_defaults_and_reads_back_absent():
    """None where its concept does not apply: the line has its keys all the same, with the values a
    flat record had by default (0 chunks of reasoning, 0 of tool calls, null otherwise)."""
    record = RequestRecord(point=0, id=1, scheduled_s=0.5)
    assert record.to_line() == NO_PART_LINE
    assert json.dumps(record.to_json(), separators=(",", ":")).encode() + b"\n" == NO_PART_LINE
    assert RequestRecord.from_json(json.loads(NO_PART_LINE)) == record
    # one part alone: the others absent, as they were written
    only = RequestRecord(point=0, id=1, scheduled_s=0.5, tool_use=ToolUse(tool_calls=0))
    line = json.loads(only.to_line())
    assert line["tool_calls"] == 0 and line["tool_call_chunks"] == 0 and line["first_output_s"] is None
    back = RequestRecord.from_json(line)
    assert back == only and back.tool_use == ToolUse(tool_calls=0) and back.reasoning is None


def test_older_lines_read_back_to_the_same_values():
    """tokenbench 0.2.1's lines (tests/fixtures/rundirs: without the keys added since) read back and
    written again give what the flat record gave, and every value of theirs as written."""
    for name, digest in FIXTURE_LINES_SHA256.items():
        lines = [json.loads(line) for line in (FIXTURE_RUNS / name / "records.jsonl").read_text().splitlines()]
        records = [RequestRecord.from_json(line) for line in lines]
        assert hashlib.sha256(b"".join(r.to_line() for r in records)).hexdigest() == digest, name
        for line, record in zip(lines, records, strict=True):
            assert record.to_json().items() >= line.items()
        sessions = [r.session for r in records if r.session is not None]
        assert (len(sessions) == len(records)) is (name == "0.2.1-sessions")


def test_per_request_figures_from_the_raw_times():
    record = _record(outcome=Outcome.OK, output_tokens=3)
    assert record.ttft_s == pytest.approx(0.5)
    assert record.e2e_s == pytest.approx(1.0)
    assert record.queue_s == record.wait_s == pytest.approx(0.5)
    assert record.tpot_s == pytest.approx(0.25)  # (1.0 - 0.5) / (3 - 1)


def test_no_data_is_none_never_zero():
    unsent = RequestRecord(point=0, id=0, scheduled_s=1.0)
    assert (unsent.ttft_s, unsent.e2e_s, unsent.queue_s, unsent.wait_s, unsent.tpot_s) == (None,) * 5
    one_chunk = _record(chunk_times_s=[2.0], end_s=2.0, output_tokens=5)
    assert one_chunk.tpot_s is None  # all content at one instant: no decode time to divide
    assert _record(output_tokens=1).tpot_s is None
    # a request that never got a slot: its wait until the point gave up is a lower bound
    never = RequestRecord(point=0, id=0, scheduled_s=1.0, closed_s=4.0, outcome=Outcome.NOT_SENT)
    assert never.wait_s == pytest.approx(3.0) and never.queue_s is None


def test_an_eos_the_server_counted_but_never_streamed_is_not_a_streamed_token():
    eos = _record(finish_reason="stop", output_tokens=4, output_tokens_source=TokenSource.SERVER)
    assert eos.eos_unstreamed and eos.streamed_tokens == 3 and eos.tpot_s == pytest.approx(0.25)
    by_chunks = _record(finish_reason="stop", output_tokens=4, output_tokens_source=TokenSource.CHUNKS)
    assert not by_chunks.eos_unstreamed and by_chunks.streamed_tokens == 4
    at_length = _record(finish_reason="length", output_tokens=4, output_tokens_source=TokenSource.SERVER)
    assert not at_length.eos_unstreamed


def test_chunk_ends_keep_the_count_the_first_and_the_last_only():
    record = _record(outcome=Outcome.OK, output_tokens=3, output_text="x", server_timings={"a": 1.0})
    slim = record.without_chunks()
    ends = slim.chunk_times_s
    assert isinstance(ends, ChunkEnds)
    assert (len(ends), ends[0], ends[-1], ends[2], ends[-3]) == (3, 2.0, 2.5, 2.5, 2.0)
    with pytest.raises(IndexError, match="only the first and last"):
        ends[1]
    assert slim.output_text is None and slim.server_timings is None
    assert slim.ttft_s == record.ttft_s and slim.tpot_s == record.tpot_s
    with pytest.raises(ValueError, match="cannot be written"):
        slim.to_json()
    assert not ChunkEnds(array("d")) and len(ChunkEnds(array("d"))) == 0


def test_chunk_times_are_every_chunk_of_a_full_record_only():
    record = _record(outcome=Outcome.OK, output_tokens=3)
    assert record.chunk_times() is record.chunk_times_s
    assert record.chunk_times().tolist() == [2.0, 2.25, 2.5]
    with pytest.raises(ValueError, match="only the first and last"):
        record.without_chunks().chunk_times()


def test_a_request_is_a_prompt_or_messages_never_both():
    with pytest.raises(ValueError, match="exactly one"):
        Request()
    with pytest.raises(ValueError, match="exactly one"):
        Request(prompt="p", messages=({"role": "user", "content": "m"},))
    chat = Request(messages=({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}))
    assert chat.as_prompt_text() == "Be brief.\n\nHi"
    assert Request(prompt="Hi").as_messages() == [{"role": "user", "content": "Hi"}]


def test_chunk_tokens_are_a_compact_array_written_as_a_json_list():
    record = _record(outcome=Outcome.OK, chunk_tokens=[2, 1, 4], first_chunk_tokens=2)
    assert type(record.chunk_tokens) is array and record.chunk_tokens.typecode == "I"
    data = json.loads(json.dumps(record.to_json()))
    assert data["chunk_tokens"] == [2, 1, 4] and data["first_chunk_tokens"] == 2
    back = RequestRecord.from_json(data)
    assert back == record and back.chunk_tokens is not None and back.chunk_tokens.tolist() == [2, 1, 4]
    older = _record(outcome=Outcome.OK).to_json()
    del older["chunk_tokens"], older["first_chunk_tokens"]  # written before the fields existed
    assert RequestRecord.from_json(older).chunk_tokens is None
    summary = record.without_chunks()  # tallied: the counts go with the chunk times, the first stays
    assert summary.chunk_tokens is None and summary.first_chunk_tokens == 2
