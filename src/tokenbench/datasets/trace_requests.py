"""``--dataset trace``: a trace file's rows in a replay window -> Requests, one at a time as the
replay reaches them, and what results.json says of the trace (``TraceFacts``).

A request's ``max_tokens`` is its row's output length (``--ignore-eos`` makes the server produce
all of it); its prompt is text built from the row's hash ids (trace_prompts.BlockPrompts), exact
in length with a tokenizer, else approximate; or, for a server that takes token ids on the
completions API, exact token ids (trace_prompts.BlockIds). A row asking images (Azure's
NumImages) carries that many seeded synthetic images (chat). Each request carries its row and
trace time, which the load generator's replay turns into its send time.

Nothing is built ahead of the replay: ``TracePlan`` is the recipe (it pickles to a worker),
``TraceRequests`` the opened trace that turns rows into requests as they are asked for, and the
context guard (``ContextGuard``) leaves out (or truncates) the rows that could not fit the
server's context, counting each by why (``TraceTally``), so no row is sent only to fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

from tokenbench.datasets.images import image_set
from tokenbench.datasets.tokenizers import Tokenizer, token_ids_of
from tokenbench.datasets.trace_prompts import BlockIds, BlockPrompts, PrefixTally
from tokenbench.datasets.traces import (
    TraceCounts,
    TraceDigest,
    TraceReader,
    TraceRow,
    TraceSelection,
    digest_of,
    num_blocks,
)
from tokenbench.records import Request
from tokenbench.results import ExpectedReuse, TraceFacts, TracePointFacts

__all__ = ["ContextGuard", "TracePlan", "TraceRequests", "TraceSelection", "TraceTally"]

OverContext = Literal["skip", "truncate"]

# What a chat template adds to a prompt, at most, for the models tokenbench meets (SmolLM2's is 9
# tokens for one user turn, Llama 3's 13 with a system turn): room the guard keeps on the chat API.
CHAT_TEMPLATE_TOKENS = 32


@dataclass(frozen=True)
class ContextGuard:
    """Rows whose prompt plus reply cannot fit the server's context (``max_len`` tokens, from
    the server's ``/v1/models`` or ``--max-model-len``; None: unknown, every row goes): left out
    (``skip``) or their prompt cut to fit (``truncate``: the first blocks kept, so the prefix
    structure up to there stays), never sent to fail. ``template_tokens``: room kept for a chat
    template (the chat API), since the row's input length is the prompt's alone."""

    max_len: int | None = None
    over: OverContext = "skip"
    template_tokens: int = 0

    def fit(self, row: TraceRow, block_size: int | None) -> tuple[TraceRow | None, str | None]:
        """The row to send (maybe cut) and what the guard did: None, "truncated" or "over_context"."""
        if self.max_len is None:
            return row, None
        room = self.max_len - self.template_tokens
        out = max(1, row.output_tokens)
        if row.input_tokens + out <= room:
            return row, None
        keep = room - out
        if self.over == "skip" or keep < 1:
            return None, "over_context"
        hashes = row.hash_ids[: num_blocks(keep, block_size)] if row.hash_ids and block_size else ()
        return replace(row, input_tokens=keep, hash_ids=hashes), "truncated"


@dataclass(frozen=True)
class TracePlan:
    """How a trace becomes requests: which rows, the system prompt, the seed, whether prompts go
    as token ids, the context guard, whether images may be sent (the chat API) and their style.
    A plain dataclass: it pickles to a worker, which opens the trace itself."""

    selection: TraceSelection
    system: str | None = None
    seed: int = 0
    token_ids: bool = False
    guard: ContextGuard = ContextGuard()
    images: bool = False  # the chat API: a row's NumImages go as images; else they are counted, not sent
    image_size: str = "512x512"
    image_format: Literal["png", "jpeg"] = "png"
    # pooling APIs (--api embeddings, rerank, score): (api, --batch-size): a row's request holds its
    # text and the next rows' (datasets.pooling), at the row's time
    pooling: tuple[str, int] | None = None


@dataclass
class TraceTally:
    """What one point's replay did with the trace's rows, in its window, up to where it stopped
    (results' per-point ``trace``): rows it issued, those the context guard left out or cut,
    what the reader passed over (TraceCounts), rows whose images were not sent (not the chat
    API), and the prefix reuse an infinite cache would find over the rows issued, in order."""

    issued: int = 0
    over_context: int = 0
    truncated: int = 0
    images_not_sent: int = 0
    read: TraceCounts = field(default_factory=TraceCounts)
    reuse: PrefixTally | None = None

    def expected_reuse(self) -> ExpectedReuse | None:
        return self.reuse.facts() if self.reuse is not None and self.reuse.blocks else None

    def facts(self) -> TracePointFacts:
        return TracePointFacts(
            num_rows_sent=self.issued,
            left_out={"over_context": self.over_context, "no_prompt": self.read.no_prompt},
            num_truncated=self.truncated,
            num_failed_skipped=self.read.failed,
            num_filtered_out=self.read.filtered,
            num_images_not_sent=self.images_not_sent,
            expected_reuse=self.expected_reuse(),
        )


class TraceRequests:
    """An opened trace: ``rows`` (the window's, through the guard, counted in a tally) and
    ``request`` (one row's Request, built when asked). The prompt builder and its memo of drawn
    blocks last as long as this object (every point of a run reuses them)."""

    def __init__(self, plan: TracePlan, tokenizer: Tokenizer | None) -> None:
        self.plan = plan
        self.reader = TraceReader(plan.selection)
        self.block_size = self.reader.block_size
        ids = token_ids_of(tokenizer) if plan.token_ids and not plan.system else None
        vocabulary = BlockIds.vocabulary(ids) if ids is not None else None
        self._ids = BlockIds(self.block_size or 512, vocabulary, plan.seed) if vocabulary is not None else None
        # Formats without hash ids give every row text of its own: the block size is then unused.
        self._text = BlockPrompts(self.block_size or 512, tokenizer, plan.seed) if self._ids is None else None
        self.exact_lengths = self._ids is not None or tokenizer is not None

    @property
    def token_ids(self) -> bool:
        return self._ids is not None

    def new_tally(self) -> TraceTally:
        # a format without hash ids has no block size; rows without them count no blocks (no figure)
        return TraceTally(reuse=PrefixTally(self.block_size) if self.block_size is not None else None)

    def rows(self, tally: TraceTally, start_s: float | None = None, end_s: float | None = None) -> Iterator[TraceRow]:
        """The window's rows (``start_s <= t < end_s`` on the trace's clock), in trace order, read
        as they are asked for; the guard's left-out rows counted in ``tally``, not yielded."""
        guard, block_size = self.plan.guard, self.block_size
        for row in self.reader.rows(start_s, end_s, tally.read):
            fitted, what = guard.fit(row, block_size)
            if fitted is None:
                tally.over_context += 1
                continue
            if what is not None:
                tally.truncated += 1
            yield fitted

    def issue(self, tally: TraceTally, row: TraceRow) -> None:
        """``row`` goes out (by this process or another worker): counted, its blocks seen."""
        tally.issued += 1
        if tally.reuse is not None:
            tally.reuse.add(row)
        if row.num_images and not self.plan.images:
            tally.images_not_sent += 1

    def request(self, row: TraceRow) -> Request:
        """The row's request: its prompt built now (the blocks drawn before are memoized)."""
        plan = self.plan
        max_tokens = max(1, row.output_tokens)  # a 0-token reply cannot be asked for
        if self._ids is not None:  # the completions API: never images
            ids = self._ids.prompt(row)
            return Request(
                prompt=ids.text,
                prompt_token_ids=ids.ids,
                max_tokens=max_tokens,
                expected_prompt_tokens=len(ids.ids),
                trace_row=row.row,
                trace_time_s=row.timestamp_s,
            )
        assert self._text is not None
        images: tuple[str, ...] = ()
        pixels: int | None = None
        if row.num_images and plan.images:
            images, pixels = image_set(row.num_images, plan.image_size, plan.image_format, (plan.seed, row.row))
        prompt = self._text.prompt(row)
        n_prompt = prompt.num_tokens if prompt.num_tokens is not None else row.input_tokens
        system = plan.system
        messages = (
            None if not system else ({"role": "system", "content": system}, {"role": "user", "content": prompt.text})
        )
        return Request(
            prompt=None if messages else prompt.text,
            messages=messages,
            max_tokens=max_tokens,
            expected_prompt_tokens=n_prompt,
            trace_row=row.row,
            trace_time_s=row.timestamp_s,
            images=images,
            image_pixels=pixels,
        )

    def digest(self) -> TraceDigest:
        return digest_of(self.reader)

    def facts(self, digest: tuple[str, int] | None, sent: TracePointFacts | None = None) -> TraceFacts:
        """results.json's ``dataset.trace``: the file (its digest and rows once the side pass
        ended), how it was read, and, once a point ran, what it sent (the longest point's)."""
        reader = self.reader
        return TraceFacts(
            format=reader.format,
            sha256=digest[0] if digest is not None else None,
            num_rows=digest[1] if digest is not None else None,
            num_rows_used=sent.num_rows_sent if sent is not None else 0,
            block_size=self.block_size,
            num_failed_skipped=sent.num_failed_skipped if sent is not None else 0,
            num_filtered_out=sent.num_filtered_out if sent is not None else 0,
            expected_reuse=sent.expected_reuse if sent is not None else None,
            token_ids=self.token_ids,
            clock=reader.clock.kind,
            first_row_s=reader.clock.first_row_s,
            time_origin=reader.clock.origin,
            left_out=sent.left_out if sent is not None else None,
            num_truncated=sent.num_truncated if sent is not None else None,
            num_images_not_sent=sent.num_images_not_sent if sent is not None else None,
            max_model_len=self.plan.guard.max_len,
            over_context=self.plan.guard.over,
        )


def trace_line(facts: TraceFacts) -> str | None:
    """The console's word on what a replay did not send as the trace has it (None: everything)."""
    left = facts.left_out or {}
    parts = []
    if left.get("over_context"):
        parts.append(f"{left['over_context']} left out: prompt + reply over the {facts.max_model_len}-token context")
    if facts.num_truncated:
        parts.append(f"{facts.num_truncated} cut to fit the {facts.max_model_len}-token context")
    if left.get("no_prompt"):
        parts.append(f"{left['no_prompt']} left out: a reply to an empty prompt")
    if facts.num_images_not_sent:
        parts.append(f"{facts.num_images_not_sent} sent without their images (images go on --api chat)")
    if not parts:
        return None
    return f"trace: {facts.num_rows_used} rows sent; " + "; ".join(parts)
