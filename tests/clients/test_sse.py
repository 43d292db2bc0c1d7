"""The SSE decoder on hostile input: any split of the byte stream must give the same events."""

import json

import pytest

from tokenbench.clients.sse import SSEDecoder, SSEEvent


def decode_all(pieces: list[bytes]) -> list[SSEEvent]:
    dec = SSEDecoder()
    events = []
    for piece in pieces:
        events.extend(dec.feed(piece))
    return events + dec.close()


STREAM = (
    b": keep-alive comment\n\n"
    b'data: {"a": 1}\n\n'
    b"event: message\r\ndata: line one\r\ndata: line two\r\n\r\n"
    b"data:no-space\rid: 7\r\r"
    b"retry: 100\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    SSEEvent(b'{"a": 1}'),
    SSEEvent(b"line one\nline two", b"message"),
    SSEEvent(b"no-space"),
    SSEEvent(b"[DONE]"),
]


def test_whole_stream():
    assert decode_all([STREAM]) == EXPECTED


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 13])
def test_every_split_size_gives_the_same_events(size):
    pieces = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert decode_all(pieces) == EXPECTED


def test_every_single_split_point():
    for cut in range(len(STREAM) + 1):
        assert decode_all([STREAM[:cut], STREAM[cut:]]) == EXPECTED, cut


def test_crlf_split_between_reads_is_one_line_end():
    assert decode_all([b"data: x\r", b"\n\r", b"\n"]) == [SSEEvent(b"x")]


def test_large_event_across_many_reads_has_no_size_ceiling():
    payload = json.dumps({"choices": [{"delta": {"content": "y" * 3_000_000}}]}).encode()
    stream = b"data: " + payload + b"\n\n" + b"data: [DONE]\n\n"
    pieces = [stream[i : i + 65536] for i in range(0, len(stream), 65536)]
    events = decode_all(pieces)
    assert events == [SSEEvent(payload), SSEEvent(b"[DONE]")]


def test_final_event_without_blank_line_is_dispatched_at_close():
    assert decode_all([b"data: a\n\ndata: tail"]) == [SSEEvent(b"a"), SSEEvent(b"tail")]


def test_comment_only_and_empty_blocks_dispatch_nothing():
    assert decode_all([b":\n\n\n\n: ping\n\n\n"]) == []


def test_empty_data_line_is_an_empty_event():
    assert decode_all([b"data:\n\n"]) == [SSEEvent(b"")]


def test_binary_garbage_does_not_raise():
    garbage = bytes(range(256)) * 10
    decode_all([garbage])  # no exception; content is whatever the lines say
    assert decode_all([b"\xff\xfe\n\ndata: ok\n\n"]) == [SSEEvent(b"ok")]


def test_feed_data_gives_the_payloads_feed_gives_for_any_split():
    # the compiled client: feed_data's fast path (whole one-line "data: " events) and its fallback
    stream = b'data: {"a": 1}\n\ndata:  two spaces\n\ndata: [DONE]\n\n' + STREAM
    for size in (1, 7, 16, 17, len(stream)):
        pieces = [stream[i : i + size] for i in range(0, len(stream), size)]
        dec = SSEDecoder()
        got = [p for piece in pieces for p in dec.feed_data(piece)] + [e.data for e in dec.close()]
        assert got == [e.data for e in decode_all(pieces)]
    assert SSEDecoder().feed_data(b'data: {"a": 1}\n\ndata: [DONE]\n\n') == [b'{"a": 1}', b"[DONE]"]
    assert SSEDecoder().feed_data(b"data:  x\n\n") == [b" x"]  # one space dropped, not two
    assert SSEDecoder().feed_data(b": ping\n\ndata: y\n\n") == [b"y"]  # a comment: the full decoder
    # one event a read: the one-event path, and what it must leave to the others
    assert SSEDecoder().feed_data(b"data: z\n\n") == [b"z"]
    assert SSEDecoder().feed_data(b"data: a\rdata: b\n\n") == [b"a\nb"]  # a CR line end: the full decoder
    assert SSEDecoder().feed_data(b"event: x\n\n") == []  # no data line
    held = SSEDecoder()
    assert held.feed_data(b"data: p") == [] and held.feed_data(b"q\n\n") == [b"pq"]  # a held part first
