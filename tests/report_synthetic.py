"""Builders of synthetic run and experiment directories with known numbers, in the exact shape
tokenbench writes (results.json as in a real run, experiment.json as the experiment runner writes
it). A module with a unique name, not conftest.py: tests import from it, and there are several
conftest modules in the suite."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from scipy.special import stdtrit  # the t quantile, as tokenbench computes it (scipy.stats cost 0.5 s to collect)

WINDOW_S = 5.0


def dist(mean: float | None, p50: float | None = None, p99: float | None = None, count: int = 20) -> dict:
    if mean is None:  # nothing measured: count 0, every statistic null (metrics.stats.distribution)
        return dict.fromkeys(("mean", "std", "min", "p50", "p90", "p95", "p99", "p999", "max"), None) | {"count": 0}
    p50 = mean if p50 is None else p50
    p99 = mean * 2 if p99 is None else p99
    return {
        "count": count,
        "mean": mean,
        "std": mean / 10,
        "min": mean / 2,
        "p50": p50,
        "p90": p99 * 0.8,
        "p95": p99 * 0.9,
        "p99": p99,
        "p999": p99,
        "max": p99,
    }


def windows(
    start_s: float, ramp_s: float, rates: list[float], drain: int = 1, ttft_s: float = 0.1, server: bool = True
) -> list[dict]:
    """Ramp windows (rate 5 tok/s), then one window per steady rate, then drain windows."""
    out = []
    t = start_s
    n_ramp = int(round(ramp_s / WINDOW_S))
    for i, rate in enumerate([5.0] * n_ramp + list(rates) + [2.0] * drain):
        is_ramp = i < n_ramp
        out.append(
            {
                "start_s": t,
                "end_s": t + WINDOW_S,
                "ramp": is_ramp,
                "active_users": 4,
                "in_flight": 3.5,
                "requests_per_s": rate / 100,
                "output_tokens_per_s": rate,
                "ttft_s_mean": ttft_s,
                "ttft_s_p90": ttft_s * 1.5,
                "errors": 0,
                "cancelled": 0,
                "server_running": 3.0 if server else None,
                "server_waiting": 0.5 if server else None,
                "server_kv_usage": 0.4 if server else None,
                "server_preemptions": 0.0 if server else None,
                "gpu_util_pct": None,
            }
        )
        t += WINDOW_S
    return out


def point(
    index: int,
    kind: str,
    value: float,
    *,
    start_s: float = 0.0,
    ramp_s: float = 0.0,
    tokens_per_s: float | None = 100.0,
    rps: float | None = 1.0,
    ttft_s: float | None = 0.1,
    ttft_p50_s: float | None = None,
    tpot_s: float | None = 0.02,
    outcomes: dict[str, int] | None = None,
    good_fraction: float | None = None,
    goodput_per_s: float | None = None,
    preemptions: float | None = 0.0,
    steady_rates: list[float] | None = None,
    server: bool = True,
) -> dict:
    outcomes = outcomes or {"ok": 20}
    steady_rates = steady_rates if steady_rates is not None else [tokens_per_s or 0.0] * 4
    duration_s = WINDOW_S * len(steady_rates)
    label = f"{int(value)} users" if kind == "users" else f"{value:g} req/s"
    load = (
        {"kind": "users", "users": int(value), "ramp_up_s": ramp_s, "think_time_s": 0.0}
        if kind == "users"
        else {"kind": "rate", "rate_per_s": value, "arrival": "poisson"}
    )
    load.update({"warmup_s": 0.0, "duration_s": duration_s, "max_requests": None})
    ramp_end = start_s + ramp_s
    load_end = ramp_end + duration_s
    requests = {
        "total": sum(outcomes.values()),
        "ok": outcomes.get("ok", 0),
        "by_outcome": outcomes,
        "retries": 0,
        "retried_requests": 0,
        "ok_without_end_marker": 0,
    }
    return {
        "index": index,
        "label": label,
        "load": load,
        "span": {"start_s": start_s, "ramp_end_s": ramp_end, "load_end_s": load_end, "end_s": load_end + WINDOW_S},
        "interrupted": False,
        "window_s": duration_s,
        "window": {"start_s": ramp_end, "end_s": load_end},
        "populations": {"distributions": "sent in the window", "rates": "the window", "goodput": "as requests/s"},
        "rate_period_s": duration_s,
        "backlog_growth_s": None,
        "offered_per_s": None,
        "requests": requests,
        "requests_in_window": requests,
        "ttft_s": dist(ttft_s, ttft_p50_s),
        "tpot_s": dist(tpot_s),
        "decode_speed_tokens_per_s": dist(None if tpot_s is None else 1 / tpot_s),
        "itl_s": dist(tpot_s),
        "e2e_s": dist(None if ttft_s is None else ttft_s + 2.0),
        "queue_s": dist(None if ttft_s is None else 0.001),
        "queue_s_censored": 0,
        "normalized_latency_s": dist(None),
        "output_tokens": 0 if tokens_per_s is None else tokens_per_s * duration_s,
        "output_tokens_per_s": tokens_per_s,
        "total_tokens_per_s": None if tokens_per_s is None else tokens_per_s * 2,
        "prompt_tokens_source": {"server": outcomes.get("ok", 0)},
        "requests_per_s": rps,
        "goodput_per_s": goodput_per_s,
        "good_fraction": good_fraction,
        "concurrency": {"mean": 3.5, "peak": 4},
        "tokens": {
            "output_tokens_source": {"server": outcomes.get("ok", 0)},
            "eos_counted_not_streamed": 0,
            "server_vs_client": {"compared": 0, "mismatched": 0, "mean_client_minus_server": None},
        },
        "server": server_figures(ttft_s, preemptions) if server else None,
        "server_whole_point": None,
        "gpu": GPU,
        "gpu_whole_point": GPU,
        "timeseries": windows(start_s, ramp_s, steady_rates, server=server, ttft_s=ttft_s or 0.0),
    }


GPU = {"available": False, "reason": "NVMLError_LibraryNotFound: NVML Shared Library Not Found"}


def server_figures(ttft_s: float | None, preemptions: float | None) -> dict:
    """A point's server figures (telemetry.summary.point_server's shape)."""
    return {
        "period_s": [0.0, 20.0],
        "scrapes": 20,
        "failed_scrapes": 0,
        "first_scrape_error": None,
        "bracket_s": [0.0, 20.0],
        "bracketed": True,
        "preemptions": preemptions,
        "generated_tokens": 1000.0,
        "prefix_cache_hits": None,
        "prefix_cache_queries": None,
        "prefix_cache_hit_rate": None,
        "running": {"mean": 3.0, "max": 4.0},
        "waiting": {"mean": 0.5, "max": 2.0},
        "kv_usage": {"mean": 0.4, "max": 0.6},
        "ttft_s_mean": ttft_s,
        "ttft_count": 10,
        "itl_s_mean": None,
        "itl_count": None,
        "client_ttft_s_matched": {"mean": ttft_s, "count": 10},
    }


def results(
    points: list[dict],
    *,
    backend: str = "vllm",
    model: str = "smollm2",
    slo: dict | None = None,
    engine_version: str = "0.32.0",
) -> dict:
    return {
        "tool": {"name": "tokenbench", "version": "0.1.0"},
        "computed_by": {"name": "tokenbench", "version": "0.1.0", "how": "run"},
        "target": {
            "url": "http://127.0.0.1:8000",
            "model": model,
            "api": "completions",
            "ignore_eos": False,
            "backend": backend,
            "engine": backend,
            "engine_version": engine_version,
            "cold_start_s": 25.5,
            "knobs": {"max_num_seqs": 16},
        },
        "dataset": {
            "name": "synthetic",
            "num_requests": 1000,
            "exact_lengths": True,
            "tokenizer": None,
            "system_prompt": False,
            "unique_prefix": True,
            "source": None,
        },
        "slo": slo or {"ttft_s": None, "tpot_s": None, "e2e_s": None},
        "clock": {"origin_monotonic_s": 1.0, "origin_unix_s": 1.7e9, "unit": "seconds"},
        "telemetry": {"samples": "samples.jsonl", "metrics_url": None, "interval_s": 1.0},
        "points": points,
        "interrupted": False,
    }


def write_run(path: Path, data: dict) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.json").write_text(json.dumps(data, indent=1))
    return path


def _ci(xs: list[float]) -> dict:
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    if not xs:
        return {"mean": None, "ci95": None, "n": 0, "values": []}
    mean = sum(xs) / len(xs)
    if len(xs) < 2:
        return {"mean": mean, "ci95": None, "n": 1, "values": xs}
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
    return {
        "mean": mean,
        "ci95": float(stdtrit(len(xs) - 1, 0.975)) * sd / math.sqrt(len(xs)),
        "n": len(xs),
        "values": xs,
    }


def _headline(p: dict) -> dict[str, float | None]:
    def d(key: str, stat: str):
        return (p.get(key) or {}).get(stat)

    req = p["requests"]
    srv = p.get("server") or {}
    return {
        "output_tokens_per_s": p["output_tokens_per_s"],
        "requests_per_s": p["requests_per_s"],
        "ttft_s_mean": d("ttft_s", "mean"),
        "ttft_s_p50": d("ttft_s", "p50"),
        "ttft_s_p99": d("ttft_s", "p99"),
        "tpot_s_mean": d("tpot_s", "mean"),
        "itl_s_mean": d("itl_s", "mean"),
        "e2e_s_mean": d("e2e_s", "mean"),
        "queue_s_mean": d("queue_s", "mean"),
        "goodput_per_s": p["goodput_per_s"],
        "good_fraction": p["good_fraction"],
        "error_rate": (req["total"] - req["ok"]) / req["total"] if req["total"] else None,
        "server_preemptions": srv.get("preemptions"),
        "server_ttft_s_mean": srv.get("ttft_s_mean"),
        "server_kv_usage_max": (srv.get("kv_usage") or {}).get("max"),
    }


def write_experiment(
    path: Path,
    name: str,
    servers: dict[str, tuple[str, dict]],
    loads: dict[str, list],
    trials: int,
    make_points: Callable[[str, int], list[dict]],
    *,
    slo: dict | None = None,
) -> Path:
    """servers: label -> (backend, swept). make_points(label, trial) -> the trial's points."""
    path.mkdir(parents=True, exist_ok=True)
    slo = slo or {"ttft_s": None, "tpot_s": None, "e2e_s": None}
    cells: dict[str, Any] = {}
    by_server: dict[str, list[list[dict]]] = {}
    for label, (backend, _swept) in servers.items():
        for trial in range(1, trials + 1):
            cell_id = f"{label}__default__t{trial}"
            pts = make_points(label, trial)
            write_run(path / "cells" / cell_id, results(pts, backend=backend, slo=slo))
            cells[cell_id] = {
                "server": label,
                "variant": "default",
                "trial": trial,
                "status": "ok",
                "error": None,
                "run_dir": f"cells/{cell_id}",
            }
            by_server.setdefault(label, []).append(pts)
    aggregates = []
    for label, trial_points in by_server.items():
        backend, swept = servers[label]
        for index, first in enumerate(trial_points[0]):
            per_trial = [_headline(tp[index]) for tp in trial_points]
            aggregates.append(
                {
                    "server": label,
                    "backend": backend,
                    "swept": swept,
                    "variant": "default",
                    "point": index,
                    "label": first["label"],
                    "load": first["load"],
                    "metrics": {k: _ci([h[k] for h in per_trial]) for k in per_trial[0]},
                }
            )
    exp = {
        "name": name,
        "description": f"synthetic {name}",
        "spec": {"name": name, "load": loads, "trials": trials, "slo": slo},
        "servers": [
            {
                "label": label,
                "backend": b,
                "swept": s,
                "status": "ok",
                "error": None,
                "cold_start_s": 20.0,
                "engine_version": "1.0",
            }
            for label, (b, s) in servers.items()
        ],
        "cells": cells,
        "aggregates": aggregates,
        "complete": True,
    }
    (path / "experiment.json").write_text(json.dumps(exp, indent=1))
    return path


# ---------------------------------------------------------------------------------------------
# the standard synthetic experiment: a rate sweep over three server configurations, 3 trials

RATES = [1.0, 2.0, 4.0, 8.0]
SLO = {"ttft_s": 0.5, "tpot_s": 0.05, "e2e_s": None}
# label -> per-rate (ttft p50 s, achieved fraction of offered rate, output tokens/s, good fraction)
DESIGN = {
    # TTFT p50 at 4 req/s is 2.5x the 1 req/s one: saturates at 4 req/s (TTFT rule)
    "vllm_max_num_seqs=16": [
        (0.10, 0.99, 120, 0.98),
        (0.12, 0.99, 240, 0.97),
        (0.25, 0.98, 470, 0.80),
        (1.0, 0.95, 900, 0.30),
    ],
    # achieved 81% of 8 req/s: saturates at 8 req/s (throughput rule)
    "vllm_max_num_seqs=64": [
        (0.10, 0.99, 125, 0.99),
        (0.11, 0.99, 250, 0.98),
        (0.15, 0.99, 500, 0.95),
        (0.18, 0.81, 830, 0.85),
    ],
    # never saturates; lowest TTFT, less throughput
    "sglang": [(0.08, 0.99, 110, 0.99), (0.09, 0.99, 220, 0.99), (0.10, 0.99, 440, 0.99), (0.12, 0.99, 880, 0.96)],
}
SERVERS = {
    "vllm_max_num_seqs=16": ("vllm", {"max_num_seqs": 16}),
    "vllm_max_num_seqs=64": ("vllm", {"max_num_seqs": 64}),
    "sglang": ("sglang", {}),
}


def _noise(trial: int) -> float:
    return {1: -0.01, 2: 0.0, 3: 0.01}.get(trial, 0.0)


def rate_points(label: str, trial: int) -> list[dict]:
    pts = []
    t = 0.0
    for i, (rate, (ttft, achieved, tok, good)) in enumerate(zip(RATES, DESIGN[label])):
        f = 1 + _noise(trial)
        # the first window of the last rate of vllm_max_num_seqs=16 is fast, then it degrades (>5%)
        if label == "vllm_max_num_seqs=16" and rate == 8.0:
            steady = [tok * f * r for r in (1, 1, 0.95, 0.9, 0.85, 0.85)]
        else:
            steady = [tok * f] * 6
        pts.append(
            point(
                i,
                "rate",
                rate,
                start_s=t,
                tokens_per_s=tok * f,
                rps=rate * achieved * f,
                ttft_s=ttft * f * 1.1,
                ttft_p50_s=ttft * f,
                good_fraction=min(1.0, good * f),
                goodput_per_s=rate * good * f,
                preemptions=(4.0 if label.endswith("16") and rate >= 4 else 0.0),
                steady_rates=steady,
                outcomes={"ok": 40, "timeout": 2} if rate == 8.0 else {"ok": 40},
            )
        )
        t += WINDOW_S * (len(steady) + 2)
    return pts


def users_points(scale: float) -> Callable[[str, int], list[dict]]:
    def make(label: str, trial: int) -> list[dict]:
        f = scale * (1 + _noise(trial))
        return [
            point(
                i,
                "users",
                u,
                start_s=i * 60.0,
                ramp_s=10.0,
                tokens_per_s=100 * u * f,
                rps=u * f / 4,
                ttft_s=0.05 * u * (1 + _noise(trial)),
                steady_rates=[100 * u * f] * 6,
            )
            for i, u in enumerate([1, 4, 16])
        ]

    return make


EVIL = "<script>alert(1)</script>"


# Fixtures (tests/report/conftest.py and tests/compare/conftest.py import them)
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
