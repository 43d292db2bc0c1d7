"""Shared fixtures: a scripted mock server in a child process, started and stopped by PID."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from tokenbench.calibrate import free_port


def _wait(url: str, proc: subprocess.Popen, timeout_s: float = 20.0) -> None:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"mock exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} not ready")


@pytest.fixture
def start_mock() -> Iterator[Callable[..., str]]:
    """start_mock(ttft_ms=50, itl_ms=10, fault="http_500", ...) -> base URL."""
    procs: list[subprocess.Popen] = []

    def start(**knobs) -> str:
        port = free_port()
        cmd = [sys.executable, "-m", "tokenbench", "mock", "--port", str(port)]
        for key, value in knobs.items():
            cmd += [f"--{key.replace('_', '-')}", str(value)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        _wait(url + "/health", proc)
        start.procs = procs  # type: ignore[attr-defined]
        return url

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
