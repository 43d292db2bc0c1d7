"""--prefix-cache reset in an experiment whose launched engine has no reset control (trtllm's
profile, its command replaced by the mock with a known-answer prefix cache): the server is started
afresh for every cell, so each cell's first point starts cold ("done" by the restart) and its
later points say not_supported."""

import json
import subprocess
import sys

import yaml

WRAPPER = """
import sys
from pathlib import Path
from tokenbench.mock import MockSettings, serve
with open(Path(__file__).with_suffix(".starts"), "a") as f:
    f.write("start\\n")
args = sys.argv[1:]
serve(MockSettings(ttft_ms=1, itl_ms=1, cache_block_tokens=4), port=int(args[args.index("--port") + 1]))
"""


def test_a_launched_engine_without_a_reset_is_restarted_for_every_cell(tmp_path):
    wrapper = tmp_path / "fake_trtllm.py"
    wrapper.write_text(WRAPPER)
    spec = {
        "name": "restart",
        "backends": [{"label": "t", "backend": "trtllm", "model": "m", "engine_bin": f"{sys.executable} {wrapper}"}],
        "load": {"users": [1, 1]},
        "stop": {"max_requests": 10},
        "dataset": {"input_tokens": 8, "output_tokens": 2, "num_prompts": 2},
        "trials": 2,
        "api": "completions",
        "prefix_cache": "reset",
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "exp"
    cmd = [sys.executable, "-m", "tokenbench", "experiment", "run", str(path), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert wrapper.with_suffix(".starts").read_text().count("start") == 2  # one server per cell
    state = json.loads((out / "experiment.json").read_text())
    assert len(state["cells"]) == 2
    for cell in state["cells"].values():
        results = json.loads((out / cell["run_dir"] / "results.json").read_text())
        first, second = (p["prefix_cache"] for p in results["points"])
        assert (first["reset"], second["reset"]) == ("done", "not_supported")
        assert "freshly started" in first["reset_detail"]
        # two 8-word prompts alternately: 2 cold, then 4 of 8 tokens hit; cold again in each cell
        assert first["hit_rate"] == 0.4 and first["hit_rate_source"] == "usage_cached_tokens"
        assert second["hit_rate"] == 0.5  # not reset: every send of the second point hits
