"""What the workload was and what the prefix cache made of it: the dataset's facts (a trace, shared
prefixes, multi-turn sessions, each with the reuse an ideal prefix cache would find) and a point's
``prefix_cache`` (reset before it, hit rate measured over its window, the expected reuse)."""

from __future__ import annotations

from typing import Literal

from tokenbench.common.frozen import FrozenModel
from tokenbench.results.base import Number


class ExpectedReuse(FrozenModel):
    """What an infinite prefix cache would reuse over the rows replayed, in order (blocks are the
    trace's hash ids; datasets.trace_prompts.expected_reuse)."""

    num_blocks: int
    num_blocks_reused: int
    num_tokens: int
    num_tokens_reused: int
    token_fraction: Number | None
    block_fraction: Number | None


class TraceFacts(FrozenModel):
    """The trace replayed (``--dataset trace``): which file exactly, how it was read, what was sent.

    The file's digest and rows come from a pass on the side (never before the first send): None
    in a config.json written before it ended. What was sent (rows, the reader's and the context
    guard's counts, the expected reuse) is over the rows the run's longest point sent, in
    order; each point's own is its ``trace`` (TracePointFacts).
    """

    format: str
    sha256: str | None
    num_rows: int | None  # data rows in the file (the side pass; every row, whatever the window)
    num_rows_used: int  # rows sent (the longest point's): the window's, cut by --duration or --max-requests
    block_size: int | None  # tokens per hash id; None for formats without hash ids
    num_failed_skipped: int  # over the rows read (the window, up to where the replay stopped)
    num_filtered_out: int
    expected_reuse: ExpectedReuse | None  # over the rows sent; None for formats without hash ids
    # prompts were sent as exact token ids (a server that takes them, the completions API);
    # False: text built to the lengths (exact with a tokenizer)
    token_ids: bool = False
    # The clock the window and trace times are on: "trace" (the file's own timestamps, in s) or
    # "first_row" (a wall-clock trace, Azure: seconds from its first row, at time_origin, ISO 8601);
    # first_row_s: the first row's time on that clock (BurstGPT's files start at 5 s).
    clock: str | None = None
    first_row_s: Number | None = None
    time_origin: str | None = None
    # rows not sent, by why: over_context (the guard), no_prompt (a reply to an empty prompt)
    left_out: dict[str, int] | None = None
    num_truncated: int | None = None  # rows the guard cut to fit (--over-context truncate)
    num_images_not_sent: int | None = None  # rows asking images on an API that takes none
    max_model_len: int | None = None  # the context the guard held rows to; None: unknown, unguarded
    over_context: str | None = None  # the guard's choice: skip or truncate


class TracePointFacts(FrozenModel):
    """One replay point's use of the trace, up to where it stopped (results' per-point
    ``trace``): rows sent (by every worker), rows not sent by why, rows cut to fit, what the
    reader passed over, and the reuse an infinite prefix cache would find over the rows sent,
    in order (what the point's measured hit rate is compared with)."""

    num_rows_sent: int
    left_out: dict[str, int]
    num_truncated: int
    num_failed_skipped: int
    num_filtered_out: int
    num_images_not_sent: int
    expected_reuse: ExpectedReuse | None


class SharedPrefixFacts(FrozenModel):
    """Synthetic prompts in shared-prefix groups (``--prefix-groups``; datasets.shared_prefix)."""

    groups: int
    tokens: int  # each group's prefix, before every request's own --input-tokens
    skew: Number | None  # zipf exponent of the group choice; None: uniform
    expected_reuse: ExpectedReuse  # blocks are the groups' prefixes, in the order sent


class SessionFacts(FrozenModel):
    """Multi-turn conversations (``--multi-turn``, datasets.sessions); ``history_tokens``: how
    records' history_tokens were counted ("tokenizer": the run's, exact; "estimate": ~1.3 a word)."""

    conversations: int
    turns: int
    history_tokens: Literal["tokenizer", "estimate"]


class ProgramFacts(FrozenModel):
    """Agent programs (``--dataset programs``, datasets/programs/): the recorded sessions read,
    their calls, sub-agent calls, edges by what they wait on, how a child's prompt takes its
    parent's reply (live or recorded) and the factor on recorded waits; ``recorded_session_s``:
    the sessions' mean length had every call taken its recorded time (the recording's own critical
    path, waits scaled; None: the format records no call times)."""

    formats: list[str]
    programs: int
    calls: int
    subagent_calls: int
    edges: dict[str, int]
    output: Literal["live", "recorded"]
    time_scale: Number
    recorded_session_s: Number | None


class DatasetFacts(FrozenModel):
    """What the prompts were (datasets.build_requests makes it; config.json's dataset_info)."""

    name: str
    num_requests: int
    exact_lengths: bool
    tokenizer: str | None
    system_prompt: bool
    unique_prefix: bool
    source: str | None
    trace: TraceFacts | None = None
    shared_prefix: SharedPrefixFacts | None = None
    sessions: SessionFacts | None = None
    programs: ProgramFacts | None = None  # --dataset programs
    # --dataset sharegpt (single prompts): whose sampling drew them, tokenbench, vllm or sglang
    # (--sharegpt-sampling); absent for every other dataset and for --multi-turn's conversations
    sharegpt_sampling: str | None = None


HitRateSource = Literal["server_counters", "llamacpp_timings", "usage_cached_tokens"]


class PrefixCache(FrozenModel):
    """The prefix cache over a point (METRICS.md "Prefix cache"): whether it was emptied before the
    point, the hit rate measured over the window, and what the workload would reuse."""

    # before the point: "done" (the engine's control emptied it), "failed", "not_supported"
    # (no control), "not_requested" (--prefix-cache keep)
    reset: Literal["done", "not_supported", "failed", "not_requested"]
    reset_detail: str | None = None  # why a reset was not done (the server's answer)
    # prompt tokens served from the cache / prompt tokens, over the window; None: no signal
    hit_rate: Number | None
    # server_counters: the server's hit/query counter increases over the window (vLLM
    # prefix_cache_hits/queries, SGLang cached/prompt tokens; point.server); usage_cached_tokens:
    # sum usage.prompt_tokens_details.cached_tokens / sum usage.prompt_tokens over the window's ok
    # records; llamacpp_timings: sum timings.cache_n / sum (cache_n + prompt_n) over them
    hit_rate_source: HitRateSource | None
    hit_rate_requests: int | None = None  # records the per-request sources counted (None: counters)
    # the fraction of prompt tokens an infinite cache would reuse over the workload (a trace's hash
    # ids: dataset.trace.expected_reuse.token_fraction); None: the workload does not say
    expected_reuse: Number | None
