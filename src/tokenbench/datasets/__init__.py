"""Datasets -> a list of Requests. One function per source; ``build_requests`` picks by name. A trace
is replayed row by row instead (``trace_plan``; loadgen.source.TraceSource).

Lengths: with a tokenizer, prompt lengths are exact and reply lengths are counted; without one they
are estimated (about 1.3 tokens per word) and ``DatasetInfo.exact_lengths`` says so.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypedDict

from tokenbench.config import CONVERSATION_APIS, SYNTHETIC_OUTPUT_TOKENS, DatasetConfig, DatasetName, ShareGPTSampling
from tokenbench.datasets import dolly, jsonl, shared_prefix, sharegpt
from tokenbench.datasets.graders import grader
from tokenbench.datasets.images import with_synthetic_images
from tokenbench.datasets.synthetic import synthetic_prompts
from tokenbench.datasets.tokenizers import Tokenizer, special_tokens_of
from tokenbench.datasets.trace_requests import ContextGuard, TracePlan, TraceRequests, TraceSelection
from tokenbench.errors import BadInput
from tokenbench.records import Request
from tokenbench.results import DatasetFacts, SharedPrefixFacts, TraceFacts

DatasetInfo = DatasetFacts  # what results.json says of the dataset (run_facts imports it from here)


def _estimate(text: str) -> int:
    return max(1, round(len(text.split()) * 1.3))


def read_system_prompt(value: str | None) -> str | None:
    """``TEXT`` or ``@FILE``."""
    if value is None or not value.startswith("@"):
        return value
    path = Path(value[1:])
    if not path.is_file():
        raise FileNotFoundError(f"--system-prompt @{path}: no such file")
    return path.read_text(encoding="utf-8")


def check_path(cfg: DatasetConfig) -> None:
    """--dataset-path names a file that is there (agent programs: or a directory of them; and
    --system-prompt @FILE): checked before the run directory is made or any request sent; a
    BadInput naming the flag otherwise."""
    path = cfg.path
    if path is not None:
        if path.is_dir() and cfg.name != "programs":  # agent programs read every file of a directory
            raise BadInput(f"--dataset-path {path} is a directory: give the dataset file inside it")
        if not path.exists():
            raise BadInput(f"--dataset-path {path}: no such file; check the path")
    read_system_prompt(cfg.system_prompt)
    if cfg.grader is not None:
        if cfg.name != "jsonl":
            raise BadInput(f"--grader grades --dataset jsonl rows with an answer; --dataset {cfg.name} has none")
        grader(cfg.grader)


def _read_error(cfg: DatasetConfig, exc: Exception) -> BadInput:
    """A dataset file that could not be read as one: one line naming --dataset-path."""
    if isinstance(exc, OSError):
        return BadInput(f"--dataset-path {cfg.path}: {exc.strerror or exc}")
    if isinstance(exc, UnicodeDecodeError):
        return BadInput(f"--dataset-path {cfg.path}: not UTF-8 text ({exc.reason} at byte {exc.start})")
    text = str(exc)
    return BadInput(
        f"--dataset-path {text}" if text.startswith(str(cfg.path)) else f"--dataset-path {cfg.path}: {text}"
    )


def _make(prompt: str, system: str | None, max_tokens: int | None, prompt_tokens: int | None) -> Request:
    if system:
        messages = ({"role": "system", "content": system}, {"role": "user", "content": prompt})
        return Request(messages=messages, max_tokens=max_tokens, expected_prompt_tokens=prompt_tokens)
    return Request(prompt=prompt, max_tokens=max_tokens, expected_prompt_tokens=prompt_tokens)


def _in_range(n: int, cfg: DatasetConfig) -> bool:
    return (cfg.min_prompt_tokens is None or n >= cfg.min_prompt_tokens) and (
        cfg.max_prompt_tokens is None or n <= cfg.max_prompt_tokens
    )


@dataclass(frozen=True)
class Source:
    """What a dataset source gets: the settings, a token counter (exact with a tokenizer), the
    system prompt's text and the seed."""

    cfg: DatasetConfig
    count: Callable[[str], int]
    system: str | None
    seed: int


@dataclass(frozen=True)
class Built:
    """A source's requests, where they came from, and what else results.json says of them."""

    requests: list[Request]
    source: str | None
    exact_lengths: bool | None = None  # None: exact exactly when there is a tokenizer
    shared_prefix: SharedPrefixFacts | None = None
    sharegpt_sampling: ShareGPTSampling | None = None  # --dataset sharegpt: whose draw it was


def _synthetic(src: Source, tokenizer: Tokenizer | None) -> Built:
    cfg = src.cfg
    out = cfg.output_tokens or SYNTHETIC_OUTPUT_TOKENS
    if cfg.prefix_groups is not None and cfg.prefix_tokens is not None:
        return _shared_prefix(src, tokenizer, out, cfg.prefix_groups, cfg.prefix_tokens)
    texts = synthetic_prompts(cfg.num_prompts, cfg.input_tokens, tokenizer, src.seed)
    return Built([_make(text, src.system, out, cfg.input_tokens) for text in texts], None)


def _shared_prefix(src: Source, tokenizer: Tokenizer | None, out: int, groups: int, tokens: int) -> Built:
    """Synthetic prompts in shared-prefix groups: each is ``tokens`` + --input-tokens long."""
    cfg = src.cfg
    spec = shared_prefix.SharedPrefixSpec(groups, tokens, cfg.input_tokens, cfg.prefix_skew)
    prompts = shared_prefix.shared_prefix_prompts(cfg.num_prompts, spec, tokenizer, src.seed)
    requests = [_make(p.text, src.system, out, tokens + cfg.input_tokens) for p in prompts]
    exact = tokenizer is not None and all(p.exact for p in prompts)
    return Built(requests, None, exact_lengths=exact, shared_prefix=shared_prefix.shared_prefix_facts(spec, prompts))


def _jsonl(src: Source, _: Tokenizer | None) -> Built:
    cfg = src.cfg
    if cfg.path is None:
        raise BadInput("--dataset jsonl needs --dataset-path FILE.jsonl")
    requests: list[Request] = []
    for r in jsonl.load(cfg.path, cfg.grader):
        if src.system and r.prompt is not None:
            made = _make(r.prompt, src.system, r.max_tokens, None)
            r = replace(made, images=r.images, image_pixels=r.image_pixels, expected=r.expected)
        if r.max_tokens is None and cfg.output_tokens is not None:
            r = replace(r, max_tokens=cfg.output_tokens)
        requests.append(r)
    return Built(_shuffled(requests, src.seed), str(cfg.path))


def _sharegpt(src: Source, tokenizer: Tokenizer | None) -> Built:
    path, sampling = src.cfg.path or sharegpt.default_path(), src.cfg.sharegpt_sampling
    if sampling == "tokenbench":
        requests = _from_pairs(list(sharegpt.conversations(path)), src)
    else:
        peer = sharegpt.PEERS[sampling]
        requests = _as_peer(sharegpt.first_two_turns(path, peer), src, peer, special_tokens_of(tokenizer))
    return Built(requests, str(path), sharegpt_sampling=sampling)


def _dolly(src: Source, _: Tokenizer | None) -> Built:
    pairs = [(dolly.prompt_of(row), row.get("response") or "") for row in dolly.rows(src.cfg.path)]
    return Built(_from_pairs(pairs, src), str(src.cfg.path) if src.cfg.path else dolly.HUB_ID)


def trace_plan(
    cfg: DatasetConfig,
    seed: int,
    window: tuple[float | None, float | None],
    token_ids: bool,
    guard: ContextGuard,
    api: str,
    pooling_batch: int | None = None,
) -> TracePlan:
    """``--dataset trace``: how its rows become requests (a replay builds them as it goes:
    loadgen.source.TraceSource), the window of trace time the points cover, the context guard;
    images (a row's NumImages) go on the chat API only; ``pooling_batch``: a pooling API's inputs
    per request (--batch-size)."""
    if cfg.path is None:
        raise BadInput("--dataset trace needs --dataset-path FILE (a Mooncake, Azure, BurstGPT or Bailian trace)")
    check_path(cfg)
    selection = TraceSelection(cfg.path, cfg.trace_format, cfg.block_size, cfg.trace_model, cfg.trace_log_type, *window)
    return TracePlan(
        selection,
        system=read_system_prompt(cfg.system_prompt),
        seed=seed,
        token_ids=token_ids,
        guard=guard,
        images=api in CONVERSATION_APIS,
        image_size=cfg.image_size,
        image_format=cfg.image_format,
        pooling=(api, pooling_batch) if pooling_batch is not None else None,
    )


def trace_info(cfg: DatasetConfig, trace: TraceRequests, facts: TraceFacts, tokenizer: str | None) -> DatasetInfo:
    """What results.json says of a replayed trace's dataset: its requests are the rows sent."""
    return DatasetInfo(
        name=cfg.name,
        num_requests=facts.num_rows_used,
        exact_lengths=trace.exact_lengths,
        tokenizer=tokenizer,
        system_prompt=bool(trace.plan.system),
        unique_prefix=cfg.unique_prefix,
        source=str(cfg.path),
        trace=facts,
    )


def _from_pairs(pairs: list[tuple[str, str]], src: Source) -> list[Request]:
    """(prompt, reply) pairs, shuffled by the seed, filtered by length; the reply's length is the
    request's max_tokens unless --output-tokens fixes it."""
    cfg, requests = src.cfg, list[Request]()
    random.Random(src.seed).shuffle(pairs)
    for prompt, reply in pairs:
        if len(requests) >= cfg.num_prompts:
            break
        n_prompt = src.count(prompt)
        if not _in_range(n_prompt, cfg):
            continue
        out = cfg.output_tokens
        if out is None:
            out = src.count(reply)
            # vLLM's ShareGPT sampling rules: drop tiny replies and over-long pairs.
            if out < 4 or n_prompt < 4 or n_prompt > 1024 or n_prompt + out > 2048:
                continue
        requests.append(_make(prompt, src.system, out, n_prompt))
    return _shuffled(requests, src.seed)


def _as_peer(pairs: list[tuple[str, str]], src: Source, peer: sharegpt.Peer, special_tokens: int) -> list[Request]:
    """(prompt, reply) pairs drawn as the peer draws them: shuffled as ``random.seed(seed);
    random.shuffle(pairs)`` does, each kept whose lengths the peer keeps (counted as its tokenizer
    call counts them: with the ``special_tokens`` the tokenizer adds) and in the prompt token range,
    until --num-prompts; then, for vLLM, filled up to --num-prompts by ``random.seed(seed);
    random.choice(kept)`` each. Kept in that order (no second shuffle). max_tokens is the reply's
    length as the peer counts it unless --output-tokens fixes it; the prompt's expected tokens are
    tokenbench's count."""
    cfg, requests = src.cfg, list[Request]()
    random.Random(src.seed).shuffle(pairs)
    for prompt, reply in pairs:
        if len(requests) >= cfg.num_prompts:
            break
        n_prompt = src.count(prompt)
        out = cfg.output_tokens if cfg.output_tokens is not None else src.count(reply) + special_tokens
        if _in_range(n_prompt, cfg) and peer.keeps(n_prompt + special_tokens, out, cfg.output_tokens is not None):
            requests.append(_make(prompt, src.system, out, n_prompt))
    if peer.oversample and requests:
        kept, choose = list(requests), random.Random(src.seed)
        requests += [choose.choice(kept) for _ in range(cfg.num_prompts - len(kept))]
    return requests


def _shuffled(requests: list[Request], seed: int) -> list[Request]:
    random.Random(seed + 1).shuffle(requests)
    return requests


# --dataset NAME -> its source (config.DatasetName lists the same names): a new dataset is a
# module and a line here.
# A trace is not a list: it is replayed row by row (trace_plan).
SOURCES: dict[DatasetName, Callable[[Source, Tokenizer | None], Built]] = {
    "synthetic": _synthetic,
    "sharegpt": _sharegpt,
    "dolly": _dolly,
    "jsonl": _jsonl,
}


class _Workload(TypedDict, total=False):
    """DatasetInfo's keys only some datasets have (set only when they do)."""

    shared_prefix: SharedPrefixFacts
    sharegpt_sampling: str


def build_requests(cfg: DatasetConfig, tokenizer: Tokenizer | None, seed: int) -> tuple[list[Request], DatasetInfo]:
    """The dataset's requests and what results.json says of them (a trace: trace_plan)."""
    check_path(cfg)
    if cfg.name not in SOURCES:
        how = "run session by session (datasets.programs)" if cfg.name == "programs" else "replayed row by row"
        raise BadInput(f"--dataset {cfg.name} is {how}, not built as a list (a trace: datasets.trace_plan)")
    system = read_system_prompt(cfg.system_prompt)
    count = tokenizer.count if tokenizer is not None else _estimate
    try:
        built = SOURCES[cfg.name](Source(cfg, count, system, seed), tokenizer)
    except (BadInput, OSError, UnicodeDecodeError) as exc:
        if cfg.path is None or (isinstance(exc, BadInput) and str(cfg.path) not in str(exc)):
            raise
        raise _read_error(cfg, exc) from exc
    if not built.requests:
        raise BadInput(f"dataset {cfg.name!r} gave no prompts (check --dataset-path and the prompt token range)")
    if cfg.images is not None:  # images: synthetic images on every dataset's prompts
        built = replace(built, requests=with_synthetic_images(built.requests, cfg, seed))
    # only shared prefixes' facts (and ShareGPT's sampling) add a key (a trace's: trace_info): other
    # datasets' results.json keep their shape
    workload = _Workload()
    if built.shared_prefix is not None:
        workload["shared_prefix"] = built.shared_prefix
    if built.sharegpt_sampling is not None:
        workload["sharegpt_sampling"] = built.sharegpt_sampling
    info = DatasetInfo(
        name=cfg.name,
        num_requests=len(built.requests),
        exact_lengths=built.exact_lengths if built.exact_lengths is not None else tokenizer is not None,
        tokenizer=tokenizer.name if tokenizer is not None else None,
        system_prompt=bool(system),
        unique_prefix=cfg.unique_prefix,
        source=built.source,
        **workload,
    )
    return built.requests, info


def with_prefix(request: Request, prefix: str) -> Request:
    """The same request with ``prefix`` before its (last) user text: defeats prefix caching."""
    if request.inputs is not None:  # a pooling request: every input's
        inputs = tuple(prefix + text for text in request.inputs)
        return replace(request, prompt=prefix + (request.prompt or ""), inputs=inputs)
    if request.prompt is not None:
        return replace(request, prompt=prefix + request.prompt)
    messages = list(request.messages or ())
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == "user":
            messages[i] = {**messages[i], "content": prefix + messages[i]["content"]}
            break
    # The system prompt stays first and shared: a unique prefix on it would also defeat the
    # cache a real deployment gets for a common system prompt; put it where the user text starts.
    return replace(request, messages=tuple(messages))
