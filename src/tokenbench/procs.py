"""Child processes tokenbench starts (servers under test, the mock): wait until they answer, stop
them by PID. Only processes we started are ever signalled."""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request


class NotReady(Exception):
    """The child exited, or did not answer in time; the message says which."""


def wait_http(url: str, timeout_s: float, proc: subprocess.Popen | None = None) -> None:
    """Poll ``url`` until it answers 2xx; fail early if ``proc`` exits."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        if proc is not None and proc.poll() is not None:
            raise NotReady(f"the process serving {url} exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if 200 <= resp.status < 300:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    raise NotReady(f"{url} did not answer within {timeout_s:.0f}s")


def stop(proc: subprocess.Popen | None, grace_s: float = 15.0) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
