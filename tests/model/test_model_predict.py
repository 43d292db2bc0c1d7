"""A 1,000-row trace predicted and replayed on the mock: the model (fitted on two short rate runs)
against what the same replay measured, figure by figure; and the command line from fit to a
predicted results.json."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from run_helpers import config, mock_process, quiet

from tokenbench.config import DatasetConfig, RateLoad, ReplayLoad, RunConfig, StopConfig, TargetConfig
from tokenbench.model.fit import fit
from tokenbench.model.params import WAIT_SHARE
from tokenbench.model.validate import figures, validate
from tokenbench.run import run

# Serial (run alone, never beside other tests): a model fitted on mock runs predicts their figures
# within 5%.
pytestmark = pytest.mark.serial

ROWS, BLOCK = 1000, 16
TRACE_SPAN_MS, SPEED = (
    40_000,
    6.0,
)  # 40 s of trace time replayed in 6.7 s: 150 req/s (250 overran the client on a busy machine)
# The aim for mean figures below saturation: 15%. The mock's TTFT is flat beside any load; a
# step-synchronous model made each request that came during a step wait for its end, +2.5 ms on the
# replay's 20.4 ms (+14-16%); the fit now finds that wait's share (0 here) from the fit runs' TTFT.
STATED_ERROR = 0.15


def _write_trace(path):
    lines = []
    for i in range(ROWS):
        tokens = 32 + (i * 37) % 200
        blocks = -(-tokens // BLOCK)
        row = {
            "timestamp": i * TRACE_SPAN_MS // ROWS,
            "input_length": tokens,
            "output_length": 4 + i % 5,
            "hash_ids": list(range(i * 100, i * 100 + blocks)),  # no prefix shared
        }
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def trace_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("trace")
    trace = _write_trace(base / "trace.jsonl")
    dirs = {}
    with mock_process(ttft_ms=20, itl_ms=5, max_streams=64) as url:
        for rate in (40, 120):
            cfg = config(url, base / f"r{rate}", [RateLoad(rate_per_s=rate)], StopConfig(duration_s=3), output_tokens=6)
            dirs[rate] = run(cfg, quiet()).run_dir
        replay = RunConfig(
            target=TargetConfig(url=url, api="chat"),
            loads=[ReplayLoad(speed=SPEED)],
            stop=StopConfig(schedule_ends=True, drain_timeout_s=10),
            dataset=DatasetConfig(name="trace", path=trace, block_size=BLOCK),
            live=False,
            out_dir=base / "replay",
        )
        dirs["replay"] = run(replay, quiet()).run_dir
    return dirs


def test_a_1000_row_trace_predicted_within_the_stated_error(trace_runs, tmp_path):
    replayed = json_point(trace_runs["replay"])
    if replayed.client is not None and replayed.client.limited:  # the measured side is not the server's
        pytest.skip(f"the replay's client was limited ({replayed.client.limited_by}): a busy machine")
    model = fit([trace_runs[40], trace_runs[120]])
    share = model.params[WAIT_SHARE]  # the mock's streams run on their own clocks: nearer 0 than 1 (0.29 once)
    assert share.constrained and share.value is not None and share.value < 0.5, share.note
    result = validate(model, "m.json", trace_runs["replay"], tmp_path / "pred")
    (check,) = result.points
    measured = figures(replayed)
    assert measured["output_tokens_per_s"] is not None
    for key in ("ttft_mean_s", "tpot_mean_s", "output_tokens_per_s"):
        assert abs(check.error[key]) <= STATED_ERROR, (key, check.predicted[key], check.measured[key])
    requests = json.loads((tmp_path / "pred" / "results.json").read_text())["points"][0]["requests"]["ok"]
    assert requests == ROWS


def json_point(run_dir):
    from tokenbench.results import RunResults

    return RunResults.from_json(json.loads((run_dir / "results.json").read_text())).points[0]


def test_fit_then_predict_on_the_command_line(trace_runs, tmp_path):
    def tokenbench(*args):
        return subprocess.run([sys.executable, "-m", "tokenbench", *args], capture_output=True, text=True, timeout=60)

    model = tmp_path / "m.json"
    fitted = tokenbench("model", "fit", str(trace_runs[40]), str(trace_runs[120]), "--out", str(model))
    assert fitted.returncode == 0, fitted.stderr
    assert "step_base_s" in fitted.stderr and "not constrained" in fitted.stderr
    out = tmp_path / "pred"
    args = ["model", "predict", str(model), "--rate", "50,100", "--duration", "5s", "--out", str(out)]
    predicted = tokenbench(*args, "--knob", "max_num_seqs=2", "--replicas", "2", "--routing", "least-loaded")
    assert predicted.returncode == 0, predicted.stderr
    results = json.loads((out / "results.json").read_text())
    assert [p["label"] for p in results["points"]] == ["50 req/s poisson", "100 req/s poisson"]
    assert results["predicted"]["replicas"] == 2 and results["predicted"]["knobs"]["max_num_seqs"] == 2
    bad = tokenbench("model", "predict", str(model), "--rate", "5", "--knob", "slots=3", "--out", str(tmp_path / "x"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--knob" in bad.stderr
