"""Another tool's result file as read: its benchmarks (points), each request as the tool
recorded it, the tool's own figures, and what it did not record. One reader per tool makes it
(vllm_bench.py); write.py turns it into a tokenbench run directory."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenbench.config import LoadPoint
from tokenbench.records import Outcome, TokenSource


@dataclass(frozen=True)
class ToolRequest:
    """One request as another tool recorded it, on its own clock (seconds; any origin)."""

    start_s: float
    latency_s: float | None  # start to the end of the reply; None: failed before it ended
    ttft_s: float | None = None
    chunk_gaps_s: tuple[float, ...] = ()  # the gaps between consecutive content chunks after the first
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    output_tokens_from: TokenSource | None = None  # where the tool's count came from, where it says
    error: str | None = None  # the tool's error text: a failed request
    failure: Outcome = Outcome.STREAM_ERROR  # how it failed, as far as the tool's text tells
    # its first timed event carried no token (the role-only opening chunk a chat stream starts
    # with, which some tools time as the first token), its last none either (a closing chunk with
    # only the finish reason): dropped, so TTFT and E2E are at the first and last content
    opening_chunk: bool = False
    closing_chunk: bool = False
    # the tool kept only its first and last content chunk's times (chunk_gaps_s: the one gap
    # between them): TTFT, E2E and TPOT stand; the gaps between chunks (ITL) are unknown
    ends_only: bool = False


@dataclass(frozen=True)
class ToolPoint:
    """One benchmark of the file: its load, its requests and the tool's own figures of them."""

    load: LoadPoint
    requests: list[ToolRequest]
    # the tool's headline figures by tokenbench metric key, in tokenbench's stored unit (s, 1/s)
    figures: dict[str, float] = field(default_factory=dict)
    duration_s: float | None = None  # the period the tool divided its rates by, where it says
    # what the file shows went wrong with this benchmark (a schedule not kept, the tool's own
    # warnings): the figures stand as measured, but they may not be of the load the point names
    warnings: tuple[str, ...] = ()
    # the tool's own name of a figure, where definitions.py has none (an aggregate-only format's)
    figure_names: dict[str, str] = field(default_factory=dict)
    # the tool's counts where it kept no request (an aggregate-only format): sent, failed
    requests_total: int | None = None
    requests_failed: int | None = None


@dataclass(frozen=True)
class ImportedRun:
    """A tool's result file read: where it came from, what it measured, what it did not record."""

    tool: str  # "vllm-bench-serve"
    version: str | None
    source: Path
    model: str | None
    url: str | None
    api: str  # tokenbench's name of the API its requests went by
    points: list[ToolPoint]
    not_recorded: tuple[str, ...] = ()  # record keys the tool has no data for (absent, never guessed)
    # when its first request was sent, on the wall clock, where the file says (None: it does not)
    started_unix_s: float | None = None
    # the file holds the tool's aggregates only, no request (a Benchmark Report): points without
    # records, tokenbench's own figures absent, the tool's in results.json ``imported``
    aggregate_only: bool = False
    measured_by: str | None = None  # the tool that measured the figures, where a format names it


def json_object(path: Path) -> dict[str, Any] | None:
    """A file's JSON object (Any: another tool's file, read key by key), or None when ``path`` is
    not a file holding one: a reader's first test of whether a file is its tool's."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None
