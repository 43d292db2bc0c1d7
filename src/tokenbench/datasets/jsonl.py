"""Your own prompts: one JSON object per line, ``{"prompt": ...}`` or ``{"messages": [...]}``, with
an optional ``max_tokens`` and (chat) an optional ``images`` list of files or URLs (datasets/images.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from tokenbench.datasets.images import row_images
from tokenbench.errors import BadInput
from tokenbench.records import Request


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


def load(path: Path) -> list[Request]:
    requests = []
    for lineno, row in json_lines(path):
        where = f"{path}:{lineno}"
        if not isinstance(row, dict):
            raise BadInput(f"{where}: expected an object with 'prompt' or 'messages'")
        max_tokens = row.get("max_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens <= 0):
            raise BadInput(f"{where}: max_tokens must be a positive integer")
        images, pixels = row_images(row["images"], path.parent, where) if "images" in row else ((), None)
        if isinstance(row.get("prompt"), str):
            requests.append(Request(prompt=row["prompt"], max_tokens=max_tokens, images=images, image_pixels=pixels))
        elif isinstance(row.get("messages"), list) and all(
            isinstance(m, dict) and "role" in m and "content" in m for m in row["messages"]
        ):
            messages = tuple({"role": m["role"], "content": m["content"]} for m in row["messages"])
            requests.append(Request(messages=messages, max_tokens=max_tokens, images=images, image_pixels=pixels))
        else:
            raise BadInput(f"{where}: expected 'prompt' (a string) or 'messages' (a list of {{role, content}})")
    return requests
