"""What a request may ask its reply to be, as the settings hold it: the constraint kinds of
``--response-format`` (``json_object``, ``json_schema:FILE``, ``choice:A,B,C``, ``regex:PATTERN``,
``grammar:FILE``), the engines' dialects, ``--tools`` files and ``--tool-choice``'s words, read
and checked from their text. How each engine is sent them, and how a reply is checked, is
``clients/structured.py``'s."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

ConstraintKind = Literal["json_object", "json_schema", "choice", "regex", "grammar"]
KINDS: tuple[str, ...] = get_args(ConstraintKind)
# How an engine takes a constraint in its request body (Profile.structured).
Dialect = Literal["openai", "vllm", "sglang", "llamacpp", "tgi"]
JSON_KINDS = frozenset({"json_object", "json_schema"})
TOOL_CHOICES = ("auto", "required", "none")

# A JSON Schema or tool definition as the user wrote it: a JSON edge, any shape.
JsonDict = dict[str, Any]

USAGE = (
    "write json_object, json_schema:FILE, choice:A,B,C, regex:PATTERN or grammar:FILE "
    "(e.g. --response-format json_schema:schema.json)"
)


def _read_json(path: Path, flag: str) -> Any:  # a user's JSON file: any shape, checked by the caller
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise ValueError(f"{flag} cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"{flag} {path} is not JSON: {exc}") from None


def parse_constraint(text: str) -> JsonDict:
    """``--response-format``'s text -> the fields of an OutputConstraint (files read here)."""
    kind, sep, arg = text.strip().partition(":")
    if kind not in KINDS:
        raise ValueError(f"--response-format {text!r}: {USAGE}")
    if kind == "json_object":
        if sep:
            raise ValueError(f"--response-format json_object takes no argument: {USAGE}")
        return {"kind": kind}
    if not arg:
        raise ValueError(f"--response-format {kind} needs its argument: {USAGE}")
    if kind == "json_schema":
        schema = _read_json(Path(arg), "--response-format json_schema:")
        if not isinstance(schema, dict):
            raise ValueError(f"--response-format json_schema:{arg}: the file must hold a JSON Schema object")
        return {"kind": kind, "json_schema": schema, "source": arg}
    if kind == "choice":
        return {"kind": kind, "choices": [c for c in arg.split(",") if c]}
    if kind == "regex":
        return {"kind": kind, "pattern": arg}
    try:
        grammar = Path(arg).read_text()
    except OSError as exc:
        raise ValueError(f"--response-format grammar:{arg}: cannot read it ({exc.strerror or exc})") from None
    return {"kind": kind, "grammar": grammar, "source": arg}


def check_schema(schema: JsonDict) -> None:
    """A JSON Schema the validator accepts, else ValueError naming the problem."""
    from jsonschema import exceptions, validators  # type: ignore[import-untyped]  # no stubs installed

    try:
        validators.validator_for(schema).check_schema(schema)
    except exceptions.SchemaError as exc:
        raise ValueError(f"--response-format json_schema: not a valid JSON Schema: {exc.message}") from None


def load_tools(value: object) -> list[JsonDict]:
    """``--tools``' value (a file's path, or the list itself from an experiment file) -> the tool
    definitions, each an OpenAI ``{"type": "function", "function": {"name": ...}}``."""
    if isinstance(value, (str, Path)):
        value = _read_json(Path(value), "--tools")
        if isinstance(value, dict) and "tools" in value:
            value = value["tools"]
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError("--tools FILE must hold a non-empty JSON list of OpenAI tool definitions")
    for i, tool in enumerate(value):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(fn, dict)
            or not isinstance(fn.get("name"), str)
            or tool.get("type", "function") != "function"
        ):
            raise ValueError(
                f'--tools: tool {i} is not {{"type": "function", "function": {{"name": ..., "parameters": ...}}}}'
            )
    return [dict(tool) for tool in value]


def tool_names(tools: Sequence[JsonDict]) -> list[str]:
    return [str(t["function"]["name"]) for t in tools]
