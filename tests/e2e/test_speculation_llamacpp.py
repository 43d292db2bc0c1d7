"""End to end: speculative decoding on the embedded llama.cpp server, launched by tokenbench from
its knobs (--spec-method draft with SmolLM2 drafting for itself, and ngram), and the server's draft
counts landing in each record (records.jsonl's spec_* keys, from llama.cpp's timings)."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def _run(out, *knobs):
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "tokenbench", "run", "--backend", "xllamacpp"),
            *knobs,
            *("--users", "1", "--max-requests", "2", "--input-tokens", "32", "--output-tokens", "48", "--ignore-eos"),
            *("--out", str(out), "--no-live"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    return results, records


def test_a_draft_model_drafts_and_each_record_says_how_much(tmp_path, embedded_gguf):
    knobs = ("--model", str(embedded_gguf), "--spec-method", "draft", "--spec-draft-model", str(embedded_gguf))
    results, records = _run(tmp_path / "draft", *knobs, "--spec-tokens", "3", "--per-request-metrics")
    command = " ".join(results["target"]["command"])
    assert "--spec-type draft-simple" in command and "--spec-draft-n-max 3" in command
    assert len(records) == 2 and all(r["outcome"] == "ok" for r in records)
    for r in records:
        assert r["spec_from"] == "llamacpp"
        assert r["server_timings"]["draft_n"] == r["spec_draft_tokens"] > 0
        # the same model drafting for itself, greedy on both sides: nearly every draft is kept
        assert r["spec_accepted_tokens"] <= r["spec_draft_tokens"] and r["spec_acceptance_rate"] > 0.5


def test_ngram_lookup_launches_and_serves(tmp_path, embedded_gguf):
    knobs = ("--model", str(embedded_gguf), "--spec-method", "ngram", "--spec-tokens", "4", "--spec-ngram-max", "3")
    results, records = _run(tmp_path / "ngram", *knobs)
    command = " ".join(results["target"]["command"])
    assert "--spec-type ngram-simple" in command and "--spec-ngram-simple-size-m 4" in command
    assert len(records) == 2 and all(r["outcome"] == "ok" for r in records)
    # a random prompt may give no n-gram to look up: drafts are counted only when there were some
    for r in records:
        if r["spec_draft_tokens"] is not None:
            assert 0 <= r["spec_accepted_tokens"] <= r["spec_draft_tokens"]
