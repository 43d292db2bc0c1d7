"""Multi-turn conversations (``--multi-turn``): what each user turn says and how long its reply may be.

Sources: ShareGPT (every human turn, each followed by the dataset's reply, whose length is that
turn's max_tokens unless ``--output-tokens``; ``--sharegpt-sampling`` vllm or sglang, single prompts
drawn as those tools draw them, is refused), JSONL (one ``{"messages": [...]}`` a line with one
or more user turns: an optional leading system message, each user message's following assistant
message sets its max_tokens the same way), and synthetic (``--turns N`` turns of ``--input-tokens``
each, ``--output-tokens`` replies). The dataset's replies are never sent: a turn's history is
the server's own replies (loadgen/sessions.py). ``--num-prompts`` is the number of conversations.
Lengths are exact with a tokenizer, else estimated (``DatasetFacts.exact_lengths`` says which).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from tokenbench.config import SYNTHETIC_OUTPUT_TOKENS, DatasetConfig, SessionConfig, multi_turn_sampling_error
from tokenbench.datasets import check_path, read_system_prompt, sharegpt
from tokenbench.datasets.images import synthetic_image_sets
from tokenbench.datasets.synthetic import synthetic_prompts
from tokenbench.datasets.tokenizers import Tokenizer
from tokenbench.errors import BadInput
from tokenbench.records import Group
from tokenbench.results import DatasetFacts, SessionFacts

_USER_ROLES = ("human", "user")


@dataclass(frozen=True, slots=True)
class Turn:
    """One user turn: its text, its tokens (exact with a tokenizer), its reply's max_tokens."""

    text: str
    tokens: int
    max_tokens: int
    # images: the turn's own images (data URLs) and their pixels (--images)
    images: tuple[str, ...] = ()
    image_pixels: int | None = None


@dataclass(frozen=True, slots=True)
class Conversation:
    turns: tuple[Turn, ...]
    system: str | None = None
    system_tokens: int = 0
    group: Group | None = None  # routing: every turn's adapter, class, tenant, priority
    headers: tuple[tuple[str, str], ...] = ()  # routing: every turn's, its group's tenant header


def estimate_tokens(text: str) -> int:
    """About 1.3 tokens a word: the datasets' estimate without a tokenizer."""
    return max(1, round(len(text.split()) * 1.3))


def build_conversations(
    cfg: DatasetConfig, sessions: SessionConfig, tokenizer: Tokenizer | None, seed: int
) -> tuple[list[Conversation], DatasetFacts]:
    """The dataset's conversations (shuffled by the seed, at most ``--num-prompts``) and what
    results.json says of them."""
    count = tokenizer.count if tokenizer is not None else estimate_tokens
    check_path(cfg)
    if cfg.sharegpt_sampling != "tokenbench":  # RunConfig refuses it too; this takes the parts apart
        raise BadInput(multi_turn_sampling_error(cfg.sharegpt_sampling))
    system = read_system_prompt(cfg.system_prompt)
    if cfg.name == "synthetic":
        raw, source = _synthetic(cfg, sessions, tokenizer, seed), None
    elif cfg.name == "sharegpt":
        path = cfg.path or sharegpt.default_path()
        raw, source = list(_sharegpt(path)), str(path)
    elif cfg.name == "jsonl":
        if cfg.path is None:
            raise BadInput("--dataset jsonl --multi-turn needs --dataset-path FILE.jsonl")
        raw, source = load_jsonl(cfg.path), str(cfg.path)
    else:
        raise BadInput(f"--multi-turn reads conversations from synthetic, sharegpt or jsonl, not {cfg.name}")
    if cfg.name != "synthetic":
        random.Random(seed).shuffle(raw)
    conversations = [_sized(c, count, cfg.output_tokens, system) for c in raw[: cfg.num_prompts]]
    if not conversations:
        raise BadInput(f"dataset {cfg.name!r} gave no conversation with a user turn (check --dataset-path)")
    if cfg.images is not None:  # images: each turn's user message carries its own
        conversations = _with_images(conversations, cfg, seed)
    facts = DatasetFacts(
        name=cfg.name,
        num_requests=sum(len(c.turns) for c in conversations),
        exact_lengths=tokenizer is not None,
        tokenizer=tokenizer.name if tokenizer is not None else None,
        system_prompt=any(c.system for c in conversations),
        unique_prefix=False,
        source=source,
        sessions=SessionFacts(
            conversations=len(conversations),
            turns=sum(len(c.turns) for c in conversations),
            history_tokens="tokenizer" if tokenizer is not None else "estimate",
        ),
    )
    return conversations, facts


def _with_images(conversations: list[Conversation], cfg: DatasetConfig, seed: int) -> list[Conversation]:
    sets = iter(synthetic_image_sets(sum(len(c.turns) for c in conversations), cfg, seed))
    out = []
    for c in conversations:
        turns = []
        for t in c.turns:
            urls, pixels = next(sets)
            turns.append(replace(t, images=urls, image_pixels=pixels))
        out.append(replace(c, turns=tuple(turns)))
    return out


@dataclass(frozen=True, slots=True)
class _RawConversation:
    """Texts before counting: (user text, the dataset's reply or None, or a fixed max_tokens)."""

    turns: list[tuple[str, str | int | None]]
    system: str | None = None


def _sized(
    raw: _RawConversation, count: Callable[[str], int], output_tokens: int | None, system: str | None
) -> Conversation:
    """Counted turns; the reply's length is max_tokens unless --output-tokens fixes it."""
    turns = []
    for text, reply in raw.turns:
        if output_tokens is not None:
            out = output_tokens
        elif isinstance(reply, int):
            out = reply
        elif reply:
            out = max(1, count(reply))
        else:
            out = SYNTHETIC_OUTPUT_TOKENS
        turns.append(Turn(text, count(text), out))
    own = raw.system if raw.system is not None else system
    return Conversation(tuple(turns), own, count(own) if own else 0)


def _synthetic(
    cfg: DatasetConfig, sessions: SessionConfig, tokenizer: Tokenizer | None, seed: int
) -> list[_RawConversation]:
    if sessions.turns is None:
        raise BadInput("--dataset synthetic --multi-turn needs --turns N (user turns per conversation)")
    n = sessions.turns
    out = cfg.output_tokens or SYNTHETIC_OUTPUT_TOKENS
    texts = synthetic_prompts(cfg.num_prompts * n, cfg.input_tokens, tokenizer, seed)
    return [_RawConversation([(t, out) for t in texts[i * n : (i + 1) * n]]) for i in range(cfg.num_prompts)]


def _sharegpt(path: Path) -> Iterator[_RawConversation]:
    """Every human turn of every conversation, each with the reply that follows it."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    for obj in sharegpt.iter_json_array(text):
        messages = obj.get("conversations") or obj.get("conversation") or []
        if not isinstance(messages, list):
            continue  # no turns to read
        pairs = [(m.get("from"), m.get("value")) for m in messages if isinstance(m, dict)]
        turns = _pair_turns([(role, value) for role, value in pairs if isinstance(value, str)])
        if turns:
            yield _RawConversation(turns)


def _pair_turns(messages: list[tuple[object, str]]) -> list[tuple[str, str | int | None]]:
    """(user text, the reply after it): a user message followed by a non-user one."""
    turns: list[tuple[str, str | int | None]] = []
    for i, (role, text) in enumerate(messages):
        if role not in _USER_ROLES or not text.strip():
            continue
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        reply = nxt[1] if nxt is not None and nxt[0] not in _USER_ROLES and nxt[0] != "system" else None
        turns.append((text, reply))
    return turns


def load_jsonl(path: Path) -> list[_RawConversation]:
    """One ``{"messages": [{role, content}, ...]}`` a line; an error names file:line."""
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if line.strip():
                out.append(_jsonl_line(line, f"{path}:{lineno}"))
    return out


def _jsonl_line(line: str, where: str) -> _RawConversation:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{where}: not a JSON line ({exc.msg})") from exc
    messages = row.get("messages") if isinstance(row, dict) else None
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages
    ):
        raise BadInput(f'{where}: expected {{"messages": [{{"role": ..., "content": "..."}}, ...]}}')
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
    turns = _pair_turns([(m["role"], m["content"]) for m in messages])
    if not turns:
        raise BadInput(f"{where}: a conversation needs at least one user message with text")
    return _RawConversation(turns, system)
