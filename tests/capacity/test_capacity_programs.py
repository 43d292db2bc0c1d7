"""A sessions-per-second capacity search under a session-latency objective, against the scripted
mock with a known capacity: sessions of two dependent calls (the second waits on the first's
end, no recorded wait), ``--max-streams 2``, each call 0.14 s of service: 2 / (2 x 0.14) = 7.14
sessions a second. Below it constant arrivals never wait (a session holds a stream at a time, so
at most 0.28 x rate < 2 streams are busy); above it the queue grows, and so does the session
latency past its limit."""

from __future__ import annotations

import json

import pytest
from run_helpers import mock_process, quiet

from tokenbench.capacity import CapacitySettings, parse_objectives, search
from tokenbench.config import DatasetConfig, RateLoad, RunConfig, StopConfig, TargetConfig

pytestmark = pytest.mark.serial  # timed: never beside other tests

TTFT_MS, ITL_MS, TOKENS, STREAMS, CALLS = 50.0, 10.0, 10, 2, 2
SERVICE_S = (TTFT_MS + (TOKENS - 1) * ITL_MS) / 1000  # 0.14 s a call
TRUE_SESSIONS_PER_S = STREAMS / (CALLS * SERVICE_S)  # 7.14


def _chain(path):
    """One Weka-format session: a call, then one that takes its prompt and reply at once."""
    session = {
        "id": "chain",
        "block_size": 16,
        "requests": [
            {"t": 0.0, "type": "n", "in": 16, "out": TOKENS, "hash_ids": [1], "api_time": 1.0},
            {"t": 1.0, "type": "n", "in": 48, "out": TOKENS, "hash_ids": [1, 2, 3], "api_time": 1.0},
        ],
    }
    path.write_text(json.dumps(session))
    return path


def test_sessions_per_second_capacity_within_5_percent_of_the_truth(tmp_path):
    with mock_process(ttft_ms=TTFT_MS, itl_ms=ITL_MS, max_streams=STREAMS) as url:
        cfg = RunConfig(
            target=TargetConfig(url=url, api="chat"),
            loads=[RateLoad(rate_per_s=1, arrival="constant")],
            stop=StopConfig(duration_s=3.0, drain_timeout_s=20.0),
            dataset=DatasetConfig(name="programs", path=_chain(tmp_path / "chain.json"), output_tokens=TOKENS),
            live=False,
            out_dir=tmp_path / "run",
        )
        result = search(
            cfg, parse_objectives("session:p90<=400ms"), CapacitySettings(saturate_users=8), console=quiet()
        )
    assert result.max_rate_per_s is not None, result.answer
    assert abs(result.max_rate_per_s - TRUE_SESSIONS_PER_S) / TRUE_SESSIONS_PER_S <= 0.05, result.answer
    assert result.min_failing is not None and result.min_failing > result.max_rate_per_s
    points = json.loads((tmp_path / "run" / "results.json").read_text())["points"]
    passing = next(p for p in points[1:] if p["load"]["rate_per_s"] == result.max_rate_per_s)
    # what passed is what results.json says: the measured sessions' p90 latency, two calls each
    assert passing["programs"]["session_s"]["p90"] <= 0.4
    assert passing["programs"]["calls_per_session"]["mean"] == CALLS
    assert result.answer.startswith(f"max {result.max_rate_per_s:g} sessions/s under session p90")
    # the saturating probe's guess is in sessions/s too (8 sessions at once: about the capacity)
    assert result.ceiling is not None and abs(result.ceiling.requests_per_s - TRUE_SESSIONS_PER_S) < 2
