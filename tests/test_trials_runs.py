"""`run --trials N` (config.RunConfig.trials): each load point N times in a row, a mean ± 95% CI
per load in the console, the points at one load read as its trials by the report and compare."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from run_helpers import config

from tokenbench.cli.flags import run_options
from tokenbench.cli.run_flags import run_config
from tokenbench.compare import comparison
from tokenbench.config import StopConfig, UsersLoad
from tokenbench.report.read.run_dir import read_run
from tokenbench.run import repeated, run


def test_the_flag_reaches_the_settings_and_the_capacity_search_keeps_its_own():
    from tokenbench.cli.capacity import OPTIONS

    params: dict[str, Any] = {o.param: None for o in run_options()}
    params.update(users="2,4", max_requests=4, trials=3)
    cfg = run_config(params)
    assert cfg.trials == 3
    assert [load.users for load in repeated(cfg.loads, cfg.trials)] == [2, 2, 2, 4, 4, 4]
    assert [o.name for o in OPTIONS].count("--trials") == 1  # capacity's: points per probed value


def test_two_trials_of_a_point_give_mean_and_ci_and_a_testable_compare(mock_server, tmp_path):
    url = mock_server(ttft_ms=20, itl_ms=5)
    cfg = config(url, tmp_path, [UsersLoad(users=2)], StopConfig(max_requests=6), trials=2)
    out = Console(record=True, width=300, color_system=None)
    result = run(cfg, out)
    assert [p["label"] for p in result.results["points"]] == ["2 users", "2 users"]
    text = out.export_text()
    assert "each load over its trials (mean ± 95% CI)" in text and "±" in text
    [row] = read_run(result.run_dir).rows  # one load, its two points the trials
    assert row.num_trials == 2 and row.outcomes["ok"] == sum(p["requests"]["ok"] for p in result.results["points"])
    assert len(row.metrics["output_tokens_per_s"].values) == 2
    same = comparison([result.run_dir, result.run_dir])
    tput = next(r for r in same.rows if r.metric == "output_tokens_per_s")
    assert tput.p_value == 1.0 and tput.significant is False  # tested, not n/a
