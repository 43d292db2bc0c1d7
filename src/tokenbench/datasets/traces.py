"""Production traces: a trace file read into typed rows, text prompts built from its prefix-block
hashes, and the prefix reuse the workload promises.

Owns the four public formats (field names and units cited at each reader, from
``shared/research/wave2-research.md`` section 1a), their detection from a file's first line, the
validation that names ``file:line`` for every malformed row. Prompts from the hash ids and the
workload's expected reuse are ``trace_prompts``; the schedule a trace gives is ``load.replay_offsets``.
Not wired yet: ``--dataset trace`` (rows -> Requests, ``max_tokens`` = the row's output length) and
the load kind ``replay`` come next.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import NoReturn, get_args

from tokenbench.config import TraceFormat
from tokenbench.datasets.jsonl import json_lines
from tokenbench.errors import BadInput

FORMATS: tuple[TraceFormat, ...] = get_args(TraceFormat)

# Tokens per hash id where the format has hash ids (Mooncake README: 512-token blocks; AIPerf's
# Bailian tutorial: SipHash over 16-token blocks). Azure and BurstGPT have no hash ids.
DEFAULT_BLOCK_SIZE: dict[TraceFormat, int | None] = {"mooncake": 512, "bailian": 16, "azure": None, "burstgpt": None}


class TraceError(BadInput):
    """A trace file that cannot be read as asked; the message starts with ``file:line``."""


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One request of a trace. ``row`` is the 1-based line (JSONL) or CSV record line it came from,
    so an error or a record can point back at the file."""

    row: int
    timestamp_s: float  # from the trace's first row (its earliest, for unordered formats)
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()  # empty when the format (or the row) has none
    session_id: str | None = None
    parent_id: str | None = None


@dataclass(frozen=True)
class Trace:
    format: TraceFormat
    path: Path
    sha256: str
    rows: tuple[TraceRow, ...]
    block_size: int | None  # tokens per hash id; None for formats without hash ids
    num_failed_skipped: int = 0  # BurstGPT rows with Response tokens == 0 (failed requests)
    num_filtered_out: int = 0  # BurstGPT rows another model or log type than asked


# --- reading ------------------------------------------------------------------------------------


def _fail(where: str, what: str) -> NoReturn:
    raise TraceError(f"{where}: {what}")


def _number(value: object, name: str, where: str) -> float:
    if value is None or (isinstance(value, str) and not value.strip()):  # JSON null, an empty CSV field
        _fail(where, f"missing field {name!r}")
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        _fail(where, f"{name!r} is not a number (got {value!r})")
    try:
        x = float(value)
    except ValueError:
        _fail(where, f"{name!r} is not a number (got {value!r})")
    if not math.isfinite(x):
        _fail(where, f"{name!r} is not a finite number (got {value!r})")
    return x


def _length(value: object, name: str, where: str) -> int:
    x = _number(value, name, where)
    if x < 0:
        _fail(where, f"{name!r} is negative ({value!r}); token counts are >= 0")
    if not x.is_integer():
        _fail(where, f"{name!r} is not a whole number of tokens (got {value!r})")
    return int(x)


def _hash_ids(value: object, where: str) -> tuple[int, ...]:
    if value is None:
        _fail(where, "missing field 'hash_ids'")
    if not isinstance(value, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in value):
        _fail(where, f"'hash_ids' is not a list of integers (got {str(value)[:60]})")
    return tuple(value)


def num_blocks(input_tokens: int, block_size: int) -> int:
    return -(-input_tokens // block_size)  # ceil without floats


def _check_blocks(input_tokens: int, hash_ids: tuple[int, ...], block_size: int, where: str) -> None:
    # Every tool that reads hash ids holds this (guidellm validates it; AIPerf raises when the last
    # block is not in (0, block_size]); a mismatch means the wrong --block-size or a broken row.
    want = num_blocks(input_tokens, block_size)
    if want != len(hash_ids):
        _fail(
            where,
            f"{len(hash_ids)} hash_ids for input_length {input_tokens}: {block_size}-token blocks need "
            f"ceil({input_tokens}/{block_size}) = {want} (is --block-size right for this trace?)",
        )


def _json_objects(path: Path) -> Iterator[tuple[int, dict[str, object]]]:
    for lineno, obj in json_lines(path, TraceError):
        if not isinstance(obj, dict):
            _fail(f"{path}:{lineno}", "expected a JSON object")
        yield lineno, obj


def _csv_records(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """Records as {column: text}, with the line each starts on; the header must hold ``required``."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        missing = [c for c in required if c not in header]
        if missing:
            _fail(f"{path}:1", f"header lacks column(s) {', '.join(missing)} (header: {','.join(header)})")
        start = 2
        for fields in reader:
            lineno, start = start, reader.line_num + 1
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if len(fields) != len(header):
                _fail(f"{path}:{lineno}", f"{len(fields)} fields, the header has {len(header)}")
            yield lineno, dict(zip(header, fields))


class _Order:
    """Arrival order where the format promises it: a timestamp before the previous row's is a
    broken or concatenated file, and replaying it would silently reorder requests."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._last: tuple[float, int] | None = None

    def check(self, t_s: float, lineno: int, shown: object) -> None:
        if self._last is not None and t_s < self._last[0]:
            _fail(
                f"{self._path}:{lineno}",
                f"timestamp {shown} goes back before line {self._last[1]}'s; this format lists rows in arrival order",
            )
        self._last = (t_s, lineno)


def _mooncake(path: Path, block_size: int) -> list[TraceRow]:
    # kvcache-ai/Mooncake FAST25-release/README.md: {"timestamp": int ms from the trace's start,
    # "input_length", "output_length", "hash_ids": [...]}, one object per line, in arrival order.
    rows, order = [], _Order(path)
    for lineno, obj in _json_objects(path):
        where = f"{path}:{lineno}"
        t_ms = _number(obj.get("timestamp"), "timestamp", where)
        inp = _length(obj.get("input_length"), "input_length", where)
        out = _length(obj.get("output_length"), "output_length", where)
        hashes = _hash_ids(obj.get("hash_ids"), where)
        _check_blocks(inp, hashes, block_size, where)
        order.check(t_ms, lineno, obj["timestamp"])
        rows.append(TraceRow(lineno, t_ms / 1000.0, inp, out, hashes))
    return rows


def _bailian(path: Path, block_size: int) -> list[TraceRow]:
    # AIPerf docs/tutorials/bailian-trace.md (alibaba-edu/qwen-bailian-usagetraces-anon): chat_id,
    # parent_chat_id (-1 = root, the default), timestamp (seconds), input_length, output_length,
    # type, turn, hash_ids (16-token blocks; absent in some rows of the tutorial's example, so
    # optional here). Arrival order is not promised: rows are ordered by timestamp after reading.
    rows: list[TraceRow] = []
    parents: dict[str, str | None] = {}
    lines: dict[str, int] = {}
    for lineno, obj in _json_objects(path):
        where = f"{path}:{lineno}"
        if "chat_id" not in obj:
            _fail(where, "missing field 'chat_id'")
        chat_id, parent = str(obj["chat_id"]), obj.get("parent_chat_id", -1)
        if chat_id in lines:
            _fail(where, f"chat_id {chat_id} already on line {lines[chat_id]}")
        t_s = _number(obj.get("timestamp"), "timestamp", where)
        inp = _length(obj.get("input_length"), "input_length", where)
        out = _length(obj.get("output_length"), "output_length", where)
        hashes = _hash_ids(obj["hash_ids"], where) if "hash_ids" in obj else ()
        if hashes:
            _check_blocks(inp, hashes, block_size, where)
        parent_id = None if parent in (-1, "-1", None) else str(parent)
        lines[chat_id], parents[chat_id] = lineno, parent_id
        # session_id holds the chat_id until every row is read and the sessions' roots are known
        rows.append(TraceRow(lineno, t_s, inp, out, hashes, chat_id, parent_id))
    roots = _session_roots(parents, lines, path)
    rows = [replace(r, session_id=roots[r.session_id or ""]) for r in rows]
    return sorted(rows, key=lambda r: (r.timestamp_s, r.row))


def _session_roots(parents: dict[str, str | None], lines: dict[str, int], path: Path) -> dict[str, str]:
    """chat_id -> the chat_id its chain of parents starts from (the session). A parent missing from
    the file (a trace cut from a longer one) starts the session."""
    roots: dict[str, str] = {}
    for chat_id in parents:
        chain, node = [], chat_id
        while node not in roots:
            parent = parents.get(node)
            if parent is None or parent not in parents:
                roots[node] = parent if parent is not None else node
                break
            if node in chain:
                _fail(f"{path}:{lines[chat_id]}", f"parent_chat_id links of chat_id {chat_id} form a cycle")
            chain.append(node)
            node = parent
        for n in chain:
            roots[n] = roots[node]
    return roots


_AZURE_TIME = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:\.(\d+))?\s*(Z|[+-]\d{2}:?\d{2})?")


def _azure_time(text: str, where: str) -> datetime:
    # 7 fractional digits ("2023-11-16 18:17:03.9799600"): strptime's %f takes 6 at most, so the
    # fraction is cut to microseconds here (inference-perf cuts it to 2 digits, i.e. 10 ms).
    m = _AZURE_TIME.fullmatch(text.strip())
    if m is None:
        _fail(where, f"TIMESTAMP {text!r} is not a date and time like 2023-11-16 18:17:03.9799600")
    head, frac, zone = m.groups()
    try:
        t = datetime.fromisoformat(head)
    except ValueError:
        _fail(where, f"TIMESTAMP {text!r} is not a valid date and time")
    t += timedelta(microseconds=int((frac or "0")[:6].ljust(6, "0")))
    if zone and zone != "Z":  # an offset (not in the 2023 files): compare every row in UTC
        offset = timedelta(hours=int(zone[1:3]), minutes=int(zone[-2:]))
        t = t - offset if zone[0] == "+" else t + offset
    return t


def _azure(path: Path) -> list[TraceRow]:
    # Azure/AzurePublicDataset AzureLLMInferenceDataset2023.md / 2024.md: TIMESTAMP (absolute wall
    # time), ContextTokens, GeneratedTokens; the 2025 multimodal trace adds NumImages (ignored).
    # No prefix hashes. Rows are in arrival order.
    rows, order, t0 = [], _Order(path), None
    for lineno, rec in _csv_records(path, ("TIMESTAMP", "ContextTokens", "GeneratedTokens")):
        where = f"{path}:{lineno}"
        t = _azure_time(rec["TIMESTAMP"], where)
        if t0 is None:
            t0 = t
        t_s = (t - t0).total_seconds()
        order.check(t_s, lineno, rec["TIMESTAMP"])
        inp = _length(rec["ContextTokens"], "ContextTokens", where)
        out = _length(rec["GeneratedTokens"], "GeneratedTokens", where)
        rows.append(TraceRow(lineno, t_s, inp, out))
    return rows


_BURSTGPT_COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")


@dataclass
class _BurstCounts:
    failed: int = 0
    filtered: int = 0


def _burstgpt(path: Path, model: str | None, log_type: str | None, counts: _BurstCounts) -> list[TraceRow]:
    # HPMLL/BurstGPT README: Timestamp (seconds from 0:00 of day 1), Model (ChatGPT / GPT-4),
    # Request tokens, Response tokens, Total tokens, Log Type (Conversation log / API log); newer
    # releases add Session ID (conversation logs) and Elapsed time. A failed request has Response
    # tokens == 0: skipped and counted (the *_without_fails_* files drop them; vLLM's loader too).
    rows, order = [], _Order(path)
    models, types = set(), set()
    for lineno, rec in _csv_records(path, _BURSTGPT_COLUMNS):
        where = f"{path}:{lineno}"
        t_s = _number(rec["Timestamp"], "Timestamp", where)
        order.check(t_s, lineno, rec["Timestamp"])
        inp = _length(rec["Request tokens"], "Request tokens", where)
        out = _length(rec["Response tokens"], "Response tokens", where)
        models.add(rec["Model"])
        types.add(rec["Log Type"])
        if (model is not None and rec["Model"] != model) or (log_type is not None and rec["Log Type"] != log_type):
            counts.filtered += 1
            continue
        if out == 0:
            counts.failed += 1
            continue
        session = (rec.get("Session ID") or "").strip() or None
        rows.append(TraceRow(lineno, t_s, inp, out, session_id=session))
    if not rows and counts.filtered:
        _fail(
            str(path),
            f"no rows with Model {model!r} and Log Type {log_type!r} "
            f"(models: {', '.join(sorted(models))}; log types: {', '.join(sorted(types))})",
        )
    return rows


def detect_format(path: str | Path) -> TraceFormat:
    """The format from the first non-blank line: a JSON object's keys or a CSV header's columns."""
    path = Path(path)
    with open(path, encoding="utf-8-sig") as f:
        first = next((line for line in f if line.strip()), None)
    if first is None:
        _fail(str(path), "empty trace file")
    where = f"{path}:1"
    if first.lstrip().startswith("{"):
        try:
            obj = json.loads(first)
        except json.JSONDecodeError as exc:
            _fail(where, f"not a JSON line ({exc.msg})")
        if isinstance(obj, dict) and "chat_id" in obj:
            return "bailian"
        if isinstance(obj, dict) and "hash_ids" in obj and "input_length" in obj:
            return "mooncake"
        _fail(where, "a JSON line with neither Mooncake's fields (hash_ids, input_length) nor Bailian's (chat_id)")
    header = {h.strip() for h in next(csv.reader([first]))}
    if {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} <= header:
        return "azure"
    if {"Timestamp", "Request tokens", "Response tokens"} <= header:
        return "burstgpt"
    _fail(where, f"not a known trace header ({first.strip()[:80]!r}); give the format: {', '.join(FORMATS)}")


def read_trace(
    path: str | Path,
    format: TraceFormat | None = None,
    model: str | None = None,
    log_type: str | None = None,
    block_size: int | None = None,
) -> Trace:
    """The whole trace, validated; timestamps rebased so the first (earliest) row is at 0.

    ``model``/``log_type`` filter BurstGPT (exact column values, e.g. "GPT-4", "Conversation log");
    ``block_size`` overrides the format's tokens per hash id.
    """
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such trace file")
    fmt = format or detect_format(path)
    if fmt not in FORMATS:
        raise TraceError(f"unknown trace format {fmt!r}; one of {', '.join(FORMATS)}")
    if fmt != "burstgpt" and (model is not None or log_type is not None):
        raise TraceError(f"{path}: filtering by model or log type applies to BurstGPT traces, not {fmt}")
    if block_size is not None and block_size <= 0:
        raise TraceError(f"block size must be a positive number of tokens (got {block_size})")
    size = block_size or DEFAULT_BLOCK_SIZE[fmt]
    counts = _BurstCounts()
    readers: dict[TraceFormat, Callable[[], list[TraceRow]]] = {
        "mooncake": lambda: _mooncake(path, size or 512),
        "bailian": lambda: _bailian(path, size or 16),
        "azure": lambda: _azure(path),
        "burstgpt": lambda: _burstgpt(path, model, log_type, counts),
    }
    rows = readers[fmt]()
    if not rows:
        raise TraceError(f"{path}: no rows to replay")
    t0 = rows[0].timestamp_s
    if t0 != 0.0:
        rows = [replace(r, timestamp_s=r.timestamp_s - t0) for r in rows]
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    return Trace(fmt, path, digest, tuple(rows), size, counts.failed, counts.filtered)
