"""The mock's answers by prompt (``tokenbench mock --answers FILE``): a graded run's known answer.

FILE is JSON lines, ``{"prompt": "...", "reply": "..."}`` each. A request whose prompt text equals
a row's ``prompt`` exactly gets that row's ``reply`` as its content, split over its usual chunks on
its usual schedule (structured.pieces: every chunk carries text, trailing spaces pad a short
reply); any other request gets the usual scripted words. The prompt text: chat and Messages, the
last user message's content (its text parts joined); completions, ``prompt``; Responses,
``input`` (a string, else its last user message). A later row for the same prompt wins.

So a dataset of N graded rows served with the right reply for K of them grades K/N exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenbench.datasets.jsonl import json_lines
from tokenbench.errors import BadInput

Body = dict[str, Any]  # a request body as the client sent it: a JSON edge


def load_answers(path: Path) -> dict[str, str]:
    """prompt -> reply; BadInput naming the file and line of a row that is not one."""
    if not path.is_file():
        raise BadInput(f"--answers {path}: no such file; give a JSONL file of {{prompt, reply}} rows")
    answers: dict[str, str] = {}
    for lineno, row in json_lines(path):
        if not (isinstance(row, dict) and isinstance(row.get("prompt"), str) and isinstance(row.get("reply"), str)):
            raise BadInput(f'--answers {path}:{lineno}: expected {{"prompt": TEXT, "reply": TEXT}}')
        answers[row["prompt"]] = row["reply"]
    return answers


def _text(content: object) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: the text ones, joined
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text")]
        return "".join(t for t in texts if isinstance(t, str))
    return None


def _last_user(messages: object) -> str | None:
    if not isinstance(messages, list):
        return None
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    return _text(users[-1].get("content")) if users else None


def prompt_text(body: Body) -> str | None:
    """The text a request's answer is looked up by (None: it has none)."""
    if "messages" in body:
        return _last_user(body["messages"])
    if "prompt" in body:
        prompt = body["prompt"]
        return prompt if isinstance(prompt, str) else None
    given = body.get("input")
    return given if isinstance(given, str) else _last_user(given)


def answer_for(answers: dict[str, str], body: Body) -> str | None:
    """The reply scripted for this request's prompt (None: the usual words)."""
    if not answers:
        return None
    text = prompt_text(body)
    return answers.get(text) if text is not None else None
