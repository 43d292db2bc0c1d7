"""A trace read as the public files come: gzip, a window found by bisecting the file (the same rows
and lines as a full read), detection that asks what the reader needs, the formats' extra fields
(NumImages, BurstGPT's sessions and empty prompts), the digest on the side, the context guard, and
the real public samples under tests/fixtures/traces."""

import gzip
import hashlib
import json
from pathlib import Path

import pytest
from replay_helpers import replayed

from tokenbench.datasets.trace_requests import ContextGuard, TraceSelection
from tokenbench.datasets.traces import TraceCounts, TraceReader, detect_format, digest_of, read_trace

FIXTURES = Path(__file__).parent.parent / "fixtures" / "traces"


def _mooncake(path: Path, n: int, every_ms: int = 1000) -> Path:
    with path.open("w") as f:
        for i in range(n):
            f.write(
                json.dumps({"timestamp": i * every_ms, "input_length": 20, "output_length": 3, "hash_ids": [0, i + 1]})
            )
            f.write("\n")
    return path


def _rows(path: Path, start_s=None, end_s=None, **kw):
    return [(r.row, r.timestamp_s) for r in TraceReader(TraceSelection(path, block_size=10, **kw)).rows(start_s, end_s)]


def test_a_gzipped_trace_reads_as_the_plain_one(tmp_path):
    plain = _mooncake(tmp_path / "m.jsonl", 50)
    packed = tmp_path / "m.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert detect_format(packed) == "mooncake"
    assert _rows(packed) == _rows(plain) and len(_rows(packed)) == 50
    assert _rows(packed, 10.0, 20.0) == _rows(plain, 10.0, 20.0)
    digest = digest_of(TraceReader(TraceSelection(packed, block_size=10))).start().result()
    assert digest == (hashlib.sha256(packed.read_bytes()).hexdigest(), 50)  # the file's bytes, its rows


def test_the_window_found_by_bisecting_is_the_rows_and_lines_a_full_read_finds(tmp_path):
    path = _mooncake(tmp_path / "m.jsonl", 20000, every_ms=10)  # ~1 MB: the bisection runs
    assert path.stat().st_size > 4 * 65536
    full = _rows(path)
    for start, end in ((0.0, 1.0), (37.5, 37.6), (150.0, None), (199.98, None), (500.0, None)):
        want = [(r, t) for r, t in full if t >= start and (end is None or t < end)]
        assert _rows(path, start, end) == want


def test_an_azure_window_is_on_seconds_from_its_first_row_and_bisects_too(tmp_path):
    path = tmp_path / "week.csv"
    with path.open("w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for i in range(30000):
            stamp = f"2024-05-12 00:{i // 600 % 60:02d}:{i // 10 % 60:02d}.{i % 10}00000+00:00"
            f.write(f"{stamp},{100 + i % 7},{10}\n")
    reader = TraceReader(TraceSelection(path))
    assert (reader.clock.kind, reader.clock.origin) == ("first_row", "2024-05-12T00:00:00")
    got = [r.row for r in reader.rows(1234.5, 1235.0)]
    assert got == list(range(2 + 12345, 2 + 12350))  # line = row index + 2 (the header is line 1)


def test_burstgpt_needs_only_what_detection_asks_and_counts_empty_prompts(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text("Timestamp,Request tokens,Response tokens\n5,10,2\n6,0,4\n7,0,0\n9,12,3\n")
    assert detect_format(path) == "burstgpt"
    trace = read_trace(path)
    assert [(r.row, r.timestamp_s) for r in trace.rows] == [(2, 5.0), (5, 9.0)]
    assert (trace.num_no_prompt, trace.num_failed_skipped) == (1, 1)
    with pytest.raises(ValueError, match="--trace-model filters on the Model column, which this file lacks"):
        read_trace(path, model="GPT-4")


def test_burstgpt_v2_session_columns_are_read(tmp_path):
    path = tmp_path / "BurstGPT_3.csv"
    path.write_text(
        "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,s1,0,ChatGPT,10,5,15,Conversation log\n"
        "9,s1,4,ChatGPT,30,5,35,Conversation log\n"
    )
    assert [(r.session_id, r.timestamp_s) for r in read_trace(path).rows] == [("s1", 5.0), ("s1", 9.0)]


AZURE_2025 = """TIMESTAMP,NumImages,ContextTokens,GeneratedTokens
2024-10-15T12:00:00.269Z,1,1200,20
2024-10-15T12:00:00.500Z,0,300,10
2024-10-15T12:00:01.000Z,2,2500,5
"""


def test_azure_multimodal_rows_carry_their_images_on_chat_and_are_counted_elsewhere(tmp_path):
    path = tmp_path / "AzureLMMInferenceTrace_multimodal.csv"
    path.write_text(AZURE_2025)
    assert [r.num_images for r in read_trace(path).rows] == [1, 0, 2]
    chat = replayed(TraceSelection(path), images=True)
    assert [len(r.images) for r in chat.requests] == [1, 0, 2]
    assert (
        chat.requests[0].images[0].startswith("data:image/png;base64,") and chat.requests[0].image_pixels == 512 * 512
    )
    assert chat.facts.num_images_not_sent == 0
    text = replayed(TraceSelection(path), images=False)
    assert all(not r.images for r in text.requests) and text.facts.num_images_not_sent == 2


def test_the_context_guard_leaves_out_or_cuts_rows_that_cannot_fit(tmp_path):
    path = tmp_path / "m.jsonl"
    rows = [(0, 20, 5, [1, 2]), (1000, 95, 10, list(range(1, 11))), (2000, 30, 100, [1, 2, 3])]
    path.write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": i, "output_length": o, "hash_ids": h}) + "\n"
            for t, i, o, h in rows
        )
    )
    sel = TraceSelection(path, block_size=10)
    skip = replayed(sel, guard=ContextGuard(100))
    assert [r.trace_row for r in skip.requests] == [1]  # 95 + 10 and 30 + 100 are over 100
    assert skip.facts.left_out == {"over_context": 2, "no_prompt": 0} and skip.facts.num_rows_used == 1
    cut = replayed(sel, guard=ContextGuard(100, "truncate"))
    assert [(r.trace_row, r.expected_prompt_tokens) for r in cut.requests] == [(1, 20), (2, 90)]  # 30 + 100: no room
    assert cut.facts.num_truncated == 1 and cut.facts.left_out["over_context"] == 1
    chat = replayed(sel, guard=ContextGuard(60, template_tokens=32))  # 20 + 5 fits 60 - 32
    assert [r.trace_row for r in chat.requests] == [1]


def test_the_expected_reuse_is_over_the_rows_sent(tmp_path):
    path = _mooncake(tmp_path / "m.jsonl", 10)  # every row shares block 0 (10 of its 20 tokens)
    from tokenbench.config import StopConfig

    three = replayed(TraceSelection(path, block_size=10), stop=StopConfig(max_requests=3)).facts
    assert (three.num_rows_used, three.expected_reuse.num_tokens, three.expected_reuse.num_tokens_reused) == (3, 60, 20)
    assert three.num_rows == 10  # the file's rows, from the side pass


@pytest.mark.parametrize(
    ("name", "fmt", "rows", "first"),
    [
        ("mooncake_conversation.first400.jsonl", "mooncake", 400, (1, 0.0, 6758, 500)),
        ("azure_conv_2023.first400.csv", "azure", 400, (2, 0.0, 374, 44)),
    ],
)
def test_the_public_samples_read_as_published(name, fmt, rows, first):
    path = FIXTURES / name
    trace = read_trace(path)
    assert (trace.format, len(trace.rows)) == (fmt, rows)
    r = trace.rows[0]
    assert (r.row, r.timestamp_s, r.input_tokens, r.output_tokens) == first
    counts = TraceCounts()
    assert list(TraceReader(TraceSelection(path)).rows(counts=counts)) == list(trace.rows)
