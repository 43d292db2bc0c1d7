"""--server-traces: where the server is launched for more than one run: an experiment's
launched engine (vLLM's profile, its command replaced by the mock with its OTLP exporter) is
pointed at the receiver once, every cell's run listens on that port in turn, and every point of
every cell gets its server phases; a capacity search launching its own engine the same."""

import json
import subprocess
import sys

import yaml

from tokenbench.report.read.load import load_inputs
from tokenbench.report.sections.charts import phases_chart

# the mock as `vllm serve`: it exports its spans where --otlp-traces-endpoint says (vLLM's own flag)
WRAPPER = """
import sys
from pathlib import Path
from tokenbench.mock import MockSettings, serve
args = sys.argv[1:]
endpoint = args[args.index("--otlp-traces-endpoint") + 1] if "--otlp-traces-endpoint" in args else ""
with open(Path(__file__).with_suffix(".args"), "a") as f:
    f.write(" ".join(args) + "\\n")
serve(MockSettings(ttft_ms=5, itl_ms=1, max_streams=1, otlp_endpoint=endpoint), port=int(args[args.index("--port") + 1]))
"""


def _wrapper(tmp_path):
    wrapper = tmp_path / "fake_vllm.py"
    wrapper.write_text(WRAPPER)
    return wrapper


def _joined_everywhere(results):
    for point in results["points"]:
        phases = point["server_phases"]
        assert phases["requests"] > 0 and phases["joined_share"] == 1.0, phases
        assert phases["unknown_spans"] == 0 and phases["late_spans"] == 0
        assert phases["phases"]["prefill"]["p50"] >= 0.004  # the mock's scripted 5 ms


def test_an_experiments_launched_engine_sends_every_cells_spans(tmp_path):
    wrapper = _wrapper(tmp_path)
    spec = {
        "name": "traced",
        "backends": [{"label": "v", "backend": "vllm", "model": "m", "engine_bin": f"{sys.executable} {wrapper}"}],
        "load": {"users": [2]},
        "stop": {"max_requests": 4},
        "dataset": {"input_tokens": 4, "output_tokens": 3, "num_prompts": 2},
        "trials": 2,
        "api": "completions",
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "exp"
    cmd = [sys.executable, "-m", "tokenbench", "experiment", "run", str(path), "--out", str(out), "--server-traces"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    launches = wrapper.with_suffix(".args").read_text().splitlines()
    assert len(launches) == 1 and "--otlp-traces-endpoint http://127.0.0.1:" in launches[0]  # one launch, pointed
    assert "vLLM sends its spans to http://127.0.0.1:" in proc.stderr
    state = json.loads((out / "experiment.json").read_text())
    assert state["spec"]["server_traces"] is True and len(state["cells"]) == 2
    for cell in state["cells"].values():
        assert cell["status"] == "ok"
        run_dir = out / cell["run_dir"]
        assert (run_dir / "server_spans.jsonl").is_file()
        _joined_everywhere(json.loads((run_dir / "results.json").read_text()))
    # the report shows the cells' phases: a bar per point and trial, the configuration's slowest requests
    data = load_inputs([out])
    assert sorted(p.label for p in data.phases) == ["2 users · trial 1", "2 users · trial 2"]
    ttfts = [r.ttft_s for r in data.slowest]
    assert len(ttfts) == 8 and ttfts == sorted(ttfts, reverse=True)  # 2 cells x 4 requests, slowest first
    assert all(r.phases_s["prefill"] is not None for r in data.slowest)
    assert [c.chart_id for c in phases_chart(data)] == ["server-phases"]


def test_a_capacity_search_launching_its_engine_gets_server_phases_on_every_probe(tmp_path):
    wrapper = _wrapper(tmp_path)
    out = tmp_path / "cap"
    cmd = [sys.executable, "-m", "tokenbench", "capacity", "--backend", "vllm", "--model", "m"]
    cmd += ["--engine-bin", f"{sys.executable} {wrapper}", "--server-traces", "--api", "completions"]
    cmd += ["--slo", "ttft:p90<=1s", "--max-probes", "1", "--saturate-users", "2", "--max-requests", "4"]
    cmd += ["--input-tokens", "4", "--output-tokens", "3", "--no-live", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--otlp-traces-endpoint http://127.0.0.1:" in wrapper.with_suffix(".args").read_text()
    results = json.loads((out / "results.json").read_text())
    assert len(results["points"]) >= 2  # the saturating probe, then the searched one(s)
    _joined_everywhere(results)
