"""Synthetic prompts in shared-prefix groups (``--prefix-groups G --prefix-tokens P``).

G distinct prefixes of P tokens; each request takes one group's prefix, then its own suffix of
``--input-tokens`` N tokens: a prompt is P + N tokens, the prefix *extra* to --input-tokens, as
vLLM bench's ``--random-prefix-len`` and ``prefix_repetition`` (prefix + suffix lengths) count it.
The group of each request is drawn by the seed: uniformly, or with ``--prefix-skew S`` by a Zipf
law (group k, from 0, with weight 1 / (k + 1)^S: group 0 the most used).

Text: the same short one-token words as synthetic prompts (``synthetic.prompt_words``). A prefix
starts with a word of its own (G distinct words, each one token with its leading space), so two
prefixes differ from their first token and a prefix cache can share nothing between groups; the
suffix starts with a newline, which BPE pre-tokenizers split on, so no token spans the prefix and
the suffix. With a tokenizer each part is fitted to its exact count and the whole prompt checked;
without one a word stands for a token: approximate, and said so (``exact_lengths``).

Expected reuse (``dataset.shared_prefix.expected_reuse``): what an infinite prefix cache would
reuse over the requests, in the order they are sent: a request reuses its P prefix tokens when its
group was used before (each group's first use is a miss) and never its suffix. Over one pass of
the list it does not depend on where a point starts in it (misses = groups used). Blocks are the
prefixes: one per request, reused or not. A system prompt (shared too) is not counted.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tokenbench.datasets.synthetic import prompt_words
from tokenbench.datasets.tokenizers import Tokenizer
from tokenbench.errors import BadInput
from tokenbench.results import ExpectedReuse, SharedPrefixFacts

SUFFIX_SEPARATOR = "\n"


@dataclass(frozen=True)
class SharedPrefixPrompt:
    group: int
    text: str
    exact: bool  # the tokenizer counts prefix + suffix tokens in ``text`` (False without one)


def assign_groups(num: int, groups: int, skew: float | None, seed: int) -> list[int]:
    """Each request's group, by the seed: uniform, or Zipf with exponent ``skew``."""
    rng = random.Random(f"tokenbench:prefix-groups:{seed}")
    if skew is None:
        return [rng.randrange(groups) for _ in range(num)]
    weights = [1.0 / (k + 1) ** skew for k in range(groups)]
    return rng.choices(range(groups), weights=weights, k=num)


class _Fitter:
    """Text of an exact token count: a fixed head, then words drawn by a key (the first n of any
    longer draw), fitted in a few rounds through the tokenizer."""

    def __init__(self, tokenizer: Tokenizer | None, seed: int) -> None:
        self._tokenizer = tokenizer
        self._seed = seed
        self.words = prompt_words(tokenizer)

    def fit(self, head: str, key: str, num_tokens: int, joiner: str = "") -> tuple[str, bool]:
        def text(n: int) -> str:
            rng = random.Random(f"tokenbench:{self._seed}:{key}")
            return head + (joiner + " ".join(rng.choice(self.words) for _ in range(n)) if n else "")

        head_tokens = 1 if head else 0  # a one-token word, or the separator (about one token)
        n = max(0, num_tokens - head_tokens)
        if self._tokenizer is None:
            return text(n), False
        for _ in range(8):
            got = self._tokenizer.count(text(n))
            if got == num_tokens:
                return text(n), True
            n = max(0, n + num_tokens - got)
        return text(n), False


@dataclass(frozen=True)
class SharedPrefixSpec:
    """The flags: G groups of P-token prefixes, each request's own N-token suffix, the skew."""

    groups: int
    prefix_tokens: int
    input_tokens: int
    skew: float | None = None


def shared_prefix_prompts(
    num: int, spec: SharedPrefixSpec, tokenizer: Tokenizer | None, seed: int
) -> list[SharedPrefixPrompt]:
    """``num`` prompts: a group's prefix, then a suffix of their own. Raises when there are fewer
    distinct one-token words than groups."""
    fitter = _Fitter(tokenizer, seed)
    if spec.groups > len(fitter.words):
        raise BadInput(
            f"--prefix-groups {spec.groups}: at most {len(fitter.words)} groups (each prefix starts with "
            "a one-token word of its own, so prefixes differ from their first token)"
        )
    firsts = random.Random(f"tokenbench:prefix-first:{seed}").sample(fitter.words, spec.groups)
    prefixes = [fitter.fit(" " + firsts[g], f"prefix:{g}", spec.prefix_tokens, " ") for g in range(spec.groups)]
    out = []
    for i, g in enumerate(assign_groups(num, spec.groups, spec.skew, seed)):
        prefix, prefix_exact = prefixes[g]
        suffix, suffix_exact = fitter.fit(SUFFIX_SEPARATOR, f"suffix:{i}", spec.input_tokens)
        text = prefix + suffix
        exact = prefix_exact and suffix_exact
        if tokenizer is not None and exact:  # parts fitted alone add up only if nothing merges
            exact = tokenizer.count(text) == spec.prefix_tokens + spec.input_tokens
        out.append(SharedPrefixPrompt(g, text, exact))
    return out


def shared_prefix_facts(spec: SharedPrefixSpec, prompts: list[SharedPrefixPrompt]) -> SharedPrefixFacts:
    """results.json's ``dataset.shared_prefix`` for these prompts, in the order they are sent."""
    reuse = expected_reuse([p.group for p in prompts], spec.prefix_tokens, spec.input_tokens)
    return SharedPrefixFacts(groups=spec.groups, tokens=spec.prefix_tokens, skew=spec.skew, expected_reuse=reuse)


def expected_reuse(groups: list[int], prefix_tokens: int, input_tokens: int) -> ExpectedReuse:
    """What an infinite prefix cache would reuse over requests of these groups, in this order."""
    seen: set[int] = set()
    reused = 0
    for g in groups:
        reused += g in seen
        seen.add(g)
    n = len(groups)
    tokens = n * (prefix_tokens + input_tokens)
    return ExpectedReuse(
        num_blocks=n,
        num_blocks_reused=reused,
        num_tokens=tokens,
        num_tokens_reused=reused * prefix_tokens,
        token_fraction=reused * prefix_tokens / tokens if tokens else None,
        block_fraction=reused / n if n else None,
    )
