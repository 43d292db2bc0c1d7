"""A call's prompt as messages: its static segments drawn once, its parents' parts filled in.

``Blocks`` become text through datasets.trace_prompts.BlockPrompts (one per block size, keyed by
scope and hash id, so a block is the same text wherever its session uses it); ``Output`` is the
parent's reply (live, or the recording's with ``--program-output recorded``: its text, else
blocks of its recorded length); ``PromptOf`` is the parent's own messages. Consecutive messages of the
same role stay apart (a child's messages start with exactly its parent's). Token counts are the recording's for blocks and a text's count (exact
with a tokenizer, else an estimate) for the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tokenbench.datasets.programs.model import Blocks, Call, Message, Output, PromptOf, Segment
from tokenbench.datasets.tokenizers import Tokenizer
from tokenbench.datasets.trace_prompts import BlockPrompts

Messages = tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Reply:
    """A parent's reply as a child's prompt takes it: its text and its tokens."""

    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Drawn:
    """A call's prompt with its static segments drawn: a message for each, None in a parent's place."""

    parts: tuple[dict[str, Any] | Segment, ...]
    static_tokens: int


class ProgramPrompts:
    def __init__(self, tokenizer: Tokenizer | None, count: Callable[[str], int], seed: int = 0) -> None:
        self._tokenizer = tokenizer
        self.count = count
        self._seed = seed
        self._blocks: dict[int, BlockPrompts] = {}

    def blocks_text(self, b: Blocks) -> str:
        prompts = self._blocks.get(b.block_size)
        if prompts is None:
            prompts = self._blocks[b.block_size] = BlockPrompts(b.block_size, self._tokenizer, self._seed)
        parts, left = [], b.tokens
        ids = b.hash_ids or (0,)
        i = 0
        while left > 0:
            h = ids[i] if i < len(ids) else f"{ids[-1]}+{i - len(ids) + 1}"
            n = min(b.block_size, left)
            parts.append(prompts.keyed(f"{b.scope}/{h}", n))
            left -= n
            i += 1
        return "".join(parts)

    def draw(self, call: Call) -> Drawn:
        """The call's static segments as messages (before any parent has replied)."""
        parts: list[dict[str, Any] | Segment] = []
        tokens = 0
        for s in call.prompt:
            if isinstance(s, Message):
                parts.append({"role": s.role, "content": s.content})
                tokens += self.count(s.content) if s.content else 0
            elif isinstance(s, Blocks):
                parts.append({"role": s.role, "content": self.blocks_text(s)})
                tokens += s.tokens
            else:
                parts.append(s)
        return Drawn(tuple(parts), tokens)

    def recorded_reply(self, call: Call) -> Reply:
        """The recording's reply of ``call``: its text, else blocks of its recorded length."""
        text = call.recorded.output_text
        if text is not None:
            return Reply(text, self.count(text) if text else 0)
        n = call.recorded.output_tokens or call.max_tokens
        return Reply(self.blocks_text(Blocks((), n, 64, f"reply/{call.id}", "assistant")), n)


def filled(
    drawn: Drawn, replies: dict[str, Reply], prompts: dict[str, Messages], tokens: dict[str, int]
) -> tuple[Messages, int, int]:
    """The prompt's messages with each parent's reply and prompt in place, its tokens, and the
    tokens of its leading run of parents' prompts and replies (less a reply's last token, which
    the parent sampled and never fed back: what a prefix cache can serve); consecutive messages of
    one role (text only) joined into one."""
    out: list[dict[str, Any]] = []
    total = drawn.static_tokens
    prefix, leading, ends_on_reply = 0, True, False
    for p in drawn.parts:
        if isinstance(p, Output):
            reply = replies[p.call]
            out.append({"role": "assistant", "content": reply.text})
            total += reply.tokens
            if leading:
                prefix, ends_on_reply = prefix + reply.tokens, True
        elif isinstance(p, PromptOf):
            out.extend(prompts[p.call])  # never merged: a child's prompt starts with its parent's messages
            total += tokens[p.call]
            if leading:
                prefix, ends_on_reply = prefix + tokens[p.call], False
        else:
            assert isinstance(p, dict)
            out.append(p)
            leading = False
    return tuple(out), total, max(0, prefix - 1) if ends_on_reply else prefix
