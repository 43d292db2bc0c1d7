"""The CPU a launched server's processes used over a point: read from its process trees at each
scrape (common.procs.tree_cpu_s, the sampler's ``server_cpu``), differenced between the scrapes
that bracket the window (telemetry.summary.point_server_cpu)."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from tokenbench.common.procs import tree_cpu_s
from tokenbench.telemetry.gpu import GPUSampler
from tokenbench.telemetry.sampler import scrape_line
from tokenbench.telemetry.summary import point_server_cpu


def _read(t_s, cpu_s, processes=2):
    return {"kind": "scrape", "t_s": t_s, "server_cpu": {"cpu_s": cpu_s, "processes": processes}}


def test_cpu_is_differenced_between_the_bracketing_readings():
    samples = [_read(0.0, 10.0), _read(1.0, 10.5, 3), _read(2.0, 11.5), _read(3.0, 12.5), _read(4.0, 20.0)]
    cpu = point_server_cpu(samples, 0.5, 2.5)
    assert cpu is not None and cpu.period_s == [0.0, 3.0] and cpu.bracketed
    assert cpu.cpu_s == pytest.approx(2.5) and cpu.cores_mean == pytest.approx(2.5 / 3.0)
    assert cpu.processes == 3


def test_a_fall_counts_as_nothing_never_as_negative_cpu():
    """A process that ended unreaped takes its seconds out of the tree's total."""
    samples = [_read(0.0, 10.0), _read(1.0, 11.0), _read(2.0, 4.0), _read(3.0, 5.0)]
    cpu = point_server_cpu(samples, 0.0, 3.0)
    assert cpu is not None and cpu.cpu_s == pytest.approx(2.0)


def test_an_attached_server_has_no_server_cpu():
    assert point_server_cpu([{"kind": "scrape", "t_s": 0.0, "ok": True, "values": {}}], 0.0, 1.0) is None
    # its processes all gone: the readings are null
    assert point_server_cpu([{"kind": "scrape", "t_s": t, "server_cpu": None} for t in (0, 1)], 0, 1) is None


BUSY_TREE = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time\\nt = time.time()\\nwhile time.time() - t < 30: pass"])
print("up", flush=True)
time.sleep(30)
"""


def test_a_tree_counts_its_descendants_cpu():
    """A parent that sleeps and its child that spins: the tree's CPU grows by the child's (the
    parent, asleep, adds none). Waits for 0.2 s of it, not a fixed time: on a loaded machine the
    child got 0.34 s of a second."""
    parent = subprocess.Popen([sys.executable, "-c", BUSY_TREE], stdout=subprocess.PIPE, text=True)
    with parent:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "up"
        first = tree_cpu_s([parent.pid])
        assert first is not None
        deadline = time.monotonic() + 20.0
        line = scrape_line("", None, 0.0, GPUSampler(False, "no GPU here", []), 1.0, server_pids=[parent.pid])
        while line["server_cpu"]["cpu_s"] - first[0] < 0.2 and time.monotonic() < deadline:
            time.sleep(0.1)
            line = scrape_line("", None, 0.0, GPUSampler(False, "no GPU here", []), 1.0, server_pids=[parent.pid])
        for proc in [*psutil.Process(parent.pid).children(), parent]:  # only what this test started
            proc.kill()
    assert first[1] == 2 and line["server_cpu"]["processes"] == 2
    assert line["server_cpu"]["cpu_s"] - first[0] >= 0.2  # the child's, counted in its parent's tree
    assert tree_cpu_s([parent.pid]) is None
