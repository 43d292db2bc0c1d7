"""Nothing lost (against the mock): kill -9 leaves no child and its results can be derived again;
recompute gives the run's own results. (SIGTERM, a second signal and the guardian: test_procs.py;
a bad --out: test_rundir.py; masking: test_redact.py.)"""

from __future__ import annotations

import json
import os
import signal
import time

from safety_helpers import _descendants, _events, _recompute, _tokenbench, _wait_for, assert_all_gone


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
