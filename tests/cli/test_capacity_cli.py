"""tokenbench capacity: run's options shared, a malformed objective refused naming it (exit 2
before any load), and a server that meets the SLO at no load answered with exit 0."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
import typer.main
from typer.testing import CliRunner

from tokenbench.cli import app
from tokenbench.results import SCHEMA_PATH

URL = ["--url", "http://127.0.0.1:9"]  # nothing listens: the errors come before any request


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--slo", "ttft<=500ms"], "--slo part 'ttft<=500ms': no statistic"),
        (["--slo", "ttft:p90<500ms"], "only <= is supported"),
        (["--slo", "ttft=500ms"], "write ttft:p90<=500ms"),
        (["--slo", "errors<=1%", "--variable", "qps"], "--variable must be rate or users"),
        (["--slo", "errors<=1%", "--tolerance", "0"], "--tolerance: Input should be greater than 0"),
        (["--slo", "errors<=1%", "--trials", "0"], "--trials: Input should be greater than 0"),
        (["--slo", "errors<=1%", "--users", "4"], "No such option: --users"),
        (["--slo", "errors<=1%", "--dataset", "trace"], "--dataset trace replays its own schedule"),
        (["--slo", "errors<=1%", "--max-concurrency", "4"], "add a queue objective"),
        (["--slo", "errors<=1%", "--warmup", "-1"], "a duration cannot be negative"),
    ],
)
def test_bad_input_exits_2_naming_what_to_fix(args, needle):
    result = CliRunner().invoke(app, ["capacity", *URL, *args])
    assert result.exit_code == 2, result.output
    assert needle in " ".join(result.output.split()), result.output


def test_it_takes_runs_options_but_the_load_values_and_runs_slo():
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    run = {o for p in commands["run"].params for o in p.opts}
    capacity = {o for p in commands["capacity"].params for o in p.opts}
    own = {"--slo", "--variable", "--tolerance", "--trials", "--max-probes", "--saturate-users"}
    own |= {"--predict"}  # the server model: search a server model instead (cli/model.py)
    trace = {"--replay-speed", "--replay-start", "--replay-end", "--replay-jitter", "--trace-format", "--block-size"}
    trace |= {"--trace-model", "--trace-log-type", "--context-tokens", "--over-context"}
    # --slo and --trials: run has its own of each (--trials: each point N times; the search's: per probed value)
    assert capacity - run == own - {"--slo", "--trials"}
    staged = {"--stages", "--load-shape"}  # one point whose load is its own: nothing to search
    run_file = {"--config", "--print-config", "--dry-run"}  # run's own: a run file and the plan (cli/run.py)
    assert run - capacity == {"--users", "--rate"} | trace | staged | run_file
    assert "--dataset-path" in capacity and "--max-num-seqs" in capacity and "--header" in capacity


def test_a_server_failing_every_probe_is_answered_with_exit_0(mock_process, tmp_path):
    url = mock_process(ttft_ms=50, itl_ms=5, max_streams=2)
    out = tmp_path / "cap"
    cmd = [sys.executable, "-m", "tokenbench", "capacity", "--url", url, "--slo", "ttft:p90<=10ms,errors<=1%"]
    cmd += ["--max-probes", "2", "--saturate-users", "4", "--duration", "2", "--input-tokens", "8"]
    cmd += ["--output-tokens", "5", "--no-live", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("no load meets the SLO (ttft p90 ≤ 10 ms, errors ≤ 1%): the lowest probe, "), last
    capacity = json.loads((out / "capacity.json").read_text())
    jsonschema.validate(capacity, json.loads((SCHEMA_PATH.parent / "capacity.schema.json").read_text()))
    assert capacity["max_passing"] is None and capacity["stopped_by"] == "budget" and capacity["answer"] == last
    assert len(capacity["probes"]) == 2 and not any(p["passed"] for p in capacity["probes"])
    ttft = capacity["probes"][0]["objectives"][0]
    assert ttft["name"] == "ttft" and ttft["measured"] >= 0.05 and ttft["margin"] < 0
    # one run directory like any run's: recompute derives its points again
    again = subprocess.run([sys.executable, "-m", "tokenbench", "recompute", str(out)], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert len(json.loads((out / "results.json").read_text())["points"]) == 3
    # and the report reads it (a users point, then rate points)
    report = subprocess.run([sys.executable, "-m", "tokenbench", "report", str(out)], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    assert (out / "report.html").exists()


def test_predict_searches_a_model_and_replicas_need_it(tmp_path):
    """capacity --predict MODEL: the search's own plan against a model, capacity.json as usual (a
    model of 4 slots, 10 ms steps, 40 ms overhead, 32-token replies holds 4 / 0.36 s = 11.1 req/s)."""
    from tokenbench.model.params import Param, ServerModel

    values = {"step_base_s": 0.010, "first_token_overhead_s": 0.040, "max_num_seqs": 4.0}
    model = ServerModel(params={k: Param(value=v, constrained=True) for k, v in values.items()})
    path = tmp_path / "m.json"
    model.save(path)
    out = tmp_path / "cap"
    args = ["capacity", "--predict", str(path), "--slo", "ttft:p90<=1s", "--output-tokens", "32", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    answer = json.loads((out / "capacity.json").read_text())
    assert 0.8 * 11.1 <= answer["max_rate_per_s"] <= 11.1 * 1.02
    assert json.loads((out / "results.json").read_text())["predicted"]["model"] == str(path)
    refused = CliRunner().invoke(app, ["capacity", "--url", "http://x", "--slo", "ttft:p90<=1s", "--replicas", "2"])
    assert refused.exit_code == 2 and "--replica-url" in refused.output
