"""A search experiment end to end: two attached mocks of known capacity (``--max-streams`` 1 and 2:
N streams generate at once, the rest wait FIFO; capacity = N / service time, service time = TTFT +
(n - 1) x ITL = 0.14 s for 10 one-token chunks: 7.1 and 14.3 req/s). Each cell is a capacity search
with short probes; experiment.json summarises both, and the report ranks the larger first."""

import json
import subprocess
import sys

import yaml

from tokenbench.results import Experiment
from tokenbench.results.capacity import CapacityResult

TTFT_MS, ITL_MS, TOKENS = 50, 10, 10
SERVICE_S = (TTFT_MS + (TOKENS - 1) * ITL_MS) / 1000


def _tokenbench(*args):
    return subprocess.run([sys.executable, "-m", "tokenbench", *args], capture_output=True, text=True, timeout=300)


def test_a_search_experiment_ranks_the_larger_capacity_first(start_mock, tmp_path):
    urls = {n: start_mock(ttft_ms=TTFT_MS, itl_ms=ITL_MS, max_streams=n) for n in (1, 2)}
    spec = {
        "name": "search-exp",
        "backends": [{"label": f"streams{n}", "url": url, "backend": "vllm"} for n, url in urls.items()],
        "search": {"slo": "ttft:p90<=120ms,errors<=1%", "arrival": "constant", "max_probes": 3, "saturate_users": 4},
        "stop": {"duration_s": 2},
        "dataset": {"input_tokens": 16, "output_tokens": TOKENS},
        "api": "chat",
    }
    path, out = tmp_path / "exp.yaml", tmp_path / "out"
    path.write_text(yaml.safe_dump(spec))
    run = _tokenbench("experiment", "run", str(path), "--out", str(out))
    assert run.returncode == 0, run.stderr[-3000:]

    state = Experiment.from_json(json.loads((out / "experiment.json").read_text()))
    assert state.complete and [c.status for c in state.cells.values()] == ["ok", "ok"]
    rows = {r.server: r for r in state.capacity}
    assert set(rows) == {"streams1", "streams2"}
    one, two = rows["streams1"], rows["streams2"]
    for row in rows.values():  # each summary is its cell's capacity.json in short
        result = CapacityResult.model_validate(json.loads((out / row.run_dir / "capacity.json").read_text()))
        assert (row.max_passing, row.min_failing, row.stopped_by) == (
            result.max_passing,
            result.min_failing,
            result.stopped_by,
        )
        assert row.variable == "rate" and row.trials == 1 and len(result.decisions) <= 3
        assert row.requests_per_s is not None and row.requests_per_s.n == 1 and row.requests_per_s.ci95 is None
        assert row.usd_per_million_output_tokens is None  # unpriced
    # one stream's capacity (7.1 req/s) is below what two streams sustain (14.3 req/s)
    assert one.max_passing is not None and two.max_passing is not None
    assert one.max_passing < 1 / SERVICE_S * 1.1 < 2 / SERVICE_S * 0.75 < two.max_passing
    assert one.min_failing is not None and one.min_failing < two.max_passing

    report = _tokenbench("report", str(out))
    assert report.returncode == 0, report.stderr[-3000:]
    md = (out / "report.md").read_text()
    ranking = md[md.index("### Capacity under the SLO") : md.index("### SLO attainment vs load")]
    assert f"| 1 | streams2 | {two.max_passing:g} req/s |" in ranking
    assert f"| 2 | streams1 | {one.max_passing:g} req/s |" in ranking
    assert "Highest capacity: streams2" in ranking
    attainment = md[md.index("### SLO attainment vs load") :]
    assert f"| streams2 | {two.max_passing:g} req/s | 1 | pass | ttft p90 |" in attainment
    assert f"| streams1 | {one.min_failing:g} req/s | 1 | FAIL | ttft p90 |" in attainment
    assert attainment.count("◀ max passing") == 2 and attainment.count("◀ stopped passing") == 2
    assert (out / "charts" / "capacity_attainment.png").is_file()

    # one cell alone (a capacity run directory) shows its answer and probes too
    single = _tokenbench("report", str(out / one.run_dir), "--out", str(tmp_path / "single"))
    assert single.returncode == 0, single.stderr[-3000:]
    single_md = (tmp_path / "single" / "report.md").read_text()
    assert f"| 1 | vllm | {one.max_passing:g} req/s |" in single_md and "◀ max passing" in single_md
