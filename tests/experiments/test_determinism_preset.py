"""The determinism preset (greedy answers at 1 user, 8 users, 1 user again) and its study run
against the mock scripted to change the answers of requests that arrive above K in flight: the
answers changed with the load are the ones the mock logged as diverged, and the noise floor is 0."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from tokenbench.experiments.presets import preset, preset_data
from tokenbench.experiments.spec import expand


def test_each_cell_runs_low_high_low_with_every_prompt_once_greedy_and_kept():
    for scale in ("small", "full", "ci"):
        (first, *_) = expand(preset("determinism", scale))
        cell = first.cells[0]
        assert [p.users for p in cell.config.loads] == [1, 8, 1]
        assert cell.config.keep_text and cell.config.target.temperature == 0.0
        assert cell.config.prefix_cache == "reset"  # each point from an empty cache
        assert cell.config.stop.max_requests == cell.config.dataset.num_prompts
    assert [p.backend.name for p in expand(preset("determinism", "full"))] == ["vllm", "sglang"]


def _get(url: str, path: str) -> dict:
    import urllib.request

    with urllib.request.urlopen(url + path) as resp:
        return json.loads(resp.read())


def test_the_answers_changed_with_load_are_the_scripts(mock_server, tmp_path):
    url = mock_server(ttft_ms=40, itl_ms=2, diverge_above_in_flight=3, diverge_at=5)
    doc = {**preset_data("determinism", "ci"), "backends": [{"url": url, "label": "mock", "backend": "vllm"}]}
    spec = tmp_path / "determinism.yaml"
    spec.write_text(yaml.safe_dump(doc))
    out = tmp_path / "exp"
    cmd = [sys.executable, "-m", "tokenbench", "experiment", "run", str(spec), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    diverged = sum(d["diverged_at"] is not None for d in _get(url, "/mock/deliveries").values())
    assert 0 < diverged < 16  # the first 3 of the 8 users' requests came at or below 3 in flight
    (cell,) = (out / "cells").iterdir()
    agreement = json.loads((cell / "agreement.json").read_text())
    loaded, floor = agreement["points"]
    assert (loaded["pairs"], loaded["pairs"] - loaded["identical"]) == (16, diverged)
    assert {r["first_diff_word"] for r in loaded["requests"] if not r["identical"]} == {5}
    assert (floor["pairs"], floor["identical"]) == (16, 16)  # the same low load again: nothing changed
    assert f"answers changed with load: {diverged} of 16 at 8 users" in proc.stdout + proc.stderr
    assert "noise floor (the low load again): 0 of 16" in proc.stdout + proc.stderr
    # the report of the experiment shows each cell's comparisons
    from tokenbench.report.read.load import load_inputs

    (shown,) = load_inputs([out]).agreements
    assert [p.label for p in shown.points] == ["1 users vs 8 users", "1 users vs 1 users (again: the noise floor)"]
