"""Your own prompts: one JSON object per line, ``{"prompt": ...}`` or ``{"messages": [...]}``, with
an optional ``max_tokens`` and (chat) an optional ``images`` list of files or URLs (datasets/images.py).

A graded row also carries the answer expected of the reply: ``answer`` or ``expected`` (a string or
a number), and optionally its own ``grader`` (datasets/graders.py). GSM8K's rows
(``{"question": ..., "answer": "... #### 42"}``) are read as they are: the question is the
prompt, the graded answer what follows ``####``, graded ``numeric`` unless a grader is named.
Which grader: the row's ``grader``, else --grader, else ``numeric`` for a ``####`` answer, else
``exact``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from tokenbench.datasets.graders import grader as grader_of
from tokenbench.datasets.graders import gsm8k_answer
from tokenbench.datasets.images import row_images
from tokenbench.errors import BadInput
from tokenbench.records import Expected, Request

ANSWER_FIELDS = ("answer", "expected")  # a graded row's expected answer, by the first present
DEFAULT_GRADER = "exact"
GSM8K_GRADER = "numeric"


def json_lines(path: Path, error: type[BadInput] = BadInput) -> Iterator[tuple[int, object]]:
    """Each non-blank line of a JSON-lines file, parsed, with its line number (a leading BOM is
    skipped); a line that is not JSON raises ``error`` naming ``file:line``."""
    with open(path, encoding="utf-8-sig") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                raise error(f"{path}:{lineno}: not a JSON line ({exc.msg})") from exc


def expected_of(row: dict[str, object], where: str, grader: str | None) -> Expected | None:
    """A row's expected answer and grader (None: the row is not graded); BadInput naming the
    line for an answer that is not text or a number, or a grader that is not one."""
    name = next((k for k in ANSWER_FIELDS if row.get(k) is not None), None)
    if name is None:
        if row.get("grader") is not None:
            raise BadInput(f"{where}: a 'grader' without an expected answer: add {' or '.join(ANSWER_FIELDS)}")
        return None
    value = row[name]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise BadInput(f"{where}: {name!r} must be a string or a number")
    answer, default = str(value), DEFAULT_GRADER
    marked = gsm8k_answer(answer) if isinstance(value, str) else None
    if marked is not None:
        answer, default = marked, GSM8K_GRADER
    own = row.get("grader")
    if own is not None and not isinstance(own, str):
        raise BadInput(f"{where}: 'grader' must be a string such as numeric or regex:PATTERN")
    spec = own or grader or default
    grader_of(spec, f"{where}: grader" if own else "--grader")  # a bad spec: BadInput before any load
    return Expected(answer, spec)


def load(path: Path, grader: str | None = None) -> list[Request]:
    """``grader``: --grader (a row's own ``grader`` wins)."""
    requests = []
    for lineno, row in json_lines(path):
        where = f"{path}:{lineno}"
        if not isinstance(row, dict):
            raise BadInput(f"{where}: expected an object with 'prompt' or 'messages'")
        if "prompt" not in row and "messages" not in row and isinstance(row.get("question"), str):
            row = {**row, "prompt": row["question"]}  # GSM8K's (and many evals') field
        expected = expected_of(row, where, grader)
        max_tokens = row.get("max_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens <= 0):
            raise BadInput(f"{where}: max_tokens must be a positive integer")
        images, pixels = row_images(row["images"], path.parent, where) if "images" in row else ((), None)
        if isinstance(row.get("prompt"), str):
            requests.append(
                Request(
                    prompt=row["prompt"], max_tokens=max_tokens, images=images, image_pixels=pixels, expected=expected
                )
            )
        elif isinstance(row.get("messages"), list) and all(
            isinstance(m, dict) and "role" in m and "content" in m for m in row["messages"]
        ):
            messages = tuple({"role": m["role"], "content": m["content"]} for m in row["messages"])
            requests.append(
                Request(messages=messages, max_tokens=max_tokens, images=images, image_pixels=pixels, expected=expected)
            )
        else:
            raise BadInput(
                f"{where}: expected 'prompt' or 'question' (a string) or 'messages' (a list of {{role, content}})"
            )
    return requests
