"""Fixtures: synthetic run and experiment directories (builders in report_synthetic.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_synthetic import (
    EVIL,
    RATES,
    SERVERS,
    SLO,
    point,
    rate_points,
    results,
    users_points,
    write_experiment,
    write_run,
)


@pytest.fixture
def rate_experiment(tmp_path: Path) -> Path:
    return write_experiment(tmp_path / "exp-rates", "rate-sweep", SERVERS, {"rates": RATES}, 3, rate_points, slo=SLO)


@pytest.fixture
def users_experiments(tmp_path: Path) -> tuple[Path, Path]:
    """Two users experiments with the same server, 3 trials each; the second has 10% more
    throughput and the same TTFT (up to noise)."""
    servers = {"vllm": ("vllm", {})}
    a = write_experiment(tmp_path / "exp-a", "users-a", servers, {"users": [1, 4, 16]}, 3, users_points(1.0))
    b = write_experiment(tmp_path / "exp-b", "users-b", servers, {"users": [1, 4, 16]}, 3, users_points(1.10))
    return a, b


@pytest.fixture
def evil_run(tmp_path: Path) -> Path:
    """A run whose model, backend and point label try to inject HTML, with a point where nothing
    succeeded (every latency null) and no server metrics."""
    good = point(0, "users", 4, ramp_s=10.0, tokens_per_s=400.0, ttft_s=0.2, steady_rates=[400, 400, 390, 395])
    good["label"] = '4 users <img src=x onerror="alert(2)">'
    dead = point(
        1,
        "users",
        8,
        start_s=40.0,
        tokens_per_s=None,
        rps=None,
        ttft_s=None,
        tpot_s=None,
        outcomes={"http_error": 30},
        server=False,
        steady_rates=[0.0] * 4,
        preemptions=None,
    )
    for w in dead["timeseries"]:
        w["output_tokens_per_s"] = 0.0  # nothing arrived (a window always has a rate)
        w["ttft_s_mean"] = w["ttft_s_p90"] = None
        w["errors"] = 7
    data = results([good, dead], backend="<b>evil</b>", model=EVIL)
    return write_run(tmp_path / "evil-run", data)
