"""The speculation preset at ci scale on vLLM CPU: SmolLM2-135M without speculative decoding and
with n-gram drafts of 2 and 4 tokens, 1 and 4 users, 2 trials; then its study. Known answers:
every reply is the fixed 32 tokens, the speculating launches report their drafts per request (and
n-gram on a greedy small model accepts most of them), and each speculating configuration has a
speedup with a paired 95% CI over the configuration without speculation at each load, printed
after the experiment as a table with a row per (configuration, load)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ["off", "ngram-k2", "ngram-k4"]
SPECULATING = CONFIGS[1:]
USERS = [1.0, 4.0]  # presets.CI_STOPS: small's user counts, both
TITLE = "speculative decoding: speedup vs without it"


@pytest.fixture(scope="module")
def study(tmp_path_factory, vllm_cpu):
    """Its own three launches: speculation is a launch argument, what the study compares."""
    out = tmp_path_factory.mktemp("speculation") / "exp"
    proc = subprocess.run(
        [sys.executable, "-m", "tokenbench", "experiment", "run", "--preset", "speculation", "--scale", "ci"]
        + ["--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "250"},  # the study's table on one line a row,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    state = json.loads((out / "experiment.json").read_text())
    assert state["complete"] is True
    return out, state, proc.stderr


def test_every_cell_ran_with_its_speculation_and_its_tags(study):
    out, state, _ = study
    assert [(s["label"], s["status"], s["swept"]) for s in state["servers"]] == [
        ("off", "ok", {"speculation": "off"}),
        ("ngram-k2", "ok", {"speculation": "ngram", "speculative_tokens": 2}),
        ("ngram-k4", "ok", {"speculation": "ngram", "speculative_tokens": 4}),
    ]
    assert sorted((c["server"], c["trial"]) for c in state["cells"].values()) == sorted(
        (label, t) for label in CONFIGS for t in (1, 2)
    )
    for cell in state["cells"].values():
        records = [json.loads(x) for x in (out / cell["run_dir"] / "records.jsonl").read_text().splitlines()]
        ok = [r for r in records if r["outcome"] == "ok"]
        assert ok and {r["output_tokens"] for r in ok} == {32}, cell  # ignore_eos: the fixed length
    rows = {(r["server"], r["load"]["users"]): r["metrics"] for r in state["aggregates"]}
    assert sorted(rows) == sorted((label, int(u)) for label in CONFIGS for u in USERS)
    for (label, _), metrics in rows.items():
        acceptance = metrics.get("acceptance_rate_token_weighted", {}).get("mean")
        if label == "off":
            assert acceptance is None
        else:  # the per-request metrics: greedy SmolLM2 repeats itself, so its n-grams are accepted
            assert acceptance is not None and acceptance > 0.5, (label, metrics.get("acceptance_rate_token_weighted"))


def test_each_speculating_configuration_has_a_speedup_with_a_ci_at_each_load(study):
    out, _, stderr = study
    from tokenbench.report.read.load import load_inputs
    from tokenbench.report.sections.speculation_speedup import SPEEDUP_METRICS, speedups

    items = speedups(load_inputs([out]))
    assert sorted({(s.config, s.load_value) for s in items}) == sorted((c, u) for c in SPECULATING for u in USERS)
    assert len(items) == len(SPECULATING) * len(USERS) * len(SPEEDUP_METRICS)
    for s in items:
        assert s.baseline == "off" and s.paired, s
        assert s.speedup is not None and math.isfinite(s.speedup) and s.speedup > 0, s
        assert s.ci95 is not None and math.isfinite(s.ci95), s
        assert s.verdict in ("gain", "loss", "no difference"), s
    # the console: the table, a row per (configuration, load), then a sentence per configuration
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if TITLE in line)
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("└"))
    print("\n".join(lines[start:]))  # the study as it printed (pytest -s)
    rows = [line for line in lines[start:end] if line.startswith("│")]
    assert [tuple(c.strip() for c in r.split("│")[1:4]) for r in rows] == [
        (c, "off", load) for c in SPECULATING for load in ("1 user", "4 users")
    ]
    assert all(line.count("x (") == len(SPEEDUP_METRICS) for line in rows), rows  # each speedup with its CI
    assert {line.split(":")[0] for line in lines[end + 1 :] if line.startswith("ngram-")} == set(SPECULATING)
