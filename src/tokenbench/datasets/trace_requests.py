"""``--dataset trace``: a trace file's rows in a replay window -> Requests in trace order, and what
results.json says of the trace (``TraceFacts``: file hash, format, rows used, expected reuse).

A request's ``max_tokens`` is its row's output length (``--ignore-eos`` makes the server produce
all of it); its prompt is text built from the row's hash ids (trace_prompts.BlockPrompts), exact
in length with a tokenizer, else approximate (``exact_lengths`` False); or, for a server that
takes token ids on the completions API, exact token ids (trace_prompts.BlockIds). Each request carries its
row and trace time, which the load generator's replay turns into its send time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenbench.config import TraceFormat
from tokenbench.datasets.tokenizers import Tokenizer, token_ids_of
from tokenbench.datasets.trace_prompts import BlockIds, BlockPrompts, expected_reuse
from tokenbench.datasets.traces import Trace, TraceRow, read_trace
from tokenbench.errors import BadInput
from tokenbench.records import Request
from tokenbench.results import TraceFacts


@dataclass(frozen=True)
class TraceRequests:
    requests: list[Request]
    facts: TraceFacts
    exact_lengths: bool  # every prompt's token count is the row's input length (needs a tokenizer)


@dataclass(frozen=True)
class TraceSelection:
    """Which trace and which part of it: the file, how to read it, the window of trace time."""

    path: Path
    format: TraceFormat | None = None
    block_size: int | None = None
    model: str | None = None
    log_type: str | None = None
    start_s: float | None = None
    end_s: float | None = None


def _in_window(row: TraceRow, start_s: float | None, end_s: float | None) -> bool:
    # The same rule as load.replay_offsets: start <= t < end, in trace time.
    return (start_s is None or row.timestamp_s >= start_s) and (end_s is None or row.timestamp_s < end_s)


def trace_requests(
    sel: TraceSelection, tokenizer: Tokenizer | None, system: str | None, seed: int, token_ids: bool = False
) -> TraceRequests:
    """``token_ids``: the server takes a prompt as token ids (its profile says so, and the API is
    completions): with a tokenizer that gives ids, and no system prompt, prompts are exact ids."""
    trace = read_trace(sel.path, sel.format, sel.model, sel.log_type, sel.block_size)
    rows = [r for r in trace.rows if _in_window(r, sel.start_s, sel.end_s)]
    if not rows:
        raise BadInput(f"{sel.path}: no trace rows in the replay window [{sel.start_s}, {sel.end_s}) s")
    ids = token_ids_of(tokenizer) if token_ids and not system else None
    vocabulary = BlockIds.vocabulary(ids) if ids is not None else None
    if vocabulary is not None:
        return _id_requests(trace, rows, BlockIds(trace.block_size or 512, vocabulary, seed))
    # Formats without hash ids give every row text of its own: the block size is then unused.
    prompts = BlockPrompts(trace.block_size or 512, tokenizer, seed)
    requests, exact = [], tokenizer is not None
    for row in rows:
        prompt = prompts.prompt(row)
        exact = exact and prompt.exact
        n_prompt = prompt.num_tokens if prompt.num_tokens is not None else row.input_tokens
        messages = (
            None if not system else ({"role": "system", "content": system}, {"role": "user", "content": prompt.text})
        )
        requests.append(
            Request(
                prompt=None if messages else prompt.text,
                messages=messages,
                max_tokens=max(1, row.output_tokens),  # a 0-token reply cannot be asked for
                expected_prompt_tokens=n_prompt,
                trace_row=row.row,
                trace_time_s=row.timestamp_s,
            )
        )
    return TraceRequests(requests, _facts(trace, rows), exact)


def _id_requests(trace: Trace, rows: list[TraceRow], prompts: BlockIds) -> TraceRequests:
    """Token-id prompts: exactly each row's input length, so exact by construction."""
    requests = []
    for row in rows:
        prompt = prompts.prompt(row)
        requests.append(
            Request(
                prompt=prompt.text,
                prompt_token_ids=prompt.ids,
                max_tokens=max(1, row.output_tokens),
                expected_prompt_tokens=len(prompt.ids),
                trace_row=row.row,
                trace_time_s=row.timestamp_s,
            )
        )
    return TraceRequests(requests, _facts(trace, rows, token_ids=True), True)


def _facts(trace: Trace, rows: list[TraceRow], token_ids: bool = False) -> TraceFacts:
    reuse = None
    if trace.block_size is not None and any(r.hash_ids for r in rows):
        reuse = expected_reuse(rows, trace.block_size)
    return TraceFacts(
        format=trace.format,
        sha256=trace.sha256,
        num_rows=len(trace.rows),
        num_rows_used=len(rows),
        block_size=trace.block_size,
        num_failed_skipped=trace.num_failed_skipped,
        num_filtered_out=trace.num_filtered_out,
        expected_reuse=reuse,
        token_ids=token_ids,
    )
