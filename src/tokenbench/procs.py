"""Child processes tokenbench starts (servers under test, the mock): wait until they answer, stop
them by PID. Only processes we started are ever signalled."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it; a race with another process is
    possible but has not been seen on loopback)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


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


def stop(proc: subprocess.Popen | None, grace_s: float = 15.0, group: bool = False) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``. ``group``: signal the process group the child
    leads (it was started with ``start_new_session=True``, so the group is the child and the
    workers it spawned, e.g. vLLM's engine-core process), not just the child."""
    if proc is None:
        return
    if proc.poll() is not None and not group:
        return

    def signal_(sig: int) -> None:
        try:
            if group:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
        except ProcessLookupError:
            pass

    signal_(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        signal_(signal.SIGKILL)
        proc.wait()
    if group:  # workers that outlived their parent get the same grace, then SIGKILL
        deadline = time.perf_counter() + grace_s
        while _group_alive(proc.pid) and time.perf_counter() < deadline:
            time.sleep(0.1)
        signal_(signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False
