"""The sessions study's preset at ci scale on the embedded llama.cpp server (a module apart from
the other presets' tests/e2e/test_presets.py), then its report's TTFT by turn."""

import json

import pytest
from preset_helpers import experiment, tokenbench

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def sessions_study(tmp_path_factory, embedded_gguf):
    return experiment(tmp_path_factory, "sessions")


def test_sessions_study(sessions_study, tmp_path):
    out, state = sessions_study
    rows = [(r["variant"], r["label"].split(",")[0]) for r in state["aggregates"]]
    assert rows == [(v, "4 users") for v in ("no-system", "system")]  # presets.CI_STOPS: small's 1/2/4, CI's 4
    assert all(row["metrics"]["error_rate"]["mean"] == 0 for row in state["aggregates"])
    for cell in state["cells"].values():
        results = json.loads((out / cell["run_dir"] / "results.json").read_text())
        for point in results["points"]:
            # the turns the window saw, each once and in order: which ones depends on the machine's
            # speed (on a slower one every conversation's turn 0 ended in the warm-up: [1, 2, ...])
            turns = [t["turn_index"] for t in point["by_turn"]]
            assert len(turns) >= 2 and turns == list(range(turns[0], turns[0] + len(turns)))
            assert point["sessions"]["started"] >= 1
        records = [json.loads(line) for line in (out / cell["run_dir"] / "records.jsonl").read_text().splitlines()]
        later = [r for r in records if r["turn_index"] and r["outcome"] == "ok"]
        # llama.cpp's prompt cache serves a later turn's history (its slot kept the conversation)
        assert later and sum(r["server_timings"]["cache_n"] > 0 for r in later) > len(later) / 2
    proc = tokenbench("report", str(out), "--out", str(tmp_path / "report"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "## TTFT by turn (multi-turn sessions)" in (tmp_path / "report" / "report.md").read_text()
