"""Structured output and tool calls: what a request asks for, in each
engine's own words, and whether the reply kept to it.

``--response-format`` is an ``OutputConstraint`` (config.py): ``json_object``, ``json_schema:FILE``,
``choice:A,B,C``, ``regex:PATTERN`` or ``grammar:FILE``. Each engine takes it in its own fields
(the dialect, ``Profile.structured``), read from the engines' request models:

- openai (any OpenAI-compatible server; vLLM, SGLang and llama.cpp all take it): ``response_format``
  ``{"type": "json_object"}`` or ``{"type": "json_schema", "json_schema": {"name", "schema"}}``.
  No choice, regex or grammar: those need a --backend whose dialect has them.
- vllm: JSON kinds as openai; choice / regex / grammar in ``structured_outputs`` (vLLM 0.32
  vllm/sampling_params.py StructuredOutputsParams: json, regex, choice, grammar, json_object;
  chat_completion/protocol.py ChatCompletionRequest.structured_outputs). vLLM before 0.11 called
  them ``guided_choice`` / ``guided_regex`` / ``guided_grammar``: pass those with --extra-body.
- sglang: JSON kinds as openai; ``regex`` and ``ebnf`` request fields (sglang/srt/entrypoints/
  openai/protocol.py ChatCompletionRequest.regex / .ebnf); a choice is sent as the regex of its
  alternatives.
- llamacpp: ``json_schema`` (the schema itself) and ``grammar`` (GBNF) request fields (llama.cpp
  tools/server/README.md, /completion and the OAI-compatible /v1/chat/completions); json_object as
  response_format; a choice as the GBNF of its alternatives; no regex.
- tgi: the native /generate's ``parameters.grammar`` ``{"type": "json"|"regex", "value": ...}``
  (text-generation-inference router/src/lib.rs GrammarType); no choice, no other grammar.

A reply is checked on the client once it ends (``ReplyCheck``): the JSON kinds parse as JSON
(``output_parsed``) and, for a schema, validate against it with the ``jsonschema`` package
(``output_valid``); a choice is one of the choices (surrounding whitespace ignored), a regex
matches the whole reply (Python's ``re``: an engine's regex dialect may differ at the edges); a
grammar cannot be checked here (``output_valid`` None).

``--tools FILE`` (OpenAI tool definitions: a JSON list of ``{"type": "function", "function":
{"name", "parameters", ...}}``, or an object with such a ``tools`` list) and ``--tool-choice
auto|required|none|NAME`` go on the chat API as OpenAI's ``tools`` / ``tool_choice`` (a NAME as
``{"type": "function", "function": {"name": NAME}}``, which vLLM serves by guided decoding,
without a tool parser). Streamed ``delta.tool_calls`` are output (clients/openai.py).

The Messages and Responses APIs take both in their own words (``conversation_fields``), read
from vLLM 0.32's request models (entrypoints/anthropic/protocol.py, openai/responses/protocol.py):

- messages: ``output_config.format`` ``{"type": "json_schema", "schema"}`` (no json_object: ask for
  ``json_schema`` with ``{"type": "object"}``); ``tools`` as ``{"name", "description",
  "input_schema"}``, ``tool_choice`` ``{"type": "auto"|"any"|"none"}`` or ``{"type": "tool", "name"}``.
- responses: ``text.format`` ``{"type": "json_object"}`` or ``{"type": "json_schema", "name",
  "schema"}``; ``tools`` as ``{"type": "function", "name", "description", "parameters"}``,
  ``tool_choice`` ``auto``, ``required``, ``none`` or ``{"type": "function", "name"}``.

Neither has a choice, regex or grammar field: those go on --api chat with an engine's dialect.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tokenbench.config import CONVERSATION_APIS
from tokenbench.config.constraints import JSON_KINDS, TOOL_CHOICES, Dialect, JsonDict
from tokenbench.errors import BadInput

if TYPE_CHECKING:
    from tokenbench.config import OutputConstraint, TargetConfig
Body = dict[str, object]


def alternatives_regex(choices: Sequence[str]) -> str:
    return "(" + "|".join(re.escape(c) for c in choices) + ")"


def alternatives_gbnf(choices: Sequence[str]) -> str:
    return "root ::= " + " | ".join(json.dumps(c) for c in choices)


def constraint_fields(
    kind: str,
    dialect: str,
    *,
    schema: JsonDict | None = None,
    choices: Sequence[str] = (),
    pattern: str | None = None,
    grammar: str | None = None,
) -> Body:
    """The request body's fields that ask ``dialect``'s engine for the constraint. BadInput when
    the engine has no field for it (naming the flag and the way out)."""
    if kind == "json_object" and dialect != "tgi":
        return {"response_format": {"type": "json_object"}}
    if kind == "json_schema" and dialect == "llamacpp":
        return {"json_schema": schema}
    if kind == "json_schema" and dialect != "tgi":
        return {"response_format": {"type": "json_schema", "json_schema": {"name": "tokenbench", "schema": schema}}}
    if dialect == "vllm":
        key, value = {
            "choice": ("choice", list(choices)),
            "regex": ("regex", pattern),
            "grammar": ("grammar", grammar),
        }[kind]
        return {"structured_outputs": {key: value}}
    if dialect == "sglang" and kind in ("choice", "regex", "grammar"):
        if kind == "grammar":
            return {"ebnf": grammar}
        return {"regex": pattern if kind == "regex" else alternatives_regex(choices)}
    if dialect == "llamacpp" and kind in ("choice", "grammar"):
        return {"grammar": grammar if kind == "grammar" else alternatives_gbnf(choices)}
    if dialect == "tgi" and kind in ("json_schema", "regex"):
        return {
            "grammar": {"type": "json", "value": schema}
            if kind == "json_schema"
            else {"type": "regex", "value": pattern}
        }
    where = "this server's API" if dialect == "openai" else f"the {dialect} dialect"
    raise BadInput(
        f"--response-format {kind}: {where} has no field for it; name the engine with --backend "
        "(vllm, sglang, llamacpp, tgi), or send the engine's own field with --extra-body"
    )


def tool_fields(tools: Sequence[JsonDict], choice: str | None) -> Body:
    """OpenAI's ``tools`` and ``tool_choice`` (a tool's name as a named choice)."""
    body: Body = {"tools": list(tools)}
    if choice is not None:
        body["tool_choice"] = choice if choice in TOOL_CHOICES else {"type": "function", "function": {"name": choice}}
    return body


class ReplyCheck:
    """Checks a finished reply against one constraint: (parsed, valid), None where it cannot say."""

    def __init__(
        self,
        kind: str,
        schema: JsonDict | None = None,
        choices: Sequence[str] = (),
        pattern: str | None = None,
    ) -> None:
        self.kind = kind
        self._choices = frozenset(choices)
        self._pattern = re.compile(pattern) if pattern is not None else None
        self._validator: Any = None  # jsonschema's validator: an untyped library
        if schema is not None:
            from jsonschema import validators  # type: ignore[import-untyped]  # no stubs installed

            self._validator = validators.validator_for(schema)(schema)

    def check(self, text: str) -> tuple[bool | None, bool | None]:
        if self.kind in JSON_KINDS:
            try:
                value = json.loads(text)
            except ValueError:
                return False, False
            if self.kind == "json_object":
                return True, isinstance(value, dict)
            return True, bool(self._validator.is_valid(value))
        if self.kind == "choice":
            return None, text.strip() in self._choices
        if self.kind == "regex" and self._pattern is not None:
            return None, self._pattern.fullmatch(text) is not None
        return None, None  # a grammar: not checked here


def arguments_parse(arguments: Sequence[str]) -> bool:
    """Every tool call's arguments are a JSON object."""
    for text in arguments:
        try:
            value = json.loads(text) if text.strip() else {}
        except ValueError:
            return False
        if not isinstance(value, dict):
            return False
    return True


def request_fields(target: TargetConfig) -> Body:
    """What the target's --response-format, --tools and --tool-choice add to an OpenAI request body."""
    body: Body = {}
    c = target.response_format
    if c is not None:
        body.update(fields_of(c, target.structured_dialect or "openai"))
    if target.tools:
        body.update(tool_fields(target.tools, target.tool_choice))
    return body


def conversation_fields(api: str, target: TargetConfig) -> Body:
    """What --response-format, --tools and --tool-choice add to a Messages or Responses request."""
    body: Body = {}
    c = target.response_format
    if c is not None:
        body.update(conversation_format(api, c.kind, c.json_schema))
    if target.tools:
        functions = [t.get("function", t) for t in target.tools]
        choice = target.tool_choice
        if api == "messages":
            body["tools"] = [
                {
                    "name": f.get("name"),
                    "description": f.get("description", ""),
                    "input_schema": f.get("parameters", {}),
                }
                for f in functions
            ]
            if choice is not None:
                named = {"auto": "auto", "required": "any", "none": "none"}
                body["tool_choice"] = {"type": named[choice]} if choice in named else {"type": "tool", "name": choice}
        else:
            body["tools"] = [{"type": "function", **f} for f in functions]
            if choice is not None:
                body["tool_choice"] = choice if choice in TOOL_CHOICES else {"type": "function", "name": choice}
    return body


def conversation_format(api: str, kind: str, schema: JsonDict | None) -> Body:
    """The field asking a Messages or Responses request for the constraint; BadInput where the API
    has none."""
    if api == "messages" and kind == "json_schema":
        return {"output_config": {"format": {"type": "json_schema", "schema": schema}}}
    if api == "responses" and kind == "json_schema":
        return {"text": {"format": {"type": "json_schema", "name": "tokenbench", "schema": schema}}}
    if api == "responses" and kind == "json_object":
        return {"text": {"format": {"type": "json_object"}}}
    other = "a json_schema" if api == "messages" else "json_object or json_schema"
    raise BadInput(f"--response-format {kind}: --api {api} takes {other} only; for {kind} use --api chat")


def fields_of(c: OutputConstraint, dialect: str) -> Body:
    return constraint_fields(
        c.kind, dialect, schema=c.json_schema, choices=c.choices or (), pattern=c.pattern, grammar=c.grammar
    )


def reply_check(target: TargetConfig) -> ReplyCheck | None:
    """The check of each reply under the target's --response-format (None: unconstrained)."""
    c = target.response_format
    if c is None:
        return None
    return ReplyCheck(c.kind, c.json_schema, c.choices or (), c.pattern)


def structured_dialect(settings: TargetConfig, api: str, dialect: Dialect | None) -> Dialect | None:
    """The fields --response-format goes in on ``api`` with this engine's dialect
    (``Profile.structured``; None: openai), None when nothing was asked for; BadInput before any
    load when the API or the engine cannot take what was asked."""
    if settings.tools and api not in CONVERSATION_APIS:
        raise BadInput(
            f"--tools: tool calls go on a conversation API (chat, messages, responses), not --api {api}: "
            f"drop --api {api} or use --api chat"
        )
    if settings.response_format is None:
        return None
    if api in ("messages", "responses"):
        c = settings.response_format
        conversation_format(api, c.kind, c.json_schema)  # BadInput now if the API has no field for it
        return None
    if api not in ("chat", "completions", "tgi"):
        raise BadInput(f"--response-format: --api {api} has no structured-output field here; use --api chat")
    chosen: Dialect = "tgi" if api == "tgi" else dialect or "openai"
    fields_of(settings.response_format, chosen)  # BadInput now if the engine has no field for it
    return chosen
