"""Trace files: each format read from small files written here, detection, every malformed row named
by file:line, BurstGPT's filters."""

import hashlib
import json
from pathlib import Path

import pytest

from tokenbench.datasets.traces import TraceError, TraceRow, detect_format, read_trace


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _mooncake_row(t_ms: float, inp: int, out: int, hashes: list[int]) -> dict[str, object]:
    return {"timestamp": t_ms, "input_length": inp, "output_length": out, "hash_ids": hashes}


AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:17:03.9799600,4808,10
2023-11-16 18:17:04.0319600,3180,8
2023-11-16 18:17:06.5000001,110,27
"""

BURSTGPT = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
45,ChatGPT,1087,0,1087,Conversation log
118,GPT-4,417,276,693,API log
118,GPT-4,1360,0,1360,API log
140,ChatGPT,1150,174,1324,API log
150,GPT-4,300,20,320,Conversation log
"""


# --- each format ---------------------------------------------------------------------------------


def test_mooncake_rows_in_seconds_on_the_traces_own_clock_with_hash_ids(tmp_path):
    path = _jsonl(
        tmp_path / "m.jsonl",
        [_mooncake_row(1000, 1024, 10, [1, 2]), _mooncake_row(3999, 513, 20, [1, 3]), _mooncake_row(4000, 1, 5, [9])],
    )
    trace = read_trace(path)
    assert trace.format == "mooncake" and trace.block_size == 512
    assert trace.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert trace.rows == (
        TraceRow(1, 1.0, 1024, 10, (1, 2)),
        TraceRow(2, 3.999, 513, 20, (1, 3)),
        TraceRow(3, 4.0, 1, 5, (9,)),
    )
    assert (trace.clock.kind, trace.clock.first_row_s) == ("trace", 1.0)  # a slice starts where it starts


def test_azure_timestamps_with_seven_fractional_digits_are_cut_to_microseconds(tmp_path):
    path = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    path.write_text(AZURE)
    trace = read_trace(path)
    assert trace.format == "azure" and trace.block_size is None
    assert [r.row for r in trace.rows] == [2, 3, 4]
    assert [r.timestamp_s for r in trace.rows] == pytest.approx([0.0, 0.052, 2.52004], abs=1e-9)
    assert [(r.input_tokens, r.output_tokens, r.hash_ids) for r in trace.rows] == [
        (4808, 10, ()),
        (3180, 8, ()),
        (110, 27, ()),
    ]


def test_azure_2025_header_with_num_images_and_utc_offsets(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text(
        "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n"
        "2025-01-01 10:00:00.5+01:00,1,10,2\n"
        "2025-01-01 09:00:01Z,0,20,3\n"
    )
    assert [r.timestamp_s for r in read_trace(path).rows] == [0.0, 0.5]


def test_burstgpt_skips_failed_rows_and_counts_them(tmp_path):
    path = tmp_path / "BurstGPT_1.csv"
    path.write_text(BURSTGPT)
    trace = read_trace(path)
    assert trace.format == "burstgpt" and trace.num_failed_skipped == 2 and trace.num_filtered_out == 0
    assert [(r.row, r.timestamp_s, r.input_tokens, r.output_tokens) for r in trace.rows] == [
        (2, 5.0, 472, 18),  # BurstGPT's clock: seconds from 0:00 of its first day
        (4, 118.0, 417, 276),
        (6, 140.0, 1150, 174),
        (7, 150.0, 300, 20),
    ]


def test_burstgpt_filters_by_model_and_log_type(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text(BURSTGPT)
    gpt4 = read_trace(path, model="GPT-4")
    assert [r.row for r in gpt4.rows] == [4, 7]
    assert gpt4.num_filtered_out == 3 and gpt4.num_failed_skipped == 1
    assert gpt4.rows[0].timestamp_s == 118.0  # on the trace's clock, whatever was filtered
    conv = read_trace(path, model="GPT-4", log_type="Conversation log")
    assert [r.row for r in conv.rows] == [7]
    with pytest.raises(TraceError, match=r"no rows with Model 'Claude'.*models: ChatGPT, GPT-4"):
        read_trace(path, model="Claude")


def test_burstgpt_session_ids_where_the_release_has_them(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text(
        "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "0,s1,2.5,ChatGPT,10,5,15,Conversation log\n"
        "1,,1.0,ChatGPT,10,5,15,API log\n"
    )
    assert [r.session_id for r in read_trace(path).rows] == ["s1", None]


def test_bailian_sessions_follow_parent_chat_ids_and_rows_are_ordered_by_time(tmp_path):
    path = _jsonl(
        tmp_path / "qwen_traceA_blksz_16.jsonl",
        [
            {
                "chat_id": 159,
                "parent_chat_id": -1,
                "timestamp": 61.114,
                "input_length": 20,
                "output_length": 5,
                "type": "text",
                "turn": 1,
                "hash_ids": [1, 2],
            },  # fmt: skip
            {
                "chat_id": 170,
                "parent_chat_id": 159,
                "timestamp": 65.0,
                "input_length": 40,
                "output_length": 6,
                "type": "text",
                "turn": 2,
                "hash_ids": [1, 2, 3],
            },  # fmt: skip
            {"chat_id": 171, "timestamp": 60.0, "input_length": 7, "output_length": 1, "type": "search"},
            {
                "chat_id": 180,
                "parent_chat_id": 170,
                "timestamp": 66.5,
                "input_length": 1,
                "output_length": 2,
                "hash_ids": [4],
            },  # fmt: skip
            {"chat_id": 190, "parent_chat_id": 77, "timestamp": 67.0, "input_length": 1, "output_length": 2},
        ],
    )
    trace = read_trace(path)
    assert trace.format == "bailian" and trace.block_size == 16
    got = [(r.row, r.timestamp_s, r.session_id, r.parent_id, r.hash_ids) for r in trace.rows]
    assert got == [
        (3, 60.0, "171", None, ()),
        (1, pytest.approx(61.114), "159", None, (1, 2)),
        (2, 65.0, "159", "159", (1, 2, 3)),
        (4, 66.5, "159", "170", (4,)),
        (5, 67.0, "77", "77", ()),  # a parent cut from the file starts the session
    ]


def test_block_size_overrides_the_format_default(tmp_path):
    path = _jsonl(tmp_path / "m.jsonl", [_mooncake_row(0, 100, 1, [1, 2, 3, 4])])
    with pytest.raises(TraceError, match=r"m\.jsonl:1: 4 hash_ids for input_length 100"):
        read_trace(path)
    assert read_trace(path, block_size=32).block_size == 32


# --- detection -----------------------------------------------------------------------------------


def test_format_is_detected_from_the_first_line(tmp_path):
    (tmp_path / "a.csv").write_text(AZURE)
    (tmp_path / "b.csv").write_text(BURSTGPT)
    _jsonl(tmp_path / "m.jsonl", [_mooncake_row(0, 1, 1, [1])])
    _jsonl(tmp_path / "q.jsonl", [{"chat_id": 1, "timestamp": 0, "input_length": 1, "output_length": 1}])
    assert [detect_format(tmp_path / n) for n in ("a.csv", "b.csv", "m.jsonl", "q.jsonl")] == [
        "azure",
        "burstgpt",
        "mooncake",
        "bailian",
    ]


@pytest.mark.parametrize(
    "text,message",
    [
        ("", r"empty trace file"),
        ("a,b,c\n1,2,3\n", r"x:1: not a known trace header"),
        ('{"prompt": "hi"}\n', r"x:1: a JSON line with neither Mooncake's fields"),
        ("{oops\n", r"x:1: not a JSON line"),
    ],
)
def test_unknown_formats_are_named(tmp_path, text, message):
    (tmp_path / "x").write_text(text)
    with pytest.raises(TraceError, match=message):
        read_trace(tmp_path / "x")


def test_a_given_format_is_not_second_guessed(tmp_path):
    path = _jsonl(tmp_path / "m.jsonl", [_mooncake_row(0, 1, 1, [1])])
    with pytest.raises(TraceError, match=r"m\.jsonl:1: missing field 'chat_id'"):
        read_trace(path, format="bailian")
    with pytest.raises(TraceError, match="applies to BurstGPT"):
        read_trace(path, model="GPT-4")


# --- malformed rows: each names file:line --------------------------------------------------------

GOOD = _mooncake_row(0, 600, 1, [1, 2])


@pytest.mark.parametrize(
    "bad,message",
    [
        ({"input_length": 600, "output_length": 1, "hash_ids": [1, 2]}, "missing field 'timestamp'"),
        ({**GOOD, "timestamp": 5000, "output_length": None}, "missing field 'output_length'"),
        ({**GOOD, "timestamp": 5000, "hash_ids": None}, "missing field 'hash_ids'"),
        ({**GOOD, "timestamp": "soon"}, "'timestamp' is not a number"),
        ({**GOOD, "timestamp": 5000, "input_length": "many"}, "'input_length' is not a number"),
        ({**GOOD, "timestamp": 5000, "input_length": True}, "'input_length' is not a number"),
        ({**GOOD, "timestamp": 5000, "output_length": -1}, "'output_length' is negative"),
        ({**GOOD, "timestamp": 5000, "output_length": 1.5}, "'output_length' is not a whole number"),
        ({**GOOD, "timestamp": 5000, "hash_ids": [1, "2"]}, "'hash_ids' is not a list of integers"),
        (
            {**GOOD, "timestamp": 5000, "hash_ids": [1, 2, 3]},
            r"3 hash_ids for input_length 600: .* ceil\(600/512\) = 2",
        ),
        ({**GOOD, "timestamp": 5000, "input_length": 512}, r"2 hash_ids for input_length 512"),
        ({**GOOD, "timestamp": 500}, "timestamp 500 goes back before line 2's"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_malformed_mooncake_rows_name_file_and_line(tmp_path, bad, message):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "timestamp": 1000}) + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(TraceError, match=rf"t\.jsonl:4: {message}"):
        read_trace(path, format="mooncake")


def test_malformed_json_line_names_file_and_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + '{"timestamp": 1,\n')
    with pytest.raises(TraceError, match=r"t\.jsonl:2: not a JSON line"):
        read_trace(path)


@pytest.mark.parametrize(
    "row,message",
    [
        ({"chat_id": 1, "timestamp": 1, "input_length": 20, "output_length": 1, "hash_ids": [1]}, "1 hash_ids for"),
        ({"chat_id": 1, "timestamp": 1, "input_length": 20}, "missing field 'output_length'"),
        ({"timestamp": 1, "input_length": 20, "output_length": 1}, "missing field 'chat_id'"),
        ({"chat_id": 7, "timestamp": 1, "input_length": 2, "output_length": 1}, "chat_id 7 already on line 1"),
        (
            {"chat_id": 8, "parent_chat_id": 8, "timestamp": 1, "input_length": 2, "output_length": 1},
            "parent_chat_id links of chat_id 8 form a cycle",
        ),
    ],
)
def test_malformed_bailian_rows_name_file_and_line(tmp_path, row, message):
    first = {"chat_id": 7, "timestamp": 0, "input_length": 2, "output_length": 1}
    path = _jsonl(tmp_path / "q.jsonl", [first, row])
    with pytest.raises(TraceError, match=rf"q\.jsonl:2: {message}"):
        read_trace(path, format="bailian")


@pytest.mark.parametrize(
    "line,message",
    [
        ("2023-11-16 18:17:05.1,12,", "missing field 'GeneratedTokens'"),
        ("2023-11-16 18:17:05.1,x,1", "'ContextTokens' is not a number"),
        ("2023-11-16 18:17:05.1,-4,1", "'ContextTokens' is negative"),
        ("16/11/2023 18:17,4,1", "TIMESTAMP '16/11/2023 18:17' is not a date and time"),
        ("2023-11-16 25:17:05,4,1", "TIMESTAMP '2023-11-16 25:17:05' is not a valid date and time"),
        ("2023-11-16 18:17:03.0000000,4,1", "timestamp 2023-11-16 18:17:03.0000000 goes back before line 2's"),
        ("2023-11-16 18:17:05.1,4", "2 fields, the header has 3"),
    ],
)
def test_malformed_azure_rows_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "a.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:04.5,1,1\n" + line + "\n")
    with pytest.raises(TraceError, match=rf"a\.csv:3: ({message})"):
        read_trace(path)


@pytest.mark.parametrize(
    "line,message",
    [
        ("3,GPT-4,10,,10,API log", "missing field 'Response tokens'"),
        ("3,GPT-4,-10,1,10,API log", "'Request tokens' is negative"),
        ("later,GPT-4,10,1,11,API log", "'Timestamp' is not a number"),
        ("1,GPT-4,10,1,11,API log", "timestamp 1 goes back before line 2's"),
    ],
)
def test_malformed_burstgpt_rows_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "b.csv"
    path.write_text(BURSTGPT.splitlines()[0] + "\n2,GPT-4,10,1,11,API log\n" + line + "\n")
    with pytest.raises(TraceError, match=rf"b\.csv:3: {message}"):
        read_trace(path)


def test_csv_header_without_a_needed_column(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    with pytest.raises(TraceError, match=r"a\.csv:1: header lacks column\(s\) Timestamp, Request tokens, Response"):
        read_trace(path, format="burstgpt")
    with pytest.raises(TraceError, match=r"no rows to replay"):
        read_trace(path)
