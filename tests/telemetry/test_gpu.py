"""telemetry/gpu.py: without NVML (no GPU here) a reason and None, never a zero; with a GPU, a
reading the device does not support stays absent."""

from __future__ import annotations

import sys
import types

import pytest

from tokenbench.telemetry.gpu import GPUSampler


def test_no_nvml_library_gives_a_reason_and_none(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    gpu = GPUSampler.open()
    assert gpu.available is False
    assert gpu.reason is not None and gpu.reason.startswith("ModuleNotFoundError: ")  # an ImportError, named
    assert gpu.read() is None


def test_this_machine_without_a_gpu_gives_a_reason_and_none():
    gpu = GPUSampler.open()
    if gpu.available:
        pytest.skip("this machine has a GPU")
    assert gpu.reason  # e.g. "NVMLError_LibraryNotFound: NVML Shared Library Not Found"
    assert gpu.read() is None  # absent, never a 0 that looks like an idle GPU


def _fake_nvml(count: int, power_fails: bool = False) -> types.ModuleType:
    nvml = types.ModuleType("pynvml")
    nvml.nvmlInit = lambda: None
    nvml.nvmlDeviceGetCount = lambda: count
    nvml.nvmlDeviceGetHandleByIndex = lambda i: f"gpu{i}"
    nvml.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=37)
    nvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=3 * 2**30, total=16 * 2**30)

    def power(h):
        if power_fails:
            raise RuntimeError("NVMLError_NotSupported")
        return 71500  # milliwatts

    nvml.nvmlDeviceGetPowerUsage = power
    return nvml


def test_nvml_without_devices_is_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(0))
    gpu = GPUSampler.open()
    assert (gpu.available, gpu.reason, gpu.read()) == (False, "NVML found no GPU", None)


def test_readings_in_units_and_unsupported_ones_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(2))
    gpu = GPUSampler.open()
    assert gpu.available and gpu.reason is None
    row = {"util_pct": 37, "mem_used_bytes": 3 * 2**30, "mem_total_bytes": 16 * 2**30, "power_w": 71.5}
    assert gpu.read() == [{"index": 0, **row}, {"index": 1, **row}]

    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(1, power_fails=True))
    rows = GPUSampler.open().read()
    assert rows == [{"index": 0, "util_pct": 37, "mem_used_bytes": 3 * 2**30, "mem_total_bytes": 16 * 2**30}]


def test_the_energy_counter_is_read_where_the_gpu_has_it(monkeypatch):
    nvml = _fake_nvml(1)
    nvml.nvmlDeviceGetTotalEnergyConsumption = lambda h: 123_456_789  # mJ since the driver loaded
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    (row,) = GPUSampler.open().read()
    assert row["energy_mj"] == 123_456_789 and row["power_w"] == 71.5
    # a GPU before Volta: NVML says not supported, and the reading is absent (power is integrated)
    nvml.nvmlDeviceGetTotalEnergyConsumption = lambda h: (_ for _ in ()).throw(RuntimeError("NVMLError_NotSupported"))
    (row,) = GPUSampler.open().read()
    assert "energy_mj" not in row and row["power_w"] == 71.5
