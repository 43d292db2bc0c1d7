"""--prefix-cache on the embedded llama.cpp server (xllamacpp + SmolLM2-135M), launched by
tokenbench: one user alternating two prompts for two points. Reset erases every slot (the launch
gets a slot save path and --cache-ram 0, so nothing comes back from the host-RAM cache): each
point's first sending of each prompt is cold (timings.cache_n 0). Kept, the second point finds
both prompts cached from the first. The hit rate is llama.cpp's own: sum cache_n / sum (cache_n +
prompt_n) over the window's ok requests."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def _run(out, mode):
    cmd = [sys.executable, "-m", "tokenbench", "run", "--users", "1,1", "--max-requests", "6", "--api", "completions"]
    cmd += ["--input-tokens", "48", "--output-tokens", "4", "--num-prompts", "2", "--prefix-cache", mode]
    proc = subprocess.run([*cmd, "--out", str(out), "--no-live"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    cached = [[r["cached_prompt_tokens"] for r in records if r["point"] == p] for p in (0, 1)]
    return [p["prefix_cache"] for p in results["points"]], cached, results


@pytest.fixture(scope="module")
def runs(tmp_path_factory, embedded_gguf):
    base = tmp_path_factory.mktemp("llamacpp-prefix")
    return {mode: _run(base / mode, mode) for mode in ("reset", "keep")}


def test_reset_erases_every_slot_before_each_point(runs):
    caches, cached, results = runs["reset"]
    assert [c["reset"] for c in caches] == ["done", "done"], caches
    assert "--cache-ram" in results["target"]["command"] and "--slot-save-path" in results["target"]["command"]
    for point in cached:
        assert point[:2] == [0, 0] and all(n > 0 for n in point[2:]), cached  # cold, then the prefix reused
    assert caches[0]["hit_rate_source"] == caches[1]["hit_rate_source"] == "llamacpp_timings"
    # 48-token prompts; llama.cpp always evaluates the last token: 4 sends reuse 47 of 48
    assert [c["hit_rate"] for c in caches] == pytest.approx([4 * 47 / (6 * 48)] * 2)  # both start cold


def test_keep_lets_the_second_point_start_warm(runs):
    caches, cached, _ = runs["keep"]
    assert [c["reset"] for c in caches] == ["not_requested", "not_requested"]
    assert cached[0][:2] == [0, 0] and all(n > 0 for n in cached[1]), cached
    assert [c["hit_rate"] for c in caches] == pytest.approx([4 * 47 / (6 * 48), 47 / 48])
