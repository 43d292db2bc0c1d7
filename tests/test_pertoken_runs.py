"""Latency per token end to end against the scripted mock, which sends 4 tokens a chunk and, when
asked for it, vLLM's usage on every chunk: records hold each chunk's tokens, results the per-token
ITL (each chunk gap over its 4 tokens) and the fluidity index beside the inter-chunk ITL.

Mock: TTFT 50 ms, a chunk every 20 ms, 40 tokens = 10 chunks of 4. Deadlines 100 ms / 6 ms: with
the counts, the 3 further tokens of each chunk bank 18 ms, more than the 14 ms each 20 ms gap
overruns, so every token is on time; walked one token a chunk, the 50 ms banked by TTFT is gone
after 4 gaps (4 x 14 = 56 ms) and later gaps miss.
"""

import json

import pytest
from run_helpers import config, quiet, records_of

from tokenbench.config import BackendConfig, DeadlinesConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.run import run

MOCK = {"ttft_ms": 50, "itl_ms": 20, "tokens_per_chunk": 4}
DEADLINES = DeadlinesConfig(ttft_s=0.1, tbt_s=0.006)
REQUESTS = 8


def measure(url, tmp_path, **kw):
    cfg = config(
        url,
        tmp_path,
        [UsersLoad(users=2)],
        StopConfig(max_requests=REQUESTS),
        output_tokens=40,
        deadlines=DEADLINES,
        **kw,
    )
    result = run(cfg, quiet())
    return result.results["points"][0], records_of(result.run_dir), result.run_dir


def test_an_attached_vllm_gets_usage_on_every_chunk_and_per_token_latency(start_mock, tmp_path):
    url = start_mock(**MOCK)
    point, records, run_dir = measure(url, tmp_path, backend=BackendConfig(name="vllm", metrics_interval_s=0.2))
    assert json.loads((run_dir / "config.json").read_text())["resolved_target"]["continuous_usage"] is True
    assert [r["chunk_tokens"] for r in records] == [[4] * 10] * REQUESTS
    assert {r["first_chunk_tokens"] for r in records} == {4}
    itl, per_token = point["itl_s"], point["itl_per_token_s"]
    # every chunk gap after the first chunk, over its 4 tokens: 9 gaps x 4 tokens a request
    assert itl["count"] == 9 * REQUESTS and per_token["count"] == 4 * 9 * REQUESTS
    for stat in ("mean", "min", "max"):  # (percentiles interpolate between other ranks)
        assert per_token[stat] == pytest.approx(itl[stat] / 4, rel=1e-9), stat
    assert per_token["mean"] == pytest.approx(0.020 / 4, abs=0.001)
    fluidity = point["fluidity"]
    assert fluidity["tokens_from"] == {"chunk_tokens": REQUESTS, "one_per_chunk": 0}
    assert (fluidity["ttft_deadline_s"], fluidity["tbt_deadline_s"]) == (0.1, 0.006)
    assert fluidity["index"]["count"] == REQUESTS and fluidity["index"]["min"] == 1.0
    assert fluidity["miss_rate"] == 0.0


def test_without_counts_per_token_itl_is_null_and_fluidity_walks_chunks(start_mock, tmp_path):
    """No backend profile: no usage on every chunk asked for, no counts: per-token ITL null,
    fluidity one token a chunk, and the same timing then misses deadlines."""
    url = start_mock(**MOCK)
    point, records, _ = measure(url, tmp_path)
    assert {(r["chunk_tokens"] is None, r["first_chunk_tokens"] is None) for r in records} == {(True, True)}
    assert point["itl_per_token_s"]["count"] == 0 and point["itl_per_token_s"]["mean"] is None
    fluidity = point["fluidity"]
    assert fluidity["tokens_from"] == {"chunk_tokens": 0, "one_per_chunk": REQUESTS}
    assert fluidity["index"]["max"] < 1.0 and fluidity["miss_rate"] > 0


def test_continuous_usage_can_be_asked_of_a_server_without_a_profile(mock_server, tmp_path):
    url = mock_server(ttft_ms=5, itl_ms=2, tokens_per_chunk=3)
    cfg = config(url, tmp_path, [UsersLoad(users=1)], StopConfig(max_requests=2), output_tokens=9)
    cfg = cfg.model_copy(update={"target": TargetConfig(url=url, api="completions", continuous_usage=True)})
    run(cfg, quiet())
    assert [r["chunk_tokens"] for r in records_of(tmp_path / "run")] == [[3, 3, 3]] * 2
