"""Structured output live on the embedded llama.cpp server (xllamacpp + SmolLM2-135M GGUF): a JSON
schema sent as llama.cpp's own ``json_schema`` field (its dialect: structured.py), which the server
turns into a grammar. Every reply parses and validates against the schema, and the point's
``structured.valid_fraction`` says so beside its TTFT and TPOT."""

import json

import pytest
from preset_helpers import tokenbench

from tokenbench.experiments.presets import PERSON_SCHEMA

pytestmark = pytest.mark.e2e

SCHEMA = PERSON_SCHEMA  # the structured-output preset's: bounded, so a reply fits --output-tokens


@pytest.fixture(scope="module")
def schema_run(tmp_path_factory, embedded_gguf):
    base = tmp_path_factory.mktemp("llamacpp-structured")
    schema = base / "person.json"
    schema.write_text(json.dumps(SCHEMA))
    out = base / "run"
    args = ["--response-format", f"json_schema:{schema}", "--users", "2", "--duration", "10", "--drain-timeout", "20"]
    proc = tokenbench(
        "run", *args, "--input-tokens", "32", "--output-tokens", "96", "--out", str(out), "--no-live", timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_every_reply_meets_the_schema(schema_run):
    records = [json.loads(line) for line in (schema_run / "records.jsonl").read_text().splitlines()]
    ok = [r for r in records if r["outcome"] == "ok"]
    assert len(ok) >= 2
    assert all(r["structured"] == "json_schema" for r in records)
    assert all(r["output_parsed"] and r["output_valid"] for r in ok)
    point = json.loads((schema_run / "results.json").read_text())["points"][0]
    assert point["structured"]["valid_fraction"] == 1.0 and point["structured"]["checked"] >= 1
    assert point["ttft_s"]["count"] >= 1 and point["tpot_s"]["mean"] > 0
    config = json.loads((schema_run / "config.json").read_text())
    assert config["target"]["response_format"]["json_schema"] == SCHEMA  # the run says what it asked
    assert config["resolved_target"]["structured_dialect"] == "llamacpp"
