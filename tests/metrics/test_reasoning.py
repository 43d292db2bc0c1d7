"""TTFO and reasoning content: known answers from records, and through a run against the mock
scripted to stream reasoning first (``--reasoning-chunks K``: TTFO = TTFT + K * ITL)."""

from __future__ import annotations

import io
import json
import urllib.request

import pytest
from rich.console import Console

from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.metrics.reasoning import reasoning_metrics
from tokenbench.records import Outcome, Reasoning, RequestRecord
from tokenbench.run import run


def _record(i: int, reasoning: int, tokens: int | None, outcome: Outcome = Outcome.OK) -> RequestRecord:
    """Sent at 0, chunks at 0.1, 0.2, ... 0.5; the first ``reasoning`` are reasoning."""
    chunks = [0.1 * (k + 1) for k in range(5)]
    return RequestRecord(
        point=0,
        id=i,
        scheduled_s=0.0,
        sent_s=0.0,
        chunk_times_s=chunks,
        end_s=chunks[-1],
        outcome=outcome,
        reasoning=Reasoning(chunks[reasoning] if reasoning < 5 else None, reasoning, tokens),
    )


def test_ttfo_and_reasoning_by_hand() -> None:
    records = [
        _record(0, 2, 7),  # TTFO 0.3
        _record(1, 0, None),  # no reasoning: TTFO = TTFT = 0.1
        _record(2, 5, 9),  # all reasoning (cut inside it): no TTFO, not 0
        _record(3, 1, 3, Outcome.STREAM_ERROR),  # failed: in the counts of reasoning, not latencies
    ]
    got = reasoning_metrics(records)
    ttfo = got["ttfo_s"]
    assert ttfo.count == 2 and ttfo.min == pytest.approx(0.1) and ttfo.max == pytest.approx(0.3)
    assert got["reasoning"].model_dump() == {
        "requests": 3,
        "chunks": 8,
        "reasoning_only": 1,
        "reasoning_tokens": 16,  # 7 + 9: the successful requests whose usage gave it
        "reasoning_tokens_reported": 2,
    }


def test_no_reasoning_no_keys() -> None:
    assert reasoning_metrics([_record(0, 0, None), _record(1, 0, None)]) == {}
    assert reasoning_metrics([]) == {}


TTFT_S, ITL_S, K, TOKENS = 0.050, 0.020, 3, 8


def _run(url: str, tmp_path, api: str) -> tuple[dict, list[dict], dict]:
    cfg = RunConfig(
        target=TargetConfig(url=url, api=api),
        loads=[UsersLoad(users=2)],
        stop=StopConfig(duration_s=1.0, drain_timeout_s=10),
        dataset=DatasetConfig(input_tokens=8, output_tokens=TOKENS, num_prompts=4),
        live=False,
        out_dir=tmp_path / api,
    )
    result = run(cfg, Console(file=io.StringIO()))
    records = [json.loads(line) for line in (result.run_dir / "records.jsonl").read_text().splitlines()]
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        log = json.loads(resp.read())
    return result.results, records, log


def test_ttfo_against_the_scripted_mock(start_mock, tmp_path) -> None:
    """The mock writes K reasoning chunks, then the answer: each record's first output is its
    chunk K exactly; TTFO - TTFT = K * ITL as the mock wrote them (within 5 ms of read time);
    reasoning tokens K per reply from usage. The completions API streams no reasoning: no key."""
    url = start_mock(ttft_ms=TTFT_S * 1e3, itl_ms=ITL_S * 1e3, reasoning_chunks=K)
    results, records, log = _run(url, tmp_path, "chat")
    point = results["points"][0]
    ok = [r for r in records if r["outcome"] == "ok"]
    assert ok and all(r["first_output_s"] == r["chunk_times_s"][K] for r in ok)
    assert all(r["reasoning_chunks"] == K and r["reasoning_tokens"] == K for r in ok)
    gaps, read = [], []
    for r in ok:
        # the truth is what the mock wrote (K * ITL as scripted, give or take a loaded machine);
        # the client reads each gap within a scheduling stall of it (one read 7 ms short when its
        # first chunk was read late, in CI's serial tier), and over the requests within 2 ms
        written = log[r["response_id"]]["chunk_times_s"]
        assert (r["first_output_s"] - r["chunk_times_s"][0]) == pytest.approx(written[K] - written[0], abs=0.015)
        gaps.append(written[K] - written[0])
        read.append(r["first_output_s"] - r["chunk_times_s"][0])
    assert sum(read) / len(read) == pytest.approx(sum(gaps) / len(gaps), abs=0.002)
    # TTFO is TTFT plus the reasoning the mock wrote first, over the same requests
    assert point["ttfo_s"]["mean"] - point["ttft_s"]["mean"] == pytest.approx(sum(gaps) / len(gaps), abs=0.005)
    assert point["ttfo_s"]["count"] == point["ttft_s"]["count"]
    reasoning = point["reasoning"]
    n = point["requests_in_window"]["total"]
    assert reasoning["requests"] == n and reasoning["chunks"] == K * n and reasoning["reasoning_only"] == 0
    ok_in_window = point["requests_in_window"]["ok"]
    assert reasoning["reasoning_tokens"] == K * ok_in_window and reasoning["reasoning_tokens_reported"] == ok_in_window

    results, records, _ = _run(url, tmp_path, "completions")
    assert "ttfo_s" not in results["points"][0] and "reasoning" not in results["points"][0]
    assert all(
        r["first_output_s"] == r["chunk_times_s"][0] and r["reasoning_chunks"] == 0
        for r in records
        if r["chunk_times_s"]
    )
