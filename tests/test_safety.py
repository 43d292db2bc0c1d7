"""Nothing lost (against the mock): kill -9 leaves no child and its results can be derived again.
(Recompute giving the run's own results: test_derive.py; SIGTERM, a second signal and the guardian:
test_procs.py; a bad --out: test_rundir.py; masking: test_redact.py.)"""

from __future__ import annotations

import json
import os
import signal
import time

from safety_helpers import _descendants, _events, _recompute, _tokenbench, _wait_for, assert_all_gone


def test_kill_9_leaves_no_child_and_recompute_derives_the_results(mock_process, tmp_path):
    url = mock_process(ttft_ms=20, itl_ms=20)
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
