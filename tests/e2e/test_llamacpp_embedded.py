"""End to end against the real embedded llama.cpp server (xllamacpp + SmolLM2-135M GGUF).

`tokenbench run` with no --url starts the server itself, benchmarks it and stops it.
"""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def embedded_run(tmp_path_factory):
    pytest.importorskip("xllamacpp")
    out = tmp_path_factory.mktemp("e2e") / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "tokenbench", "run", "--users", "2", "--ramp-up", "2", "--duration", "14",
         "--input-tokens", "32", "--output-tokens", "24", "--slo", "ttft=5s,tpot=1s",
         "--out", str(out), "--no-live"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stderr


def test_embedded_run_measures_a_real_server(embedded_run):
    out, stderr = embedded_run
    assert "server ready" in stderr and "results.json" in stderr
    results = json.loads((out / "results.json").read_text())
    point = results["points"][0]
    assert results["target"]["backend"] == "llamacpp-embedded"
    assert results["target"]["engine_version"] and results["target"]["cold_start_s"] > 0
    assert results["dataset"]["exact_lengths"] is True  # the server's /tokenize was used
    assert point["requests"]["ok"] >= 4
    assert point["requests"]["by_outcome"].get("ok") == point["requests"]["total"]
    assert 0 < point["ttft_s"]["mean"] < 5
    assert point["output_tokens_per_s"] > 0 and point["goodput_per_s"] > 0
    assert point["window_s"] == pytest.approx(12.0, abs=0.5)  # 14 s minus the 2 s ramp
    assert (out / "server.log").stat().st_size > 0


def test_server_usage_counts_match_what_was_streamed(embedded_run):
    out, _ = embedded_run
    records = [json.loads(line) for line in (out / "records.jsonl").open()]
    ok = [r for r in records if r["outcome"] == "ok"]
    assert ok and all(r["output_tokens_source"] == "server" for r in ok)
    assert all(1 <= r["output_tokens"] <= 24 for r in ok)
    # llama.cpp streams one token per chunk; an EOS or a split UTF-8 character makes one fewer chunk
    assert all(r["output_tokens"] - 2 <= len(r["chunk_times_s"]) <= r["output_tokens"] for r in ok)
    # the prompt is 32 content tokens plus the chat template
    assert all(r["prompt_tokens"] > 32 for r in ok)
