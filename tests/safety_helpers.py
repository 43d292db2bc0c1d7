"""Helpers for the crash-safety tests: spawn tokenbench, wait, find its children, recompute."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil


def _tokenbench(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tokenbench", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
    )


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _events(run_dir: Path, kind: str) -> list[dict]:
    path = run_dir / "samples.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("kind") == kind:
            out.append(obj)
    return out


def _descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def assert_all_gone(procs: list[psutil.Process], within_s: float = 5.0) -> None:
    _, alive = psutil.wait_procs(procs, timeout=within_s)
    alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"left running: {[(p.pid, p.cmdline()) for p in alive]}"


def _deliveries(url: str) -> dict:
    with urllib.request.urlopen(url + "/mock/deliveries", timeout=5) as resp:
        return json.loads(resp.read())


def _recompute(path: Path) -> dict:
    proc = _tokenbench("recompute", str(path))
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    name = "experiment.json" if (path / "experiment.json").exists() else "results.json"
    return json.loads((path / name).read_text())
