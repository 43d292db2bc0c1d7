"""write_report (report/__init__.py): directories -> report.html, report.md and charts/*.png."""

from __future__ import annotations

import json
from pathlib import Path

from report_synthetic import point, results, write_run

from tokenbench.report import write_report


def test_write_report_experiment(rate_experiment: Path, tmp_path: Path) -> None:
    files = write_report([rate_experiment], tmp_path / "out")
    html = files.html.read_text()
    assert html.count('<script type="text/javascript">') == 1  # plotly.js inlined once
    body = html.split("</head>")[1]
    assert "<script src" not in html and "https://" not in body  # nothing fetched: works offline
    names = {p.name for p in files.charts}
    assert {"throughput-vs-rate.png", "knob-max-num-seqs.png", "pareto.png", "errors.png"} <= names
    assert all(p.stat().st_size > 5_000 for p in files.charts)
    for p in files.charts:  # every PNG has a div in the page
        assert f'id="chart-{p.stem}"' in html
    # the knob chart joins the two vLLM configurations on max_num_seqs
    assert "Throughput vs max_num_seqs" in html
    assert "saturates at 4 req/s" in html and "TTFT p50 2.5x the lowest rate" in html

    md = files.markdown.read_text()
    assert md.startswith("# tokenbench report")
    for heading in (
        "## Inputs",
        "## Verdict",
        "### Best at each load",
        "### Service-level objectives",
        "### Saturation",
        "## Headline numbers",
        "## Stability over time",
        "## Charts",
    ):
        assert heading in md
    assert "vllm_max_num_seqs=16 saturates at 4 req/s" in md
    assert "sglang meets the SLO (≥ 90% good requests) up to 8 req/s" in md
    assert "SLO: TTFT ≤ 500 ms, TPOT ≤ 50 ms" in md
    assert "DEGRADED in 3 of 3" in md and "fell in 3 of 3 trials, by 15.0% on average" in md
    assert "± " in md  # CIs from 3 trials
    for p in files.charts:
        assert f"](charts/{p.name})" in md


def test_users_report_has_the_studys_figures(users_experiments: tuple[Path, Path], tmp_path: Path) -> None:
    files = write_report(list(users_experiments), tmp_path / "out")
    names = {p.name for p in files.charts}
    assert {"ttft-vs-users.png", "throughput-vs-users.png"} <= names
    assert "throughput-vs-rate.png" not in names
    html = files.html.read_text()
    # same server label in two experiments: told apart by the experiment's name
    assert "vllm (users-a)" in html and "vllm (users-b)" in html


def test_real_schema_run(tmp_path: Path) -> None:
    """A run with one point and no SLO: no verdict picks, no crash, header facts shown."""
    run = write_run(
        tmp_path / "r", results([point(0, "users", 16, steady_rates=[60.0, 62.0, 61.0])], engine_version="9.9.9")
    )
    files = write_report([run], tmp_path / "out")
    html = files.html.read_text()
    assert "9.9.9" in html and "25.5 s" in html and "smollm2" in html and "synthetic" in html
    assert "One configuration" in html and "No SLO was set" in html


def test_experiment_where_every_server_failed(tmp_path: Path) -> None:
    exp_dir = tmp_path / "failed"
    exp_dir.mkdir()
    error = "vLLM did not become ready: exited with code 1 <see log>"
    (exp_dir / "experiment.json").write_text(
        json.dumps(
            {
                "name": "all-failed",
                "description": "",
                "complete": False,
                "spec": {
                    "name": "all-failed",
                    "load": {"rates": [1.0]},
                    "trials": 2,
                    "backends": [{"backend": "vllm", "model": "m"}],
                    "slo": {"ttft_s": 1.0},
                },
                "servers": [
                    {
                        "label": "vllm",
                        "backend": "vllm",
                        "swept": {},
                        "status": "failed",
                        "error": error,
                        "cold_start_s": None,
                        "engine_version": None,
                    }
                ],
                "cells": {
                    f"vllm__default__t{t}": {
                        "server": "vllm",
                        "variant": "default",
                        "trial": t,
                        "status": "failed",
                        "error": "server did not start",
                        "run_dir": f"cells/vllm__default__t{t}",
                    }
                    for t in (1, 2)
                },
                "aggregates": [],
            }
        )
    )
    files = write_report([exp_dir], tmp_path / "out")
    assert files.charts == []
    md = files.markdown.read_text()
    assert "No load point finished" in md and "6 failed" not in md and "2 failed" in md
    assert "vLLM did not become ready: exited with code 1 &lt;see log&gt;" in md
    html = files.html.read_text()
    assert "No requests were measured" in html and "TTFT ≤ 1000 ms" in html
