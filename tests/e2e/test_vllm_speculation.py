"""Speculative decoding on vLLM's CPU build, measured per request and from its counters.

- SmolLM2-135M drafting for itself (``"method": "draft_model"``) at temperature 0: the draft is the
  target, so every draft is accepted: the point's acceptance rate from the per-request field and
  from the ``vllm:spec_decode_*`` counters is ~1, chunks carry several tokens, and the requests'
  own figures sum to the counters' increase over the whole point. The same launch has
  ``--enable-per-request-metrics``: every record carries the server's queue and TTFT, and the
  client's TTFT is the server's plus the little outside the engine (HTTP, the API server).
- n-gram (prompt lookup) speculation: a prompt that repeats one phrase, which the model continues,
  finds its drafts in the prompt and accepts nearly all; questions, whose answers are new text,
  find few drafts.
One launch each (~20 s), a few requests of one user each.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from tokenbench.backends.server import server_under_test
from tokenbench.config import BackendConfig, DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.run import run

pytestmark = pytest.mark.e2e

KV_CACHE_BYTES = 4 * 23_592_960  # 4,096 tokens of SmolLM2-135M: the target's and a draft's cache
DRAFT_TOKENS = 3


def _launch(vllm_cpu, **speculation: object) -> BackendConfig:
    """vLLM CPU launched with the speculation knobs and ``--per-request-metrics`` (the knobs map to
    its --speculative-config JSON, --enable-per-request-metrics and, speculating, detailed figures)."""
    return vllm_cpu.backend(max_num_seqs=4, kv_cache_bytes=KV_CACHE_BYTES, per_request_metrics=True, **speculation)


def _run(url: str, out: Path, dataset: DatasetConfig, requests: int) -> dict:
    """One user sending ``requests`` requests one after another: each finds the engine idle, so
    the time outside its clock is the API server's own, not a wait behind another request's step."""
    config = RunConfig(
        target=TargetConfig(url=url, api="completions", ignore_eos=True),
        loads=[UsersLoad(users=1)],
        stop=StopConfig(max_requests=requests, drain_timeout_s=60),
        dataset=dataset,
        backend=BackendConfig(name="vllm", metrics_interval_s=0.5),  # --url with vLLM's metric names
        live=False,
        out_dir=out,
    )
    result = run(config, Console(file=io.StringIO()))
    records = [json.loads(line) for line in (result.run_dir / "records.jsonl").read_text().splitlines()]
    return {"results": result.results, "records": records}


@pytest.fixture(scope="module")
def self_drafted(tmp_path_factory, vllm_cpu):
    base = tmp_path_factory.mktemp("vllm-spec-draft")
    backend = _launch(vllm_cpu, spec_method="draft", spec_draft_model=str(vllm_cpu.model), spec_tokens=DRAFT_TOKENS)
    with server_under_test(backend, None, base / "server.log") as server:
        dataset = DatasetConfig(name="synthetic", input_tokens=16, output_tokens=32)
        yield _run(server.url, base / "run", dataset, requests=6)


def test_a_model_drafting_for_itself_accepts_every_draft(self_drafted):
    point = self_drafted["results"]["points"][0]
    spec = point["speculation"]
    assert spec["source"] == "vllm" and spec["requests"] == point["requests_in_window"]["ok"] > 0
    assert spec["acceptance_rate_token_weighted"] >= 0.95, spec
    assert spec["acceptance_rate_request_weighted"] >= 0.95, spec
    # the counters over the window sit beside them (``spec["server"]``); the window's steps are not
    # its requests' on a slow machine (a reply outlives the window), so the rate is read over the
    # whole point, which every request of the point ended in
    assert spec["server"] is not None and spec["server"] == point["server"]["speculation"]
    counted = point["server_whole_point"]["speculation"]
    assert counted["acceptance_rate"] >= 0.95, counted
    # every position accepted, by the requests' steps and by the counters
    assert [p["position"] for p in spec["by_position"]] == list(range(DRAFT_TOKENS))
    assert all(p["rate"] >= 0.95 for p in spec["by_position"]), spec["by_position"]
    assert all(r >= 0.95 for r in counted["acceptance_rate_by_position"]), counted
    # a verify step gives up to k + 1 tokens: chunks carry several, so per-chunk ITL is per-token x ~4
    sizes = point["tokens_per_chunk"]
    assert sizes["p50"] > 1 and sizes["max"] == DRAFT_TOKENS + 1, sizes
    assert point["itl_s"]["p50"] > 2 * point["itl_per_token_s"]["p50"]


def test_the_requests_figures_sum_to_the_counters_increase(self_drafted):
    """Every request of the point ended inside it (a drain of 30 s): its figures, summed, are the
    counters' increase between the scrapes that bracket the whole point."""
    point = self_drafted["results"]["points"][0]
    server = point["server_whole_point"]
    ok = [r for r in self_drafted["records"] if r["outcome"] == "ok"]
    assert len(ok) == point["requests"]["total"], point["requests"]
    assert server["bracketed"], server
    assert sum(r["spec_steps"] for r in ok) == server["speculation"]["drafts"]
    assert sum(r["spec_draft_tokens"] for r in ok) == server["speculation"]["draft_tokens"]
    assert sum(r["spec_accepted_tokens"] for r in ok) == server["speculation"]["accepted_tokens"]


def test_each_record_carries_the_servers_own_ttft_and_queue(self_drafted):
    """``--enable-per-request-metrics``: the server's queue and TTFT on every record, with no trace
    collector. The client's TTFT less the server's (from its queue) is what lies outside the engine:
    HTTP on loopback, the API server's tokenizing and hand-off, the first chunk's delivery."""
    ok = [r for r in self_drafted["records"] if r["outcome"] == "ok"]
    assert ok and all(r["reported_queue_s"] is not None and r["reported_ttft_s"] is not None for r in ok)
    assert all(r["reported_timing_from"] == "vllm" for r in ok)
    outside = sorted((r["chunk_times_s"][0] - r["sent_s"]) - r["reported_ttft_s"] for r in ok)
    assert outside[0] > -0.002, outside  # the engine's TTFT is inside the client's
    assert outside[len(outside) // 2] < 0.030, outside  # a few ms at the median (2-core machine)
    timing = self_drafted["results"]["points"][0]["server_timing"]
    assert timing["requests"] > 0 and timing["source"] == "vllm"
    assert timing["ttft_outside_server_s"]["p50"] < 0.030, timing


# A phrase the model continues (its next tokens are in the prompt), and questions whose answers are
# new text. (Random words are no "low" case for a 135M model: at temperature 0 it soon repeats its
# own output, where prompt lookup then finds its drafts: 18 of 20 accepted, tried by hand.)
REPEATED = "The quick brown fox jumps over the lazy dog. " * 14
QUESTIONS = [
    "Explain why the sky is blue to a ten year old child.",
    "List three benefits of regular exercise and explain each one briefly.",
    "Write a short story about a robot who learns to paint. Describe its first painting in detail.",
    "What should I pack for a week of hiking in the mountains in autumn?",
]


@pytest.fixture(scope="module")
def ngram(tmp_path_factory, vllm_cpu):
    base = tmp_path_factory.mktemp("vllm-spec-ngram")
    backend = _launch(vllm_cpu, spec_method="ngram", spec_tokens=DRAFT_TOKENS, spec_ngram_min=2, spec_ngram_max=4)
    out = {}
    with server_under_test(backend, None, base / "server.log") as server:
        for name, prompts in {"repeated": [REPEATED], "questions": QUESTIONS}.items():
            path = base / f"{name}.jsonl"
            path.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
            dataset = DatasetConfig(name="jsonl", path=path, output_tokens=32)
            out[name] = _run(server.url, base / name, dataset, requests=len(QUESTIONS))
    return out


def _accepted_per_token(run: dict) -> float:
    ok = [r for r in run["records"] if r["outcome"] == "ok"]
    return sum(r["spec_accepted_tokens"] for r in ok) / sum(r["output_tokens"] for r in ok)


def test_ngram_speculation_accepts_more_of_a_repeated_prompt(ngram):
    repeated = ngram["repeated"]["results"]["points"][0]["speculation"]
    questions = ngram["questions"]["results"]["points"][0]["speculation"]
    assert repeated["requests"] == questions["requests"] == len(QUESTIONS)
    # the repeated phrase: drafts found in the prompt, nearly all accepted
    assert repeated["acceptance_rate_token_weighted"] >= 0.8, repeated
    # of the output tokens, those a draft gave: most of the repeated phrase's, few of the answers'
    per_token = {name: _accepted_per_token(run) for name, run in ngram.items()}
    assert per_token["repeated"] > 0.5 and per_token["questions"] < 0.25, per_token
    assert repeated["acceptance_length_step_weighted"] > 2.5, repeated
