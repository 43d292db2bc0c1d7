"""Children that die with us and signals to tokenbench: SIGTERM is Ctrl-C, a second signal exits
at once, the engine's guardian stops its whole process group when tokenbench dies; ports and
stopping a child."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest
from safety_helpers import _descendants, _recompute, _tokenbench, _wait_for, assert_all_gone

from tokenbench.common.procs import Interrupts, NotReady, free_port, port_in_use, stop, wait_http


def test_sigterm_is_ctrl_c_and_a_second_signal_exits_at_once(mock_server, tmp_path):
    url = mock_server(ttft_ms=50, itl_ms=50)
    for second in (False, True):
        out = tmp_path / f"run-{second}"
        proc = _tokenbench(
            "run",
            "--url",
            url,
            "--users",
            "3",
            "--duration",
            "60",
            "--output-tokens",
            "40",
            "--out",
            str(out),
            "--no-live",
        )
        records_file = out / "records.jsonl"
        _wait_for(lambda: records_file.exists() and records_file.stat().st_size > 0, 30, "a first record")
        time.sleep(0.5)
        children = _descendants(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)
        if second:  # another kind: two SIGTERMs pending at once would be delivered as one
            os.kill(proc.pid, signal.SIGINT)
        t0 = time.time()
        _, stderr = proc.communicate(timeout=30)
        # 128 + the first signal handled (Python runs pending handlers by signal number)
        assert proc.returncode in ((130, 143) if second else (143,)), stderr
        assert time.time() - t0 < 10
        assert_all_gone(children)
        lines = records_file.read_text().splitlines()
        assert lines and all(json.loads(line)["outcome"] for line in lines)  # nothing torn, nothing lost
        if not second:
            results = json.loads((out / "results.json").read_text())
            assert results["interrupted"] is True
            assert results["points"][0]["requests"]["total"] == len(lines)
            assert "cancelled" in {json.loads(line)["outcome"] for line in lines}
        else:
            assert "second signal" in stderr
            assert _recompute(out)["interrupted"] is True


def test_ctrl_c_stops_cleanly_and_keeps_everything(mock_server, tmp_path):
    url = mock_server(ttft_ms=50, itl_ms=50)
    out = tmp_path / "run"
    proc = _tokenbench(
        "run", "--url", url, "--users", "3", "--duration", "60", "--output-tokens", "40", "--out", str(out), "--no-live"
    )
    records_file = out / "records.jsonl"
    _wait_for(lambda: records_file.exists() and records_file.stat().st_size > 0, 30, "a first record")
    time.sleep(1.0)  # requests take ~2 s: the first ones are done, three are in flight
    os.kill(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    results = json.loads((out / "results.json").read_text())
    assert results["interrupted"] is True
    assert results["points"][0]["requests"]["total"] == len(records)
    outcomes = {r["outcome"] for r in records}
    assert "cancelled" in outcomes and "ok" in outcomes
    cancelled = [r for r in records if r["outcome"] == "cancelled"]
    assert len(cancelled) == 3 and all(r["chunk_times_s"] for r in cancelled)


def _group(pgid: int) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (ProcessLookupError, psutil.Error, OSError):
            pass
    return found


def test_the_guardian_stops_the_whole_engine_group_when_tokenbench_dies(tmp_path):
    """An engine with workers of its own (vLLM's engine core is a grandchild), one of which
    ignores SIGTERM: when the guardian's pipe closes without a release, every process of the
    group is gone within the grace plus a little; after a release, nothing is signalled."""
    import subprocess

    from tokenbench.common.procs import GUARD_GRACE_S, Guardian

    script = "trap '' TERM; sleep 300 & sleep 300 & (trap '' TERM; sleep 300) & echo started; wait"
    for released in (False, True):
        read_fd, write_fd = os.pipe()
        engine = subprocess.Popen(
            ["sh", "-c", script], stdout=write_fd, stderr=subprocess.STDOUT, start_new_session=True
        )
        os.close(write_fd)
        guardian = Guardian(engine.pid, read_fd, tmp_path / f"log-{released}", ["hunter2secret"])
        os.close(read_fd)
        time.sleep(0.5)
        members = _group(engine.pid)
        assert len(members) >= 3, members
        if released:
            guardian.release()
            assert all(p.is_running() for p in members)
            os.killpg(engine.pid, signal.SIGKILL)
            engine.wait()
            continue
        guardian._proc.stdin.close()  # what our death does to the pipe
        t0 = time.time()
        assert_all_gone(members, within_s=GUARD_GRACE_S + 2.0)
        assert time.time() - t0 >= GUARD_GRACE_S - 0.5  # SIGTERM was ignored: SIGKILL after the grace
        engine.wait(timeout=5)
        guardian._proc.wait(timeout=5)
        assert (tmp_path / "log-False").read_text().strip() == "started"


def test_a_free_port_is_free_and_a_listening_one_is_in_use():
    port = free_port()
    assert not port_in_use("127.0.0.1", port)
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        assert port_in_use("127.0.0.1", port)


def test_stop_terminates_then_kills_after_the_grace():
    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stop(polite, grace_s=10)
    assert polite.returncode == -signal.SIGTERM
    deaf = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    deaf.stdout.readline()  # SIGTERM is ignored from here on
    t0 = time.perf_counter()
    stop(deaf, grace_s=0.5)
    assert deaf.returncode == -signal.SIGKILL and time.perf_counter() - t0 >= 0.5
    deaf.stdout.close()
    stop(None)  # nothing started: nothing to do


def test_wait_http_fails_early_when_the_child_exits():
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(NotReady, match="exited with code 3"):
        wait_http(f"http://127.0.0.1:{free_port()}/health", 30, proc)


def test_inside_a_load_point_the_first_signal_calls_back_instead_of_raising(monkeypatch):
    monkeypatch.setattr(Interrupts, "received", None)
    calls = []
    with Interrupts.during(lambda: calls.append("cancel")):
        Interrupts._handler(signal.SIGTERM, None)
    assert calls == ["cancel"] and Interrupts.exit_code() == 128 + signal.SIGTERM
    monkeypatch.setattr(Interrupts, "received", None)
    with pytest.raises(KeyboardInterrupt):
        Interrupts._handler(signal.SIGINT, None)  # outside a point: Ctrl-C as Python has it
    assert Interrupts.exit_code() == 130
