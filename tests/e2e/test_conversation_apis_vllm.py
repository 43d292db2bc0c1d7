"""vLLM's CPU build (the session's shared server: tests/e2e/conftest.py) on Anthropic's Messages
API and OpenAI's Responses API: a run of each completes with every reply's tokens from the server's
usage, and a multi-turn Messages session sends a tool call's result back (the call as a tool_use
block, its result as a tool_result block) and goes on. The shared launch has a tool parser on
(``--enable-auto-tool-choice``): a named tool choice is guided decoding, so SmolLM2-135M calls it."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from tokenbench.config import (
    BackendConfig,
    DatasetConfig,
    RunConfig,
    SessionConfig,
    StopConfig,
    TargetConfig,
    UsersLoad,
)
from tokenbench.experiments.presets import WEATHER_TOOL
from tokenbench.run import run

pytestmark = pytest.mark.e2e


def _run(url, out, api, output_tokens=16, **target):
    config = RunConfig(
        target=TargetConfig(url=url, api=api, **target.pop("target", {})),
        loads=[UsersLoad(users=2)],
        stop=StopConfig(max_requests=4, drain_timeout_s=60),
        dataset=DatasetConfig(input_tokens=16, output_tokens=output_tokens, num_prompts=4),
        backend=BackendConfig(name="vllm", metrics_interval_s=0.5),  # its metric names
        live=False,
        out_dir=out,
        **target,
    )
    result = run(config, Console(file=io.StringIO()))
    records = [json.loads(line) for line in (result.run_dir / "records.jsonl").read_text().splitlines()]
    return result.results["points"][0], records


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_a_run_completes_with_the_servers_token_counts(shared_vllm_cpu, tmp_path, api):
    point, records = _run(shared_vllm_cpu.url, tmp_path / api, api)
    assert point["requests"]["ok"] == 4 == len(records)
    for r in records:
        assert r["outcome"] == "ok" and r["end_marker"], r.get("error")
        assert r["output_tokens_source"] == "server" and 0 < r["output_tokens"] <= 16
        assert r["prompt_tokens"] > 16  # the chat template's tokens around the 16 of the prompt
        assert len(r["chunk_times_s"]) >= 1
    assert point["ttft_s"]["mean"] > 0 and point["server"]["generated_tokens"] > 0


def test_a_messages_session_sends_the_tool_result_back(shared_vllm_cpu, tmp_path):
    """Two users, each a 2-turn conversation whose turns call get_weather (a named tool choice):
    turn 1 carries turn 0's tool_use block and a tool_result with the canned text, so its prompt
    holds turn 0's prompt, the call and the result."""
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([WEATHER_TOOL]))
    target = {"tools": str(tools), "tool_choice": "get_weather"}
    sessions = SessionConfig(turns=2, tool_result='{"temp_c": 21}')
    # 48 tokens: room for the whole call (16 cut its arguments at the limit)
    point, records = _run(shared_vllm_cpu.url, tmp_path / "tools", "messages", 48, target=target, sessions=sessions)
    assert all(r["outcome"] == "ok" for r in records), [r.get("error") for r in records]
    calls = [(r["tool_calls"], r["tool_args_parsed"], r["output_tokens"], r["finish_reason"]) for r in records]
    assert all(n == 1 and parsed for n, parsed, _, _ in calls), calls
    by_session: dict[str, list[dict]] = {}
    for r in sorted(records, key=lambda r: r["turn_index"]):
        by_session.setdefault(r["session_id"], []).append(r)
    assert len(by_session) == 2
    for first, second in by_session.values():
        assert (first["turn_index"], second["turn_index"]) == (0, 1)
        # turn 1's prompt: turn 0's, its reply's call and the result, and the next user turn
        assert second["prompt_tokens"] > first["prompt_tokens"] + first["output_tokens"]
        assert second["history_tokens"] > 0
