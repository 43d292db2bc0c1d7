"""End to end on the embedded llama.cpp server (xllamacpp + SmolLM2-135M GGUF): TraceLab's replay
example (three agent sessions of 2-3 rounds, a tool's 50-100 ms between rounds) on the sessions'
own clock. Each round's prompt carries the previous round's prompt and the reply the server really
streamed: llama.cpp's ``timings.cache_n`` shows both served from its prompt cache (another reply
text would stop the reuse where the reply starts). The critical path of each session splits into
llama.cpp's queue, prefill and decode (its ``timings.prompt_ms``) and the tool's time.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

CSV = Path(__file__).parents[1] / "fixtures" / "programs" / "tracelab" / "multi_session_example.csv"


@pytest.fixture(scope="module")
def program_run(tmp_path_factory, embedded_gguf):
    out = tmp_path_factory.mktemp("e2e") / "programs"
    cmd = [sys.executable, "-m", "tokenbench", "run", "--dataset", "programs", "--dataset-path", str(CSV)]
    cmd += ["--replay-speed", "1", "--output-tokens", "16", "--keep-text"]
    cmd += ["--out", str(out), "--no-live"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]


def test_each_round_reuses_the_previous_prompt_and_its_real_reply(program_run):
    records = _records(program_run)
    assert len(records) == 8 and all(r["outcome"] == "ok" for r in records)
    by_call = {(r["program_id"], r["program_call"]): r for r in records}
    # rounds whose prompt is the previous round's prompt and reply, then new tokens (all but
    # session 2's last round, whose recorded prefix stops before the reply)
    followers = [("0", "1"), ("0", "2"), ("1", "1"), ("2", "1")]
    for sid, call in followers:
        r, before = by_call[sid, call], by_call[sid, str(int(call) - 1)]
        assert r["program_after"] == before["program_call"]
        assert before["output_text"]  # the streamed reply, sent back in the next prompt
        assert r["prompt_tokens"] > before["prompt_tokens"] + before["output_tokens"]
        # the previous prompt and all of its reply but its last token came from the prompt cache
        assert r["server_timings"]["cache_n"] >= before["prompt_tokens"] + before["output_tokens"] - 2, (sid, call)
        assert r["sent_s"] >= before["closed_s"] + r["program_delay_s"]


def test_the_sessions_critical_paths_split_into_queue_prefill_decode_and_tool(program_run):
    results = json.loads((program_run / "results.json").read_text())
    programs = results["points"][0]["programs"]
    assert programs["sessions"]["completed"] == 3 and programs["measured_sessions"] == 3
    parts = programs["critical_path"]["mean_s"]
    assert parts["prefill"] > 0 and parts["decode"] > 0 and parts["queue"] >= 0
    assert parts["ttft"] == 0  # every call's TTFT split by llama.cpp's prompt_ms
    # the tool waits on the paths: 100 + 100, 80, 50 + 50 ms (the CSV's tool_wait_after_ms)
    assert parts["tool"] == pytest.approx((0.2 + 0.08 + 0.1) / 3, abs=1e-6)
    assert sum(parts.values()) == pytest.approx(programs["session_s"]["mean"], abs=1e-6)
    assert programs["measured_reuse"] > 0.5 and programs["expected_reuse"] > 0.5


def test_the_report_shows_each_sessions_queue_prefill_decode_and_tool(program_run):
    proc = subprocess.run(
        [sys.executable, "-m", "tokenbench", "report", str(program_run)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = (program_run / "report.md").read_text()
    section = md[md.index("## Agent programs") :]
    where = section[section.index("### Where the time went") : section.index("### Calls by role")]
    header = next(line for line in where.splitlines() if line.startswith("| configuration"))
    for part in ("queue s (%)", "prefill s (%)", "decode s (%)", "tool s (%)"):
        assert part in header, header
    assert "TTFT (not split)" not in header  # llama.cpp timed every call's prefill
    slowest = section[section.index("### Slowest sessions") :]
    assert sum(1 for line in slowest.splitlines() if line.startswith("| ") and "yes" in line) == 3
    assert any(p.name.startswith("session-timeline") for p in (program_run / "charts").iterdir())
