"""Synthetic prompts of an exact token length (given a tokenizer) from common English words."""

from __future__ import annotations

import random

from tokenbench.datasets.tokenizers import Tokenizer

# Short, common words: nearly all are one token (with a leading space) in BPE vocabularies, so a
# prompt of N words is close to N tokens before the exact adjustment below.
_WORDS = (
    "the of and to in is was it for on as with by at from his her that this which or an be are "
    "not but have had has were they you we he she all one two new time year day way man world "
    "life work part place case point group number fact hand eye week home water room mother "
    "area money story month lot right study book word issue side kind head house service friend "
    "father power hour game line end member law car city name team minute idea body back parent "
    "face others level office door health person art war history party result change morning "
    "reason research girl guy moment air teacher force education light sound river tree stone "
    "road music plan table paper food land field bird fish song rain snow wind fire star sea"
).split()


def prompt_words(tokenizer: Tokenizer | None) -> list[str]:
    """The words prompts are drawn from: with a tokenizer, those it counts as one token (with a
    leading space), so a prompt of N words is N tokens before any adjustment."""
    if tokenizer is None:
        return list(_WORDS)
    return [w for w in _WORDS if tokenizer.count(" " + w) == 1] or list(_WORDS)


def synthetic_prompts(num: int, input_tokens: int, tokenizer: Tokenizer | None, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = prompt_words(tokenizer)
    return [_one(rng, words, input_tokens, tokenizer) for _ in range(num)]


def _one(rng: random.Random, words: list[str], n: int, tokenizer: Tokenizer | None) -> str:
    chosen = [rng.choice(words) for _ in range(n)]
    if tokenizer is None:
        return " ".join(chosen)
    # Adjust to the exact count: drop or add words until the tokenizer agrees (a couple of rounds).
    for _ in range(8):
        text = " ".join(chosen)
        got = tokenizer.count(text)
        if got == n:
            return text
        if got > n:
            del chosen[max(1, len(chosen) - (got - n)) :]
        else:
            chosen.extend(rng.choice(words) for _ in range(n - got))
    return " ".join(chosen)
