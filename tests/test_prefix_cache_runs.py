"""--prefix-cache and the measured hit rate, run top to bottom against the mock's known-answer
prefix cache (4-word blocks; a hit needs the same prefix up to a block's end, and the prompt's
last token is always computed, as vLLM's): two 8-word prompts sent alternately by one user hit
4 of 8 tokens each after their first sending."""

import json

import pytest
from run_helpers import quiet

from tokenbench.config import BackendConfig, DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.run import run


def _config(url, tmp_path, mode, backend=None, points=1, requests=10) -> RunConfig:
    return RunConfig(
        target=TargetConfig(url=url, api="completions"),
        backend=backend,
        loads=[UsersLoad(users=1)] * points,
        stop=StopConfig(max_requests=requests),
        dataset=DatasetConfig(input_tokens=8, output_tokens=3, num_prompts=2),
        prefix_cache=mode,
        live=False,
        out_dir=tmp_path / "run",
    )


def test_hit_rate_from_usage_cached_tokens_without_server_metrics(mock_server, tmp_path):
    url = mock_server(ttft_ms=1, itl_ms=1, cache_block_tokens=4)
    result = run(_config(url, tmp_path, "keep"), quiet())
    cache = result.results["points"][0]["prefix_cache"]
    # 2 cold sends, then 8 sends hitting 4 of their 8 tokens: 32 / 80
    assert cache == {
        "reset": "not_requested",
        "reset_detail": None,
        "hit_rate": pytest.approx(0.4),
        "hit_rate_source": "usage_cached_tokens",
        "hit_rate_requests": 10,
        "expected_reuse": None,
    }
    records = [json.loads(line) for line in (result.run_dir / "records.jsonl").read_text().splitlines()]
    assert [r["cached_prompt_tokens"] for r in records] == [0, 0] + [4] * 8


def test_reset_without_an_engine_control_is_not_supported(mock_server, tmp_path):
    url = mock_server(ttft_ms=1, itl_ms=1, cache_block_tokens=4)
    result = run(_config(url, tmp_path, "reset", requests=4), quiet())
    cache = result.results["points"][0]["prefix_cache"]
    assert cache["reset"] == "not_supported" and cache["reset_detail"]  # --url without --backend: unknown engine


@pytest.mark.parametrize(("mode", "second"), [("reset", 0.4), ("keep", 0.5)])
def test_reset_empties_the_cache_between_points_and_keep_does_not(mock_server, tmp_path, mode, second):
    """The mock speaks vLLM's counters and reset route (--backend vllm attached): the hit rate is
    the server's counters over each point's window. After a reset the second point starts cold
    (0.4 again); kept, every one of its sends hits 4 of 8 (0.5)."""
    url = mock_server(ttft_ms=1, itl_ms=1, cache_block_tokens=4)
    backend = BackendConfig(name="vllm", metrics_interval_s=0.1)
    result = run(_config(url, tmp_path, mode, backend, points=2), quiet())
    first, then = (p["prefix_cache"] for p in result.results["points"])
    expected_reset = "done" if mode == "reset" else "not_requested"
    assert first["reset"] == then["reset"] == expected_reset
    assert first["hit_rate_source"] == then["hit_rate_source"] == "server_counters"
    assert first["hit_rate"] == pytest.approx(0.4)
    assert then["hit_rate"] == pytest.approx(second)


def test_recompute_gives_the_same_prefix_cache_from_the_runs_files(mock_server, tmp_path):
    from tokenbench.rundir.derive import recompute_run

    url = mock_server(ttft_ms=1, itl_ms=1, cache_block_tokens=4)
    result = run(_config(url, tmp_path, "reset", BackendConfig(name="vllm", metrics_interval_s=0.1)), quiet())
    events = [json.loads(line) for line in (result.run_dir / "samples.jsonl").read_text().splitlines()]
    starts = [e for e in events if e.get("kind") == "point_start"]
    assert starts[0]["prefix_cache_reset"] == {"status": "done", "detail": None}  # a killed run keeps it
    again = recompute_run(result.run_dir).to_json()
    assert again["points"][0]["prefix_cache"] == result.results["points"][0]["prefix_cache"]
