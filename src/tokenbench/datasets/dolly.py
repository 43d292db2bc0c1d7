"""databricks-dolly-15k: prompt = context + instruction (the BentoML study's prompts).

From a local JSONL (``instruction``, ``context``, ``response``, ``category`` per line) or, when no
path is given and the ``datasets`` package is installed and online, from the HF hub.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Required, TypedDict

from tokenbench.errors import BadInput

HUB_ID = "databricks/databricks-dolly-15k"


class DollyRow(TypedDict, total=False):
    """One row of the dataset (a JSON line or a hub row): only ``instruction`` is checked."""

    instruction: Required[str]
    context: str | None
    response: str | None
    category: str


def rows(path: Path | None) -> Iterator[DollyRow]:
    if path is None:
        try:
            from datasets import load_dataset  # type: ignore[import-not-found]  # optional; needs network
        except ImportError as exc:
            raise FileNotFoundError(
                "dolly: pass --dataset-path databricks-dolly-15k.jsonl (or install `datasets` "
                "to load it from the HF hub when online)"
            ) from exc
        yield from load_dataset(HUB_ID, split="train")
        return
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BadInput(f"{path}:{lineno}: not a JSON line ({exc.msg})") from exc
            if "instruction" not in row:
                raise BadInput(f"{path}:{lineno}: a dolly row needs an 'instruction' field")
            yield row


def prompt_of(row: DollyRow) -> str:
    context = (row.get("context") or "").strip()
    instruction = row["instruction"].strip()
    return f"{context}\n\n{instruction}" if context else instruction
