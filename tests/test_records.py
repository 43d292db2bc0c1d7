"""Records: what one request did, derived per-request figures from raw times, and the JSON line
a record is written as (and read back from, including lines of older and newer versions)."""

import json
from array import array

import pytest

from tokenbench.records import ChunkEnds, JoinKey, Outcome, Request, RequestRecord, TokenSource


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
