"""The server-overhead preset at ci scale (small's study at its highest rate), live: the embedded llama.cpp server alone, behind
Triton (PyTriton's tritonserver, scripts/setup_triton.sh, which `make test` runs) and behind Ray
Serve (the ray extra), at 2 req/s, 2 trials; then its report. Known answers: the layer study
is planned as the preset says, every request of every cell ends ok, the engine answers the same
16 tokens behind every layer, and each layer is compared with the engine alone at each rate."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
LABELS = ["llamacpp", "triton-llamacpp", "ray-llamacpp"]
RATES = [2.0]  # presets.CI_STOPS: small's 1 and 2 req/s, CI's 2
COMPARED = 8  # report.layers.OVERHEAD_METRICS


def _tokenbench(*args):
    return subprocess.run(
        [sys.executable, "-m", "tokenbench", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.fixture(scope="module")
def study(tmp_path_factory, embedded_gguf, ray_extra, triton_venv):
    """Its own launches: the engine alone and each layer launched in front of it are the study."""
    out = tmp_path_factory.mktemp("overhead") / "exp"
    proc = _tokenbench("experiment", "run", "--preset", "server-overhead", "--scale", "ci", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-6000:]
    return out, json.loads((out / "experiment.json").read_text()), proc.stderr


def test_every_cell_of_the_layer_study_ran_ok(study):
    out, state, _ = study
    assert state["complete"] is True
    assert [(s["label"], s["status"], s.get("upstream")) for s in state["servers"]] == [
        ("llamacpp", "ok", None),
        ("triton-llamacpp", "ok", "llamacpp"),
        ("ray-llamacpp", "ok", "llamacpp"),
    ]
    assert sorted((c["server"], c["trial"]) for c in state["cells"].values()) == sorted(
        (label, t) for label in LABELS for t in (1, 2)
    )
    for cell in state["cells"].values():
        records = [json.loads(x) for x in (out / cell["run_dir"] / "records.jsonl").read_text().splitlines()]
        assert records and all(r["outcome"] == "ok" for r in records), cell
        # ignore_eos (min_tokens through Triton): 16 tokens from the engine behind every layer
        assert {r["output_tokens"] for r in records} == {16}, cell
    rows = {(r["server"], r["load"]["rate_per_s"]): r["metrics"] for r in state["aggregates"]}
    assert sorted(rows) == sorted((label, rate) for label in LABELS for rate in RATES)
    for metrics in rows.values():
        assert metrics["ttft_s_p50"]["n"] == 2 and metrics["e2e_s_p99"]["n"] == 2
        assert metrics["error_rate"]["mean"] == 0


def test_each_layer_is_compared_with_the_engine_alone_in_the_report(study, tmp_path):
    out, _, stderr = study
    assert "serving layers: overhead = layer − engine alone" in stderr
    from tokenbench.report.read.load import load_inputs
    from tokenbench.report.sections.layers import overheads

    items = overheads(load_inputs([out]))
    assert sorted({(o.layer, o.engine) for o in items}) == [
        ("ray-llamacpp", "llamacpp"),
        ("triton-llamacpp", "llamacpp"),
    ]
    assert len(items) == 2 * len(RATES) * COMPARED
    ttft = [o for o in items if o.metric == "ttft_s_p50"]
    assert all(o.diff.paired and o.diff.delta is not None and o.diff.delta_ci95 is not None for o in ttft)
    proc = _tokenbench("report", str(out), "--out", str(tmp_path / "report"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = (tmp_path / "report" / "report.md").read_text()
    assert "## Serving layers" in md and "| triton-llamacpp | llamacpp | 2 req/s | TTFT p50 (ms) |" in md
