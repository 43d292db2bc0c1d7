"""The Messages and Responses wires' requests: a conversation held as chat messages (a system
prompt, turns, an assistant's tool calls, their results, images) sent in each API's own shape, the
structured-output and tool fields in each API's words, and what each route refuses."""

from __future__ import annotations

import pytest
from run_helpers import resolved
from typer.testing import CliRunner

from tokenbench.cli import app
from tokenbench.clients import wire_for
from tokenbench.clients.messages import DEFAULT_MAX_TOKENS, MessagesWire
from tokenbench.clients.responses import ResponsesWire
from tokenbench.clients.structured import structured_dialect
from tokenbench.config import OutputConstraint, TargetConfig
from tokenbench.errors import BadInput
from tokenbench.records import Request

CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
CONVERSATION = (
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
    {"role": "user", "content": "And tomorrow?"},
)
PNG = "data:image/png;base64,iVBORw0KGgo="


def test_a_messages_request_holds_the_system_prompt_apart_and_tool_turns_as_blocks():
    body = MessagesWire().payload(Request(messages=CONVERSATION, max_tokens=32), resolved(model="m"))
    assert body["system"] == "You are terse." and body["max_tokens"] == 32 and body["stream"] is True
    assert body["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}}],
        },
        {
            "role": "user",  # the tool's result and the next question: one user turn, as the API wants
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "18 C, sunny"},
                {"type": "text", "text": "And tomorrow?"},
            ],
        },
    ]


def test_a_responses_request_holds_instructions_and_tool_turns_as_items():
    body = ResponsesWire().payload(Request(messages=CONVERSATION, max_tokens=32), resolved(model="m"))
    assert body["instructions"] == "You are terse." and body["max_output_tokens"] == 32
    assert body["store"] is False and body["stream"] is True
    assert body["input"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "18 C, sunny"},
        {"role": "user", "content": "And tomorrow?"},
    ]


def test_one_user_text_is_sent_plainly_and_without_a_limit_messages_asks_the_default():
    target = resolved(model="m")
    assert ResponsesWire().payload(Request(prompt="hi"), target)["input"] == "hi"
    assert "max_output_tokens" not in ResponsesWire().payload(Request(prompt="hi"), target)
    messages = MessagesWire().payload(Request(prompt="hi"), target)
    assert messages["messages"] == [{"role": "user", "content": "hi"}] and "system" not in messages
    assert messages["max_tokens"] == DEFAULT_MAX_TOKENS  # the API requires one


def test_images_go_as_each_apis_image_parts():
    request = Request(prompt="What is this?", images=(PNG, "https://example.com/cat.jpg"))
    turn = MessagesWire().payload(request, resolved(model="m"))["messages"][0]
    assert turn["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
    ]
    item = ResponsesWire().payload(request, resolved(model="m"))["input"][0]
    assert item["content"] == [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": PNG},
        {"type": "input_image", "image_url": "https://example.com/cat.jpg"},
    ]


SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "d", "parameters": SCHEMA}}


def test_structured_output_and_tools_in_each_apis_words():
    target = resolved(model="m", response_format=OutputConstraint.model_validate("json_object"))
    assert ResponsesWire().payload(Request(prompt="x"), target)["text"] == {"format": {"type": "json_object"}}
    schema = OutputConstraint(kind="json_schema", json_schema=SCHEMA)
    target = resolved(model="m", response_format=schema, tools=[WEATHER], tool_choice="get_weather")
    messages = MessagesWire().payload(Request(prompt="x"), target)
    assert messages["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert messages["tools"] == [{"name": "get_weather", "description": "d", "input_schema": SCHEMA}]
    assert messages["tool_choice"] == {"type": "tool", "name": "get_weather"}
    responses = ResponsesWire().payload(Request(prompt="x"), target)
    assert responses["text"] == {"format": {"type": "json_schema", "name": "tokenbench", "schema": SCHEMA}}
    assert responses["tools"] == [{"type": "function", "name": "get_weather", "description": "d", "parameters": SCHEMA}]
    assert responses["tool_choice"] == {"type": "function", "name": "get_weather"}
    target = resolved(model="m", tools=[WEATHER], tool_choice="required")
    assert MessagesWire().payload(Request(prompt="x"), target)["tool_choice"] == {"type": "any"}
    assert ResponsesWire().payload(Request(prompt="x"), target)["tool_choice"] == "required"


def test_what_an_api_has_no_field_for_is_refused_before_any_load():
    settings = TargetConfig(response_format=OutputConstraint.model_validate("json_object"))
    with pytest.raises(BadInput, match="--api messages takes a json_schema only"):
        structured_dialect(settings, "messages", None)
    settings = TargetConfig(response_format=OutputConstraint.model_validate("choice:a,b"))
    with pytest.raises(BadInput, match="for choice use --api chat"):
        structured_dialect(settings, "responses", None)
    assert structured_dialect(TargetConfig(tools=[WEATHER]), "messages", None) is None


def test_vllms_messages_route_drops_ignore_eos_so_asking_for_it_there_is_refused():
    args = ["run", "--url", "http://127.0.0.1:9", "--backend", "vllm", "--api", "messages", "--ignore-eos"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "--ignore-eos: vLLM's --api messages route drops it" in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("spelling", "api"),
    [("anthropic-messages", "messages"), ("anthropic_messages", "messages"), ("openai-responses", "responses")],
)
def test_other_tools_names_for_the_apis_are_read_as_ours(spelling, api):
    assert TargetConfig(api=spelling).api == api
    assert type(wire_for(api)) is {"messages": MessagesWire, "responses": ResponsesWire}[api]
