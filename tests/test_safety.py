"""Nothing left behind, nothing leaked, nothing lost (against the mock): kill -9 leaves no child
and its results can be derived again; SIGTERM is Ctrl-C; a second signal exits at once; a bad
--out fails before any request; recompute gives the run's own results."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest
from safety_helpers import _deliveries, _descendants, _events, _recompute, _tokenbench, _wait_for, assert_all_gone

from tokenbench import redact
from tokenbench.rundir import OutDirError, check_out_dir


def _without_computed_by(results: dict) -> dict:
    return {k: v for k, v in results.items() if k != "computed_by"}


def test_recompute_gives_the_runs_own_results(start_mock, tmp_path):
    url = start_mock(ttft_ms=20, itl_ms=5)
    out = tmp_path / "run"
    proc = _tokenbench(
        "run", "--url", url, "--users", "1,2", "--duration", "2", "--output-tokens", "8", "--out", str(out), "--no-live"
    )
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    written = json.loads((out / "results.json").read_text())
    assert written["computed_by"]["how"] == "run" and written["computed_by"]["version"]
    recomputed = _recompute(out)
    assert recomputed["computed_by"]["how"] == "recompute"
    assert _without_computed_by(recomputed) == _without_computed_by(written)
    assert (out / "results.previous.json").exists()


def test_kill_9_leaves_no_child_and_recompute_derives_the_results(start_mock, tmp_path):
    url = start_mock(ttft_ms=20, itl_ms=20)
    out = tmp_path / "run"
    proc = _tokenbench(
        "run",
        "--url",
        url,
        "--users",
        "2,3",
        "--duration",
        "4",
        "--output-tokens",
        "10",
        "--out",
        str(out),
        "--no-live",
        "--backend",
        "vllm",
    )
    # the first point is done and written, the second is under way
    _wait_for(lambda: len(_events(out, "point_start")) == 2, 60, "the second point to start")
    time.sleep(1.0)
    before = json.loads((out / "results.json").read_text())
    assert len(before["points"]) == 1
    children = _descendants(proc.pid)
    assert any("tokenbench.telemetry.sampler" in " ".join(p.cmdline()) for p in children)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)
    assert_all_gone(children, within_s=5.0)

    recomputed = _recompute(out)
    assert recomputed["interrupted"] is True
    assert len(recomputed["points"]) == 2
    # the finished point: exactly what the run wrote
    assert recomputed["points"][0] == before["points"][0]
    killed = recomputed["points"][1]
    assert killed["interrupted"] is True
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert killed["requests"]["total"] == sum(1 for r in records if r["point"] == 1) > 0


def test_sigterm_is_ctrl_c_and_a_second_signal_exits_at_once(start_mock, tmp_path):
    url = start_mock(ttft_ms=50, itl_ms=50)
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


def test_unwritable_out_fails_before_any_request(start_mock, tmp_path):
    url = start_mock(ttft_ms=5, itl_ms=1)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    for out in (blocker / "run", Path("/proc/tokenbench-cannot-write-here")):
        proc = _tokenbench("run", "--url", url, "--users", "1", "--max-requests", "2", "--out", str(out), "--no-live")
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 2, stderr
        assert str(out) in stderr.replace("\n", "") and "not writable" in stderr
    assert _deliveries(url) == {}


def test_an_out_that_holds_a_run_is_refused(start_mock, tmp_path):
    url = start_mock(ttft_ms=5, itl_ms=1)
    out = tmp_path / "run"
    args = ("run", "--url", url, "--users", "1", "--max-requests", "2", "--out", str(out), "--no-live")
    first = _tokenbench(*args)
    first.communicate(timeout=60)
    assert first.returncode == 0
    before = (out / "records.jsonl").read_bytes()
    n = len(_deliveries(url))
    second = _tokenbench(*args)
    _, stderr = second.communicate(timeout=60)
    assert second.returncode == 2 and "already holds files" in stderr
    assert (out / "records.jsonl").read_bytes() == before and len(_deliveries(url)) == n


def test_a_full_filesystem_is_refused(tmp_path, monkeypatch):
    import tokenbench.rundir as files

    monkeypatch.setattr(files, "MIN_FREE_BYTES", 2**62)
    with pytest.raises(OutDirError, match="MB free"):
        check_out_dir(tmp_path / "run")
    with pytest.raises(OutDirError, match="not writable"):
        check_out_dir(Path("/dev/full/run"))


def test_masking_rules():
    redact.register("planted-value-1234")
    data = {
        "HF_TOKEN": "hf_plantedplantedplanted",
        "tokenizer": "/models/t",
        "api_key_env": "OPENAI_API_KEY",
        "command": ["vllm", "serve", "--api-key", "sk-plantedplantedplanted", "--hf-token=plantedhf"],
        "headers": {"X-Gateway": "planted-value-1234"},
        "output_tokens": 12,
        "error": "401: invalid key Bearer abcdefghijklmnop for http://u:pw123@host/x",
        "note": "max_tokens=5 and the token count",
    }
    masked = json.dumps(redact.mask(data))
    for secret in ("hf_planted", "sk-planted", "plantedhf", "planted-value-1234", "abcdefghijklmnop", "pw123"):
        assert secret not in masked
    for kept in ("/models/t", "OPENAI_API_KEY", "max_tokens=5 and the token count", '"output_tokens": 12'):
        assert kept in masked


def test_a_run_from_before_0_2_is_rederived_from_its_old_spans(start_mock, tmp_path):
    """Runs written before point spans were logged: recompute takes the spans from their old
    results.json and re-derives every number with today's definitions (user spans were not
    kept, so the time series' active_users is null)."""
    url = start_mock(ttft_ms=20, itl_ms=5)
    out = tmp_path / "run"
    proc = _tokenbench(
        "run",
        "--url",
        url,
        "--users",
        "2",
        "--ramp-up",
        "1",
        "--duration",
        "3",
        "--output-tokens",
        "8",
        "--out",
        str(out),
        "--no-live",
    )
    proc.communicate(timeout=120)
    assert proc.returncode == 0
    written = json.loads((out / "results.json").read_text())
    samples = out / "samples.jsonl"
    samples.write_text(
        "".join(
            line + "\n" for line in samples.read_text().splitlines() if json.loads(line)["kind"] in ("header", "scrape")
        )
    )
    config = json.loads((out / "config.json").read_text())
    del config["clock"], config["telemetry"]
    (out / "config.json").write_text(json.dumps(config))
    recomputed = _recompute(out)
    assert recomputed["clock"] == written["clock"] and recomputed["telemetry"] == written["telemetry"]
    old, new = written["points"][0], recomputed["points"][0]
    assert [w["active_users"] for w in new["timeseries"]] == [None] * len(new["timeseries"])
    for w in old["timeseries"] + new["timeseries"]:
        w.pop("active_users")
    assert new == old


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

    from tokenbench.procs import GUARD_GRACE_S, Guardian

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
