"""Shared fixtures: a scripted mock server in a child process, started and stopped by PID."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from tokenbench.procs import free_port, stop, wait_http


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
        wait_http(url + "/health", 20.0, proc)
        start.procs = procs  # type: ignore[attr-defined]
        return url

    yield start
    for proc in procs:
        stop(proc, grace_s=10)
