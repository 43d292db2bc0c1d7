"""clients/wire.py on hand-made payloads: what a Stream keeps (per-chunk tokens from cumulative
usage, reasoning apart from the answer, finish reasons and aborts, malformed and error payloads)
and the two framings (newline-delimited JSON split across reads, SSE payloads)."""

from __future__ import annotations

from array import array

from tokenbench.clients.wire import LineDecoder, SSEPayloads, Stream


def test_chunk_tokens_are_the_steps_of_the_cumulative_count():
    s = Stream()
    s.chunk_usage = [2, 3, 3, 7]
    steps, first = s.chunk_tokens()
    assert steps == array("I", [2, 1, 0, 4])
    assert first == 2


def test_chunk_tokens_without_a_count_on_some_chunk_keep_only_the_first():
    s = Stream()
    s.chunk_usage = [4, None, 6]
    assert s.chunk_tokens() == (None, 4)
    s.chunk_usage = [None, 5]
    assert s.chunk_tokens() == (None, None)


def test_chunk_tokens_of_a_count_that_goes_back_are_not_trusted():
    s = Stream()
    s.chunk_usage = [3, 5, 4]
    assert s.chunk_tokens() == (None, None)


def test_chunk_tokens_untracked_or_empty_are_none():
    s = Stream()
    assert s.chunk_tokens() == (None, None)  # not asked for
    s.chunk_usage = []
    assert s.chunk_tokens() == (None, None)  # asked for, no content chunk


def test_reasoning_is_a_chunk_kept_apart_from_the_answer():
    s = Stream()
    assert s.reasoning("think ") is True
    s.text.append("answer")
    s.first_output_chunk = 1
    assert s.reasoning("more ") is True  # reasoning after the answer began is still left out
    s.text.append("!")
    assert s.reasoning_chunks == 2
    assert "".join(s.text) == "think answermore !"
    assert s.answer_text() == "answer!"
    assert s.first_output_index(4) == 1


def test_first_output_index_without_reasoning_is_the_first_chunk():
    s = Stream()
    assert s.first_output_index(3) == 0
    assert s.first_output_index(0) is None  # no chunk at all
    s.reasoning("all reasoning")
    assert s.first_output_index(1) is None  # no output yet


def test_finish_marks_the_reply_complete():
    s = Stream()
    s.finish(None)
    s.finish("")
    s.finish("None")
    assert not s.done and s.finish_reason is None  # no reason given: not the end
    s.finish("length")
    assert s.done and s.finish_reason == "length" and not s.failed


def test_an_abort_fails_the_stream_whatever_came_before():
    s = Stream()
    s.text.append("partial")
    s.finish("abort")
    assert s.done and s.failed
    assert s.error == "the engine ended the request: finish_reason 'abort'"


def test_sglang_abort_object_reads_its_type():
    s = Stream()
    s.finish({"type": "abort", "message": "client disconnected"})
    assert s.finish_reason == "abort" and s.failed
    s = Stream()
    s.finish({"type": "stop", "matched": 2})
    assert s.finish_reason == "stop" and not s.failed


def test_fail_keeps_the_first_reason():
    s = Stream()
    assert s.fail("first") is False
    s.fail("second")
    assert s.failed and s.error == "first"


def test_json_object_reads_an_object():
    s = Stream()
    assert s.json_object(b'{"id": "x", "n": 1}') == {"id": "x", "n": 1}
    assert s.json_object(bytearray(b'{"a": []}')) == {"a": []}
    assert not s.failed


def test_json_object_fails_the_stream_on_what_is_not_an_object():
    s = Stream()
    assert s.json_object(b"{not json") is None
    assert s.failed and s.error == "malformed event (not JSON): b'{not json'"
    s = Stream()
    assert s.json_object(b"[1, 2]", unit="line") is None
    assert s.error == "malformed line (not an object): b'[1, 2]'"


def test_json_object_fails_on_the_servers_error_with_its_type():
    s = Stream()
    assert s.json_object(b'{"error": "out of memory", "error_type": "generation"}') is None
    assert s.error == "error event (generation): out of memory"
    s = Stream()
    assert s.json_object(b'{"error": {"message": "bad"}}') is None
    assert s.error == "error event: {'message': 'bad'}"


def test_json_object_error_text_is_cut():
    s = Stream()
    s.json_object(b'{"error": "' + b"x" * 900 + b'"}')
    assert s.error == "error event: " + "x" * 500


def test_line_decoder_joins_lines_split_across_reads():
    d = LineDecoder()
    assert d.feed_data(b'{"a":') == []
    assert d.feed_data(b' 1}\r\n\n{"b"') == [b'{"a": 1}']  # CR dropped, blank line skipped
    assert d.feed_data(b": 2}\n{") == [b'{"b": 2}']
    assert d.close_data() == [b"{"]  # an unterminated last line still counts
    assert d.close_data() == []


def test_line_decoder_close_without_a_tail_gives_nothing():
    d = LineDecoder()
    assert d.feed_data(b"one\ntwo\n") == [b"one", b"two"]
    assert d.close_data() == []


def test_sse_payloads_are_the_data_of_each_event():
    p = SSEPayloads()
    assert p.feed_data(b"data: 1\n\n: keep-alive\n\ndata: [DO") == [b"1"]
    assert p.feed_data(b"NE]\n\n") == [b"[DONE]"]
    assert p.close_data() == []
