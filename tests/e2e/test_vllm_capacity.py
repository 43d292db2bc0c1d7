"""vLLM's CPU build, launched by `tokenbench capacity`: the users capacity under one TTFT
objective at max-num-seqs 2 and 16. At 2, a third user waits for a whole reply before its
prefill, so its TTFT is about an E2E: the answer is 2 users. At 16 the engine batches them all,
so it carries more. Small prompts (16 in, 32 out) and a KV cache with room for 16 sequences;
short probes and a probe budget keep both searches (with both engine starts) in the CI budget."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

KV_CACHE_BYTES = 4 * 23_592_960  # 4,096 tokens of SmolLM2-135M: 32 blocks of 128, one per sequence here
# The objective sits in the gap between the two regimes the test tells apart: 2 users at
# max-num-seqs 2 measured TTFT p90 109-165 ms, a third user (who waits a whole reply) 800-990 ms
# with 16-token replies on one 2-core machine; on a faster one (17 ms a decode step) the third
# user's wait was 270-290 ms and 3 and 4 users passed 300 ms. The reply is 32 tokens: a third
# user's wait is twice as long on any machine (~0.55 s at 17 ms a step), a TTFT of two users not.
# At 150 ms one slow moment failed the 2-user probe (a fresh-clone make test, 165 ms).
SLO = "ttft:p90<=300ms,errors<=1%"
# At max-num-seqs 2 both users run in step (same prompt, same reply length), so one stall of the
# machine during their prefill makes two slow TTFTs: in a 4 s window (14 requests) that is p90, and
# CI once measured the 2-user probe at p90 0.726 s where a 2-core machine measured 0.09-0.10 s. An
# 8 s window (~28 replies of 32 tokens at 17 ms a step, ~18 at twice that) takes two or three slow
# ones to move p90; the third user's wait (a third of the requests) still fails it. At 16 the
# answer only has to exceed the first: 4 s is enough.
DURATION_S = {2: "8", 16: "4"}
LOAD = ["--drain-timeout", "10", "--input-tokens", "16", "--output-tokens", "32"]


@pytest.fixture(scope="module")
def capacities(tmp_path_factory, vllm_cpu):
    """`tokenbench capacity` launches each engine itself, one at each max-num-seqs: the launch
    knob is what the two searches compare, so no shared server."""
    base = tmp_path_factory.mktemp("vllm-capacity")
    answers = {}
    for seqs in (2, 16):
        out = base / f"seqs{seqs}"
        engine = [*vllm_cpu.launch_flags(max_num_seqs=seqs, kv_cache_bytes=KV_CACHE_BYTES), "--api", "completions"]
        search = ["--slo", SLO, "--variable", "users", "--saturate-users", "16", "--max-probes", "4"]
        load = ["--duration", DURATION_S[seqs], *LOAD, "--ignore-eos", "--out", str(out), "--no-live"]
        proc = subprocess.run(
            [sys.executable, "-m", "tokenbench", "capacity", *engine, *search, *load],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        line = proc.stderr.strip().splitlines()[-1]
        answers[seqs] = (json.loads((out / "capacity.json").read_text()), f"{line}\n{_probes(out)}")
    return answers


def _probes(out: Path) -> str:
    """Each probe's TTFT distribution in its window, for a failure's message."""
    points = json.loads((out / "results.json").read_text())["points"]
    rows = []
    for p in points:
        t = p["ttft_s"]
        rows.append(
            f"{p['label']}: {p['requests_in_window']['ok']} ok, ttft p50 {t['p50']:.3f} p90 {t['p90']:.3f} "
            f"max {t['max']:.3f} s, e2e p50 {p['e2e_s']['p50']:.3f} s"
        )
    return "\n".join(rows)


def test_two_sequences_carry_two_users_under_the_ttft_objective(capacities):
    capacity, line = capacities[2]
    assert capacity["max_users"] == 2 and capacity["min_failing"] == 3, line
    assert line.startswith("max 2 users under ttft p90 ≤ 300 ms, errors ≤ 1% (next 3 failed: ttft p90 ")


def test_sixteen_sequences_carry_more(capacities):
    small, _ = capacities[2]
    large, line = capacities[16]
    assert large["max_users"] is not None and large["max_users"] > small["max_users"], line
    assert len(large["decisions"]) <= 4
