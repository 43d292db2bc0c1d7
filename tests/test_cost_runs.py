"""A run given a price, against the mock at a known load: each point states its cost per million
tokens at its own throughput; on this machine (no GPU) its energy is null with the reason, never 0;
a recompute gives the same; a run without a price has no ``cost`` key; a scripted NVML (the sampler
process imports it) gives each point its energy."""

import json
import subprocess
import sys

import jsonschema
import pytest
from run_helpers import config, quiet

from tokenbench.config import RateLoad, StopConfig
from tokenbench.config.cost import CostConfig
from tokenbench.results import SCHEMA_PATH
from tokenbench.run import run
from tokenbench.telemetry.gpu import GPUSampler

# Serial (run alone, never beside other tests): cost over the measured throughput to within 10%.
pytestmark = pytest.mark.serial


@pytest.fixture(scope="module")
def priced(module_mock_server, tmp_path_factory):
    """10 req/s, constant arrivals, 20 output tokens each: 200 output tok/s offered, for 3 s; the
    hardware at $3.60 per GPU-hour x 2 GPUs = $7.20 an hour."""
    url = module_mock_server(ttft_ms=5, itl_ms=5)
    cfg = config(
        url,
        tmp_path_factory.mktemp("cost"),
        [RateLoad(rate_per_s=10, arrival="constant")],
        StopConfig(duration_s=3, drain_timeout_s=5),
        output_tokens=20,
        cost=CostConfig(usd_per_gpu_hour=3.6, gpus=2),
    )
    return run(cfg, quiet())


def test_each_point_costs_its_price_over_its_throughput(priced):
    point = priced.results["points"][0]
    out_rate, total_rate = point["output_tokens_per_s"], point["total_tokens_per_s"]
    assert point["cost"] == {
        "usd_per_gpu_hour": 3.6,
        "gpus": 2,
        "usd_per_hour": 7.2,
        "usd_per_million_output_tokens": pytest.approx(7.2 / 3600 / out_rate * 1e6),
        "usd_per_million_total_tokens": pytest.approx(7.2 / 3600 / total_rate * 1e6),
    }
    # the server keeps up: output tok/s is the offered 10 x 20 = 200, so $7.20/h makes $10 per million
    assert out_rate == pytest.approx(200.0, rel=0.1)
    assert point["cost"]["usd_per_million_output_tokens"] == pytest.approx(10.0, rel=0.1)
    jsonschema.validate(priced.results, json.loads(SCHEMA_PATH.read_text()))


def test_without_a_gpu_energy_is_null_with_the_reason(priced):
    if GPUSampler.open().available:
        pytest.skip("this machine has a GPU")
    energy = priced.results["points"][0]["energy"]
    assert energy["available"] is False and energy["reason"].startswith("no NVIDIA GPU (NVML: ")
    assert {k: v for k, v in energy.items() if k not in ("available", "reason")} == {
        "source": None,
        "gpus": None,
        "period_s": None,
        "joules": None,
        "mean_power_w": None,
        "joules_per_output_token": None,
    }


def test_a_recompute_gives_the_same_cost_and_energy(priced):
    proc = subprocess.run(
        [sys.executable, "-m", "tokenbench", "recompute", str(priced.run_dir)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    again = json.loads((priced.run_dir / "results.json").read_text())["points"][0]
    first = priced.results["points"][0]
    assert (again["cost"], again["energy"]) == (first["cost"], first["energy"])


def test_a_run_without_a_price_has_no_cost_key(module_mock_server, tmp_path):
    url = module_mock_server(ttft_ms=1, itl_ms=1)
    result = run(config(url, tmp_path, [RateLoad(rate_per_s=20)], StopConfig(max_requests=4)), quiet())
    point = result.results["points"][0]
    assert "cost" not in point and "energy" in point  # energy is on every point, priced or not


FAKE_NVML = '''"""A GPU drawing 100 W all along: its energy counter (mJ) grows 100,000 a second."""
import time
from types import SimpleNamespace

def nvmlInit(): pass
def nvmlDeviceGetCount(): return 1
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetUtilizationRates(h): return SimpleNamespace(gpu=50)
def nvmlDeviceGetMemoryInfo(h): return SimpleNamespace(used=1, total=2)
def nvmlDeviceGetPowerUsage(h): return 100_000
def nvmlDeviceGetTotalEnergyConsumption(h): return int(time.perf_counter() * 100_000) + 10**12
'''


def test_a_gpus_energy_counter_reaches_each_point(module_mock_server, tmp_path, monkeypatch):
    """The sampler process reads a scripted NVML (100 W): each point's energy is 100 W over its
    window, and per output token 100 W / its output tok/s."""
    (tmp_path / "nvml").mkdir()
    (tmp_path / "nvml" / "pynvml.py").write_text(FAKE_NVML)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path / 'nvml'}:{__import__('os').environ.get('PYTHONPATH', '')}")
    url = module_mock_server(ttft_ms=1, itl_ms=2)
    loads = [RateLoad(rate_per_s=10, arrival="constant")]
    cfg = config(url, tmp_path, loads, StopConfig(duration_s=2.5, drain_timeout_s=5), output_tokens=10)
    point = run(cfg, quiet()).results["points"][0]
    energy, window = point["energy"], point["window"]
    assert energy["available"] is True and energy["source"] == "nvml_total_energy" and energy["gpus"] == 1
    assert energy["period_s"] == pytest.approx([window["start_s"], window["end_s"]])
    assert energy["mean_power_w"] == pytest.approx(100.0, rel=1e-3)
    assert energy["joules"] == pytest.approx(100.0 * (window["end_s"] - window["start_s"]), rel=1e-3)
    assert energy["joules_per_output_token"] == pytest.approx(energy["mean_power_w"] / point["output_tokens_per_s"])
