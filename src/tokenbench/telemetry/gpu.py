"""GPU utilization, memory, power and energy through NVML (nvidia-ml-py). Without a GPU or driver
the reason is recorded and every reading is absent: never a zero that looks like an idle GPU.
``energy_mj`` is NVML's total energy counter (mJ since the driver loaded; Volta and later): a GPU
without it has no such key, and telemetry.energy integrates its power readings instead."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class GPUSampler:
    available: bool
    reason: str | None
    _handles: list[object]  # NVML's device handles (opaque)

    @classmethod
    def open(cls) -> GPUSampler:
        try:
            import pynvml  # type: ignore[import-untyped]  # nvidia-ml-py ships no type hints

            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded, ...
            return cls(False, f"{type(exc).__name__}: {exc}", [])
        if not handles:
            return cls(False, "NVML found no GPU", [])
        return cls(True, None, handles)

    def read(self) -> list[dict[str, float]] | None:
        if not self.available:
            return None
        import pynvml

        out = []
        for index, h in enumerate(self._handles):
            row: dict[str, float] = {"index": index}
            readings: tuple[tuple[str, Callable[[], float]], ...] = (
                ("util_pct", lambda: pynvml.nvmlDeviceGetUtilizationRates(h).gpu),
                ("mem_used_bytes", lambda: pynvml.nvmlDeviceGetMemoryInfo(h).used),
                ("mem_total_bytes", lambda: pynvml.nvmlDeviceGetMemoryInfo(h).total),
                ("power_w", lambda: pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0),
                ("energy_mj", lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(h)),
            )
            for key, fn in readings:
                try:
                    row[key] = fn()
                except Exception:  # a reading this GPU does not support stays absent
                    pass
            out.append(row)
        return out
