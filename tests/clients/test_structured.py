"""Structured output and tool calls: each engine's fields, the reply
checks, and known answers from the scripted mock (every N-th structured reply made invalid)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from pydantic import ValidationError
from run_helpers import resolved

from tokenbench.clients.openai import OpenAIStream, OpenAIWire
from tokenbench.clients.structured import ReplyCheck, arguments_parse, structured_dialect
from tokenbench.clients.tgi import TGIWire
from tokenbench.config import DatasetConfig, OutputConstraint, RateLoad, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.config.target import ResolvedTarget
from tokenbench.errors import BadInput
from tokenbench.mock.structured import instance, pieces, scripted_deltas
from tokenbench.records import Request
from tokenbench.results import SCHEMA_PATH, RunResults
from tokenbench.run import run

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 3}, "tags": {"type": "array"}},
    "required": ["name", "age"],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
    {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}},
]


@pytest.fixture
def schema_file(tmp_path):
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    return path


@pytest.fixture
def tools_file(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(TOOLS))
    return path


def _body(target: TargetConfig, chat: bool = True) -> dict:
    return OpenAIWire(chat).payload(Request(prompt="hi"), target)


def _resolved(settings: TargetConfig, dialect: str | None) -> ResolvedTarget:
    """The target a run resolves from ``settings`` on an engine of this dialect (run.resolve_target)."""
    api = settings.api or "chat"
    chosen = structured_dialect(settings, api, dialect)
    return ResolvedTarget.of(
        settings, url="http://h:1", model="m", api=api, continuous_usage=False, structured_dialect=chosen
    )


def test_response_format_text_reads_the_schema_file(schema_file):
    c = OutputConstraint.model_validate(f"json_schema:{schema_file}")
    assert (c.kind, c.json_schema, c.source) == ("json_schema", SCHEMA, str(schema_file))
    assert OutputConstraint.model_validate("choice:yes,no").choices == ["yes", "no"]
    assert OutputConstraint.model_validate("json_object").kind == "json_object"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("yaml", "write json_object, json_schema:FILE"),
        ("json_schema", "needs its argument"),
        ("json_schema:/no/such/file.json", "cannot read"),
        ("regex:(", "regex:("),
        ("json_object:x", "takes no argument"),
    ],
)
def test_bad_response_format_names_the_flag(text, says):
    with pytest.raises(ValidationError) as err:
        TargetConfig(response_format=text)
    assert says in str(err.value) and "--response-format" in str(err.value)


def test_a_schema_that_is_not_a_json_schema_is_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"type": 12}))
    with pytest.raises(ValidationError, match="not a valid JSON Schema"):
        TargetConfig(response_format=f"json_schema:{path}")


def test_each_dialect_sends_the_schema_in_its_own_field(schema_file):
    target = TargetConfig(url="http://h:1", model="m", response_format=f"json_schema:{schema_file}")
    openai = {"type": "json_schema", "json_schema": {"name": "tokenbench", "schema": SCHEMA}}
    assert _body(_resolved(target, None))["response_format"] == openai
    assert _body(_resolved(target, "vllm"))["response_format"] == openai
    llama = _body(_resolved(target, "llamacpp"))
    assert llama["json_schema"] == SCHEMA and "response_format" not in llama
    tgi = TGIWire().payload(Request(prompt="hi"), _resolved(target.model_copy(update={"api": "tgi"}), "tgi"))
    assert tgi["parameters"]["grammar"] == {"type": "json", "value": SCHEMA}


def test_choice_regex_and_grammar_go_where_each_engine_takes_them(tmp_path):
    grammar = tmp_path / "g.gbnf"
    grammar.write_text('root ::= "a"')
    target = TargetConfig(url="http://h:1", model="m", response_format="choice:yes,no")
    assert _body(_resolved(target, "vllm"))["structured_outputs"] == {"choice": ["yes", "no"]}
    assert _body(_resolved(target, "sglang"))["regex"] == "(yes|no)"
    assert _body(_resolved(target, "llamacpp"))["grammar"] == 'root ::= "yes" | "no"'
    regex = target.model_copy(update={"response_format": OutputConstraint(kind="regex", pattern=r"\d+")})
    assert _body(_resolved(regex, "vllm"))["structured_outputs"] == {"regex": r"\d+"}
    g = TargetConfig(url="http://h:1", model="m", response_format=f"grammar:{grammar}")
    assert _body(_resolved(g, "sglang"))["ebnf"] == 'root ::= "a"'
    with pytest.raises(BadInput, match="--response-format choice: this server's API has no field"):
        _resolved(target, None)  # no --backend: only response_format's kinds
    with pytest.raises(BadInput, match="--response-format regex"):
        _resolved(regex, "llamacpp")


def test_tools_and_a_named_tool_choice(tools_file):
    target = TargetConfig(url="http://h:1", model="m", tools=str(tools_file), tool_choice="get_weather")
    body = _body(_resolved(target, "vllm"))
    assert body["tools"] == TOOLS
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    auto = _resolved(target.model_copy(update={"tool_choice": "required"}), "vllm")
    assert _body(auto)["tool_choice"] == "required"
    with pytest.raises(ValidationError, match="--tool-choice nope: write auto, required, none or one of"):
        TargetConfig(tools=str(tools_file), tool_choice="nope")
    with pytest.raises(ValidationError, match="--tool-choice needs --tools"):
        TargetConfig(tool_choice="auto")
    with pytest.raises(BadInput, match="--tools: tool calls go on a conversation API"):
        _resolved(target.model_copy(update={"api": "completions"}), "vllm")


def test_plain_requests_are_unchanged():
    target = resolved()
    body = _body(target)
    assert not {"response_format", "tools", "tool_choice", "structured_outputs"} & body.keys()


def test_reply_check_known_answers():
    schema = ReplyCheck("json_schema", SCHEMA)
    assert schema.check('{"name": "a", "age": 3}  ') == (True, True)
    assert schema.check('{"name": "a", "age": 2}') == (True, False)  # below the minimum
    assert schema.check('{"name": "a"') == (False, False)
    assert ReplyCheck("json_object").check("[1]") == (True, False)
    assert ReplyCheck("choice", choices=["yes", "no"]).check(" no\n") == (None, True)
    assert ReplyCheck("regex", pattern=r"\d+").check("12a") == (None, False)
    assert ReplyCheck("grammar").check("anything") == (None, None)
    assert arguments_parse(['{"city": "x"}', "{}"]) and not arguments_parse(['{"city"'])


def test_mock_makes_a_valid_instance_and_splits_it_over_every_chunk():
    value = instance(SCHEMA)
    jsonschema.validate(value, SCHEMA)
    parts = pieces(json.dumps(value), 50)
    assert len(parts) == 50 and all(parts) and json.loads("".join(parts)) == value
    deltas, reason = scripted_deltas({"messages": [], "tools": TOOLS, "tool_choice": "auto"}, 4, "r", False)
    assert reason == "tool_calls" and deltas[0]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_stream_reads_tool_call_deltas_as_output():
    stream = OpenAIStream(chat=True)
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {
            "choices": [
                {"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": ""}}]}}
            ]
        },
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1}'}}]}}]},
        {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
    ]
    chunks = [stream.handle(json.dumps(e).encode()) for e in events]
    assert chunks == [False, True, True, False]
    call = stream.tool_calls[0]
    assert (call.id, call.name, "".join(call.arguments)) == ("c1", "f", '{"a": 1}')
    assert stream.first_tool_chunk == 0 and stream.tool_chunks == 2 and stream.first_output_index(2) == 0


def _run(url, tmp_path, target_fields, requests=8, output_tokens=30):
    from run_helpers import quiet

    cfg = RunConfig(
        target=TargetConfig(url=url, **target_fields),
        loads=[UsersLoad(users=2)],
        stop=StopConfig(max_requests=requests, drain_timeout_s=5),
        dataset=DatasetConfig(input_tokens=5, output_tokens=output_tokens, num_prompts=8),
        live=False,
        out_dir=tmp_path / "run",
    )
    return run(cfg, quiet())


def test_valid_fraction_is_the_mocks_scripted_share(mock_server, tmp_path, schema_file):
    """Every 4th structured reply invalid: 8 requests, 6 valid (records and results agree)."""
    from run_helpers import records_of

    url = mock_server(ttft_ms=1, itl_ms=1, invalid_every=4)
    result = _run(url, tmp_path, {"response_format": f"json_schema:{schema_file}"})
    records = records_of(result.run_dir)
    assert [r["structured"] for r in records] == ["json_schema"] * 8
    assert sum(r["output_valid"] for r in records) == 6 and sum(r["output_parsed"] for r in records) == 6
    assert all(len(r["chunk_times_s"]) == 30 for r in records)  # the same schedule as plain text
    point = result.results["points"][0]
    s = point["structured"]
    assert (s["kind"], s["checked"], s["valid"], s["valid_fraction"]) == ("json_schema", 8, 6, 0.75)
    assert "tool_calls" not in point
    jsonschema.validate(result.results, json.loads(SCHEMA_PATH.read_text()))
    assert RunResults.from_json(result.results).to_json() == result.results
    from tokenbench.history.export import run_tables

    tables = run_tables(result.run_dir)  # the Parquet/CSV export: the record fields and the point's
    assert sum(row["output_valid"] for row in tables["records"]) == 6
    assert tables["points"][0]["structured_valid_fraction"] == 0.75
    from tokenbench.report.read.load import load_inputs
    from tokenbench.report.render.outline import build_outline
    from tokenbench.report.sections.charts import build_charts
    from tokenbench.report.sections.verdict import decide

    data = load_inputs([result.run_dir])  # the report's section: valid 75.0% beside TTFT/TPOT
    verdict = decide(data)
    outline = build_outline(data, verdict, build_charts(data, verdict))
    section = next(s for s in outline.sections if s.key == "structured")
    table = section.blocks[0].table
    assert table is not None and table.headers[2] == "valid (%)" and table.rows[0][2] == "75.0"


def test_tool_calls_known_answer(mock_server, tmp_path, tools_file):
    """Each reply one call of the named tool over its 10 chunks; every 2nd call's arguments cut short."""
    from run_helpers import records_of

    url = mock_server(ttft_ms=20, itl_ms=1, invalid_every=2)
    result = _run(url, tmp_path, {"tools": str(tools_file), "tool_choice": "get_weather"}, output_tokens=10)
    records = records_of(result.run_dir)
    assert all(r["outcome"] == "ok" and r["finish_reason"] == "tool_calls" for r in records)
    assert [r["tool_calls"] for r in records] == [1] * 8
    assert sum(r["tool_args_parsed"] for r in records) == 4
    assert all(r["tool_call_chunks"] == 10 and r["first_tool_call_s"] == r["chunk_times_s"][0] for r in records)
    point = result.results["points"][0]
    tc = point["tool_calls"]
    assert (tc["requests"], tc["with_calls"], tc["calls"], tc["args_parsed_fraction"]) == (8, 8, 8, 0.5)
    assert point["ttftc_s"]["count"] == 8 and point["ttftc_s"]["p50"] >= 0.02
    assert "structured" not in point


def test_plain_run_keeps_its_results_shape(mock_server, tmp_path):
    from run_helpers import records_of

    result = _run(mock_server(ttft_ms=1, itl_ms=1, invalid_every=2), tmp_path, {}, requests=4)
    point = result.results["points"][0]
    assert not {"structured", "tool_calls", "ttftc_s"} & point.keys()
    assert all(r["structured"] is None and r["tool_calls"] is None for r in records_of(result.run_dir))


def test_open_loop_carries_the_constraint(mock_server, tmp_path):
    from run_helpers import quiet, records_of

    cfg = RunConfig(
        target=TargetConfig(url=mock_server(ttft_ms=1, itl_ms=1), response_format="json_object"),
        loads=[RateLoad(rate_per_s=40)],
        stop=StopConfig(max_requests=6, drain_timeout_s=5),
        dataset=DatasetConfig(input_tokens=5, output_tokens=5, num_prompts=6),
        live=False,
        out_dir=tmp_path / "run",
    )
    result = run(cfg, quiet())
    assert [r["output_valid"] for r in records_of(result.run_dir)] == [True] * 6
    assert result.results["points"][0]["structured"]["valid_fraction"] == 1.0


@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
def test_a_session_sends_the_canned_tool_result_back_and_continues(mock_server, tmp_path, tools_file, api):
    """Turn 0's reply calls get_weather: turn 1 carries the assistant's call, a tool message with
    the --tool-result text for it, then the next user turn. On Messages the call is a tool_use
    block and its result a tool_result block; on Responses a function_call item and its
    function_call_output: the mock logs each as chat reads it, so all three log the same turns."""
    import urllib.request

    from run_helpers import quiet, records_of

    from tokenbench.config import SessionConfig

    url = mock_server(ttft_ms=2, itl_ms=1, record_requests=True)
    cfg = RunConfig(
        target=TargetConfig(url=url, api=api, tools=str(tools_file), tool_choice="get_weather"),
        loads=[UsersLoad(users=1)],
        stop=StopConfig(max_requests=2),
        dataset=DatasetConfig(input_tokens=8, output_tokens=12, num_prompts=4),
        sessions=SessionConfig(turns=2, tool_result='{"temp": 21}'),
        live=False,
        out_dir=tmp_path / "run",
    )
    records = records_of(run(cfg, quiet()).run_dir)
    assert [r["tool_calls"] for r in records] == [1, 1] and all(r["tool_args_parsed"] for r in records)
    assert "tool_messages" not in records[0]  # a carrier for the next turn, not a record key
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        data = json.loads(resp.read())
    second = data[max(data, key=lambda k: int(k.split("-")[1]))]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "user"]
    call = second[1]["tool_calls"][0]
    assert call["function"] == {"name": "get_weather", "arguments": json.dumps({"city": "x"}).ljust(12)}
    assert second[2] == {"role": "tool", "tool_call_id": call["id"], "content": '{"temp": 21}'}
    with pytest.raises(ValidationError, match="--tool-result answers tool calls: give --tools"):
        cfg.model_validate({**cfg.model_dump(), "target": {"url": url}})


def test_the_preset_runs_each_load_unconstrained_and_with_the_schema():
    """structured-output: two variants of one launch; only the json-schema one's cells ask for it."""
    from tokenbench.experiments.presets import PERSON_SCHEMA, preset
    from tokenbench.experiments.spec import expand

    plans = expand(preset("structured-output", "full"))
    assert [p.label for p in plans] == ["vllm", "sglang"]
    formats = {c.variant: c.config.target.response_format for c in plans[0].cells}
    assert formats["unconstrained"] is None
    assert formats["json-schema"] == OutputConstraint(kind="json_schema", json_schema=PERSON_SCHEMA)
    assert {c.config.dataset.output_tokens for c in plans[0].cells} == {256}  # the same load in both


def test_an_experiment_sets_tools_for_every_variant_unless_one_says(tools_file):
    from tokenbench.experiments.spec import expand, parse_spec

    spec = parse_spec(
        {
            "name": "t",
            "backends": [{"url": "http://127.0.0.1:9", "label": "m"}],
            "load": {"users": [1]},
            "stop": {"duration_s": 1},
            "tools": str(tools_file),
            "tool_choice": "required",
            "variants": [{"label": "tools"}, {"label": "named", "tool_choice": "noop"}],
        }
    )
    cells = {c.variant: c.config.target for c in expand(spec)[0].cells}
    assert cells["tools"].tools == tuple(TOOLS) and cells["tools"].tool_choice == "required"
    assert cells["named"].tool_choice == "noop"
