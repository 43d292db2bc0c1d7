"""Text prompts from a trace's prefix-block hashes (``BlockPrompts``: the same id always gives the
same block text, exact lengths through a tokenizer where one is given) and the prefix reuse the
workload promises (``expected_reuse``: what an infinite prefix cache would find)."""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from tokenbench.datasets.synthetic import prompt_words  # the same short, one-token words as synthetic prompts
from tokenbench.datasets.tokenizers import TokenIds, Tokenizer
from tokenbench.datasets.traces import TraceRow, num_blocks
from tokenbench.errors import BadInput
from tokenbench.results import ExpectedReuse

# --- prompts from hash ids ----------------------------------------------------------------------

# Whole prompts of several blocks counted before their blocks' sum is trusted (BlockPrompts.prompt).
JOINS_CHECKED = 16

# Every block starts with a newline: BPE pre-tokenizers (GPT-2's and Llama 3's patterns) split on
# it, so no token spans two blocks and a block tokenizes the same whatever comes before it. AIPerf
# gets the same effect by making a block's first token BOS/EOS; text keeps us API-neutral.
BLOCK_SEPARATOR = "\n"

# Blocks kept drawn (a trace reuses most of them, mostly the recent ones): a bounded memo, so a
# replay's memory does not grow with the trace. A block drawn again is the same (seeded by its
# id), so an evicted block costs its draw again, never a different prompt. 8192 blocks of 512
# tokens are ~25 MB of text.
MEMO_BLOCKS = 8192

K = TypeVar("K")
V = TypeVar("V")


class Memo(Generic[K, V]):
    """A least-recently-used memo of at most ``size`` entries."""

    def __init__(self, size: int = MEMO_BLOCKS) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self._size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True)
class TracePrompt:
    row: int  # the TraceRow it is for
    text: str
    num_tokens: int | None  # the tokenizer's count of ``text``; None without a tokenizer
    exact: bool  # num_tokens == the row's input_tokens (False whenever there is no tokenizer)


class BlockPrompts:
    """Text for trace rows: hash id ``h`` becomes a block of ``block_size`` tokens whose words are
    drawn from a generator seeded by ``h`` (and ``seed``), never by its position, so the same id
    gives the same text in every row and different ids give different text (siblings after a
    shared parent included). A row's last block is partial: ``input_tokens - (n-1)*block_size``
    tokens, the first words of that id's full block. A row without hash ids gets text of its own,
    seeded by its row number. (A block of one token, where the tokenizer counts the separator as
    one, is the separator alone: the same for every id. Engines cache whole blocks of 16+ tokens,
    so such a tail never makes a hit.)

    With a tokenizer each block is fitted to its exact token count (and the whole prompt checked);
    without one a word stands for a token and the separator for one more: approximate, and said so.
    Blocks are memoized per (id, size), the most recent ``MEMO_BLOCKS``: a trace reuses most.
    """

    def __init__(self, block_size: int, tokenizer: Tokenizer | None, seed: int = 0) -> None:
        if block_size <= 0:
            raise BadInput(f"block size must be a positive number of tokens (got {block_size})")
        self.block_size = block_size
        self._tokenizer = tokenizer
        self._seed = seed
        self._words = prompt_words(tokenizer)
        self._separator_tokens = 1 if tokenizer is None else tokenizer.count(BLOCK_SEPARATOR)
        self._joins_held = 0  # whole prompts whose count was their blocks' sum, so far
        self._blocks: Memo[tuple[str, int], tuple[str, bool]] = Memo()

    def block(self, hash_id: int, num_tokens: int) -> str:
        return self._fitted(f"block:{hash_id}", num_tokens)[0]

    def keyed(self, key: str, num_tokens: int) -> str:
        """A block's text by any key (a scoped hash id: an agent program's), as ``block`` draws it."""
        return self._fitted(f"block:{key}", num_tokens)[0]

    def prompt(self, row: TraceRow) -> TracePrompt:
        if not row.hash_ids:
            text, exact = self._fitted(f"row:{row.row}", row.input_tokens)
        else:
            sizes = block_sizes(row.input_tokens, len(row.hash_ids), self.block_size, row.row)
            parts = [self._fitted(f"block:{h}", n) for h, n in zip(row.hash_ids, sizes)]
            text, exact = "".join(p[0] for p in parts), all(p[1] for p in parts)
        if self._tokenizer is None:
            return TracePrompt(row.row, text, None, False)
        # Blocks fitted one by one add up only if nothing merges across the separator: a property
        # of the tokenizer, so checked on whole prompts until JOINS_CHECKED of them added up (a
        # whole Mooncake prompt is ~12k tokens: its count was most of a row's build time).
        if exact and (not row.hash_ids or self._joins_held >= JOINS_CHECKED):
            return TracePrompt(row.row, text, row.input_tokens, True)
        count = self._tokenizer.count(text)
        if exact and len(row.hash_ids) > 1:
            self._joins_held = self._joins_held + 1 if count == row.input_tokens else -(10**9)  # never trusted
        return TracePrompt(row.row, text, count, count == row.input_tokens)

    def _draw(self, key: str, num_words: int) -> str:
        # A string seed is hashed by SHA-512 (random.seed, version 2): independent of
        # PYTHONHASHSEED (vLLM's hash(f"{h}:{size}") is not). Fresh each time: n words drawn are
        # the first n of any longer draw, so a partial block is a prefix of the full one.
        rng = random.Random(f"tokenbench:{self._seed}:{key}")
        # choices draws word i from the i-th random(): still a prefix of any longer draw, and ~5x
        # faster than a choice per word (a Mooncake row's new blocks are ~8k words)
        return BLOCK_SEPARATOR + " ".join(rng.choices(self._words, k=num_words))

    def _fitted(self, key: str, num_tokens: int) -> tuple[str, bool]:
        """The block's text and whether the tokenizer counts exactly ``num_tokens`` in it."""
        if num_tokens == 0:
            return "", True
        memo = self._blocks.get((key, num_tokens))
        if memo is not None:
            return memo
        n = max(0, num_tokens - self._separator_tokens)
        text, exact = self._draw(key, n), False
        if self._tokenizer is not None:
            for _ in range(8):  # as synthetic prompts: a word is about a token; a round or two
                got = self._tokenizer.count(text)
                if got == num_tokens:
                    exact = True
                    break
                n = max(0, n + num_tokens - got)
                text = self._draw(key, n)
        self._blocks.put((key, num_tokens), (text, exact))
        return text, exact


# --- token-id prompts ---------------------------------------------------------------------------

# Fewer distinct ids than this and sibling blocks could repeat: the prompts stay text.
MIN_VOCABULARY = 16


@dataclass(frozen=True)
class TraceIdPrompt:
    row: int
    ids: tuple[int, ...]  # exactly the row's input_tokens
    text: str  # the same words as text (what the request shows where ids are not sent)


class BlockIds:
    """Exact token ids for trace rows, for servers that take a prompt as ids (vLLM, SGLang): hash
    id ``h`` becomes ``block_size`` ids drawn from a generator seeded by ``h`` (and ``seed``), so
    the same id gives the same ids in every row, different ids (siblings after a shared parent
    included) differ, and a partial last block is the first ids of that id's full block. With
    ids there is nothing to merge across blocks: no separator, and the prompt is exactly
    ``input_tokens`` ids, so the server's block hashes fall where the trace's do.

    The vocabulary is the server's (or --tokenizer's) ids of the prompt words that are one token
    with a leading space: ordinary text tokens, never special ones. ``vocabulary`` gives it, or
    None when the tokenizer yields too few distinct ids (then prompts stay text)."""

    def __init__(self, block_size: int, vocabulary: list[tuple[int, str]], seed: int = 0) -> None:
        if block_size <= 0:
            raise BadInput(f"block size must be a positive number of tokens (got {block_size})")
        if not 0 < len(vocabulary) <= 256:
            raise BadInput(f"a vocabulary of 1..256 ids is drawn from (got {len(vocabulary)})")
        self.block_size = block_size
        self._vocabulary = vocabulary
        self._seed = seed
        # per key, the longest draw so far as indices into the vocabulary, a byte each (a trace
        # reuses most blocks; a partial block is a prefix of its full one), the most recent
        self._blocks: Memo[str, bytes] = Memo()

    @staticmethod
    def vocabulary(tokenizer: TokenIds) -> list[tuple[int, str]] | None:
        words: dict[int, str] = {}
        for word in prompt_words(tokenizer):
            ids = tokenizer.ids(" " + word)
            if len(ids) == 1:
                words.setdefault(ids[0], word)
        return sorted(words.items())[:256] if len(words) >= MIN_VOCABULARY else None

    def _draw(self, key: str, num_tokens: int) -> list[tuple[int, str]]:
        drawn = self._blocks.get(key) or b""
        if len(drawn) < num_tokens:
            rng = random.Random(f"tokenbench:{self._seed}:{key}")  # as BlockPrompts: PYTHONHASHSEED-free
            drawn = bytes(rng.randrange(len(self._vocabulary)) for _ in range(num_tokens))
            self._blocks.put(key, drawn)
        return [self._vocabulary[i] for i in drawn[:num_tokens]]

    def prompt(self, row: TraceRow) -> TraceIdPrompt:
        if not row.hash_ids:
            drawn = self._draw(f"row:{row.row}", row.input_tokens)
        else:
            sizes = block_sizes(row.input_tokens, len(row.hash_ids), self.block_size, row.row)
            drawn = [t for h, n in zip(row.hash_ids, sizes) for t in self._draw(f"block:{h}", n)]
        return TraceIdPrompt(row.row, tuple(i for i, _ in drawn), " ".join(w for _, w in drawn))


def block_sizes(input_tokens: int, num_hash_ids: int, block_size: int, row: int = 0) -> list[int]:
    """Tokens per block: full blocks, then the partial last one (``input - (n-1)*block_size``)."""
    if num_hash_ids != num_blocks(input_tokens, block_size):
        raise BadInput(
            f"row {row}: {num_hash_ids} hash_ids for input_length {input_tokens} in {block_size}-token blocks"
        )
    if num_hash_ids == 0:
        return []
    return [block_size] * (num_hash_ids - 1) + [input_tokens - (num_hash_ids - 1) * block_size]


def block_prompts(
    rows: Iterable[TraceRow], block_size: int, tokenizer: Tokenizer | None, seed: int = 0
) -> list[TracePrompt]:
    prompts = BlockPrompts(block_size, tokenizer, seed)
    return [prompts.prompt(row) for row in rows]


# --- the workload's expected reuse --------------------------------------------------------------


class PrefixTally:
    """What an infinite prefix cache would reuse, row by row in the order rows are sent: ``add``
    gives a row's reused tokens and counts it. A block counts as reused when its id was seen in
    an earlier row and every block before it in this row was too: a prefix cache reuses a
    prefix, nothing after the first miss (with rolling hashes, as Mooncake's, an id seen implies
    its prefix seen, so this is "id seen before"). Rows without hash ids count their tokens as
    new (their text is unique) and no blocks. The ids seen are all it keeps."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self._seen: set[int] = set()
        self.blocks = self.blocks_reused = self.tokens = self.tokens_reused = 0

    def add(self, row: TraceRow) -> int:
        self.tokens += row.input_tokens
        if not row.hash_ids:
            return 0
        sizes = block_sizes(row.input_tokens, len(row.hash_ids), self.block_size, row.row)
        self.blocks += len(sizes)
        reused = 0
        for h, size in zip(row.hash_ids, sizes):
            if h not in self._seen:
                break
            self.blocks_reused += 1
            reused += size
        self.tokens_reused += reused
        self._seen.update(row.hash_ids)
        return reused

    def facts(self) -> ExpectedReuse:
        return ExpectedReuse(
            num_blocks=self.blocks,
            num_blocks_reused=self.blocks_reused,
            num_tokens=self.tokens,
            num_tokens_reused=self.tokens_reused,
            block_fraction=self.blocks_reused / self.blocks if self.blocks else None,
            token_fraction=self.tokens_reused / self.tokens if self.tokens else None,
        )


def expected_reuse(rows: Iterable[TraceRow], block_size: int) -> ExpectedReuse:
    """What an infinite prefix cache would reuse over ``rows`` in the order they are sent (pass
    only the rows sent), in blocks and in tokens (PrefixTally)."""
    tally = PrefixTally(block_size)
    for row in rows:
        tally.add(row)
    return tally.facts()
