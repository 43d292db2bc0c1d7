"""Production traces: a trace file read row by row into typed rows, in the window asked for, in
bounded memory; its digest and row count on the side.

Owns the public formats (field names and units cited at each reader, from
``shared/research/wave2-research.md`` section 1a and ``real-data.md``), their detection from a
file's first line (detection asks exactly what the reader needs), the validation that names
``file:line`` for every malformed row, and gzip (the public traces ship as ``.csv.gz`` /
``.jsonl.gz``). ``TraceReader.rows`` streams: a row is parsed when the replay reaches it, and in a
plain (not gzipped) file the rows before ``--replay-start`` are skipped by bisecting the file on
its timestamps, never parsed. Bailian is the one format read whole: its rows are not promised in
arrival order and its sessions link by parent ids (its files are tens of MB).

Times are on the trace's own clock: the file's timestamps as written (Mooncake ms, BurstGPT and
Bailian seconds) in seconds, or, where the file writes wall-clock times (Azure), seconds from its
first row (``TraceClock`` says which, and that row's time). ``--replay-start/--replay-end`` are on
that clock. Prompts from the hash ids are ``trace_prompts``; the schedule is
``loadgen.schedule.replay_offsets``.
"""

from __future__ import annotations

import bisect
import csv
import gzip
import hashlib
import io
import json
import math
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, NoReturn, get_args

from tokenbench.config import TraceFormat
from tokenbench.errors import BadInput

FORMATS: tuple[TraceFormat, ...] = get_args(TraceFormat)

# Tokens per hash id where the format has hash ids (Mooncake README: 512-token blocks; AIPerf's
# Bailian tutorial: SipHash over 16-token blocks). Azure and BurstGPT have no hash ids.
DEFAULT_BLOCK_SIZE: dict[TraceFormat, int | None] = {"mooncake": 512, "bailian": 16, "azure": None, "burstgpt": None}

# The columns each CSV format needs: detection asks for exactly these, so a file detected as a
# format is one its reader reads (BurstGPT's Model and Log Type are read where present).
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")

GZIP_MAGIC = b"\x1f\x8b"


class TraceError(BadInput):
    """A trace file that cannot be read as asked; the message starts with ``file:line``."""


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One request of a trace. ``row`` is the 1-based line (JSONL) or CSV record line it came from,
    so an error or a record can point back at the file."""

    row: int
    timestamp_s: float  # on the trace's clock (TraceClock)
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()  # empty when the format (or the row) has none
    session_id: str | None = None
    parent_id: str | None = None
    num_images: int = 0  # images the request carried (Azure's 2025 multimodal trace: NumImages)


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


@dataclass(frozen=True)
class TraceClock:
    """What a trace's times count from: ``trace`` (its own timestamps, in seconds) or
    ``first_row`` (a wall-clock trace: seconds from its first row, which was at ``origin``).
    ``first_row_s``: the first row's time on that clock (BurstGPT's files start at 5 s)."""

    kind: str
    first_row_s: float
    origin: str | None = None  # the first row's wall-clock time as ISO 8601 (first_row only)


@dataclass
class TraceCounts:
    """Rows the reader passed over, by why (over the rows it read: up to where the replay
    stopped). ``failed``: BurstGPT's failed requests (Response tokens == 0); ``filtered``:
    another Model or Log Type than asked; ``no_prompt``: a row asking a reply to an empty prompt
    (Request tokens == 0), which no server could be sent."""

    failed: int = 0
    filtered: int = 0
    no_prompt: int = 0


@dataclass(frozen=True)
class Trace:
    """A whole trace, read at once (``read_trace``): for tests, tools and small files."""

    format: TraceFormat
    path: Path
    sha256: str
    rows: tuple[TraceRow, ...]
    block_size: int | None  # tokens per hash id; None for formats without hash ids
    num_failed_skipped: int = 0  # BurstGPT rows with Response tokens == 0 (failed requests)
    num_filtered_out: int = 0  # BurstGPT rows another model or log type than asked
    clock: TraceClock | None = None
    num_no_prompt: int = 0


# --- values -------------------------------------------------------------------------------------


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
    if type(value) is int and value >= 0:  # the common case, without the checks' cost
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
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


_AZURE_TIME = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:\.(\d+))?\s*(Z|[+-]\d{2}:?\d{2})?")


def _azure_time(text: str, where: str) -> datetime:
    """A TIMESTAMP in UTC without a zone: the 2023 files' naive 7-digit stamps, the 2024 files'
    ``+00:00`` ones (with or without a fraction), the 2025 ``T...Z`` ones."""
    try:
        t = datetime.fromisoformat(text)  # every public style (3.11 takes 7 digits, Z, offsets)
    except ValueError:
        t = _azure_time_slow(text, where)
    if t.tzinfo is not None:
        t = t.astimezone(UTC).replace(tzinfo=None)
    return t


def _azure_time_slow(text: str, where: str) -> datetime:
    # Spaces around it, or a zone without a colon: cut the fraction to microseconds here.
    m = _AZURE_TIME.fullmatch(text.strip())
    if m is None:
        _fail(where, f"TIMESTAMP {text!r} is not a date and time like 2023-11-16 18:17:03.9799600")
    head, frac, zone = m.groups()
    try:
        t = datetime.fromisoformat(head)
    except ValueError:
        _fail(where, f"TIMESTAMP {text!r} is not a valid date and time")
    t += timedelta(microseconds=int((frac or "0")[:6].ljust(6, "0")))
    if zone and zone != "Z":
        offset = timedelta(hours=int(zone[1:3]), minutes=int(zone[-2:]))
        t = t - offset if zone[0] == "+" else t + offset
    return t


# --- files --------------------------------------------------------------------------------------


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


@contextmanager
def open_trace(path: Path, offset: int = 0) -> Iterator[IO[str]]:
    """The trace's text (gunzipped when it is gzip, whatever its name), from byte ``offset`` of
    a plain file; a leading BOM is skipped."""
    if is_gzip(path):
        with gzip.open(path, "rt", encoding="utf-8-sig", newline="") as f:
            yield f
        return
    with open(path, "rb") as raw:
        raw.seek(offset)
        with io.TextIOWrapper(raw, encoding="utf-8-sig" if offset == 0 else "utf-8", newline="") as f:
            yield f


def _first_line(path: Path) -> str | None:
    with open_trace(path) as f:
        return next((line for line in f if line.strip()), None)


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


# --- skipping to the window ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Start:
    """Where reading starts: a byte offset in the file and the line number there."""

    offset: int = 0
    lineno: int = 1


def _seek_window(path: Path, start_s: float, header_lines: int, time_of: Callable[[bytes], float | None]) -> _Start:
    """The first line at or after trace time ``start_s`` in a plain file whose rows are in time
    order, found by bisecting byte offsets (``time_of`` reads a line's time; None: not a row),
    so the reader starts at that row; its line number by counting the
    newlines before it (C speed: ~1 s a GB). From the start when the window starts at the first
    row or the file is gzip (a stream cannot be bisected: its rows before the window are read)."""
    if is_gzip(path):
        return _Start()
    with open(path, "rb") as f:
        size = f.seek(0, io.SEEK_END)
        f.seek(0)
        for _ in range(header_lines):
            f.readline()
        lo, hi = f.tell(), size  # invariant: every row starting before lo is before start_s

        def row_at(offset: int) -> tuple[int, float] | None:
            """The first whole line starting at or after ``offset``: its start and time."""
            f.seek(max(offset - 1, 0))
            if offset > 0:
                f.readline()  # the rest of the line ``offset - 1`` is in
            while True:
                at = f.tell()
                line = f.readline()
                if not line:
                    return None
                t = time_of(line)
                if t is not None:
                    return at, t

        first = lo
        while hi - lo > 65536:
            mid = (lo + hi) // 2
            found = row_at(mid)
            if found is None or found[1] >= start_s:
                hi = mid
            else:
                lo = found[0] + 1
        # lo..hi holds the first row at or after start_s (or the file's end): a short scan
        f.seek(lo)
        if lo > first:
            f.seek(lo - 1)
            f.readline()
        at = f.tell()
        while True:
            line = f.readline()
            if not line:
                break
            t = time_of(line)
            if t is not None and t >= start_s:
                break
            at = f.tell()
        if at <= first:
            return _Start()
        f.seek(0)
        newlines, left = 0, at
        while left > 0:
            chunk = f.read(min(left, 1 << 24))
            newlines += chunk.count(b"\n")
            left -= len(chunk)
        return _Start(at, newlines + 1)


# --- each format --------------------------------------------------------------------------------


def _json_objects(path: Path, start: _Start) -> Iterator[tuple[int, dict[str, object]]]:
    with open_trace(path, start.offset) as f:
        for lineno, line in enumerate(f, start.lineno):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                _fail(f"{path}:{lineno}", f"not a JSON line ({exc.msg})")
            if not isinstance(obj, dict):
                _fail(f"{path}:{lineno}", "expected a JSON object")
            yield lineno, obj


def _csv_header(path: Path, required: tuple[str, ...]) -> list[str]:
    with open_trace(path) as f:
        header = [h.strip() for h in next(csv.reader(f), [])]
    missing = [c for c in required if c not in header]
    if missing:
        _fail(f"{path}:1", f"header lacks column(s) {', '.join(missing)} (header: {','.join(header)})")
    return header


def _csv_records(path: Path, header: list[str], start: _Start) -> Iterator[tuple[int, list[str]]]:
    """Records as field lists in ``header``'s order, with the line each starts on."""
    with open_trace(path, start.offset) as f:
        reader = csv.reader(f)
        first = start.lineno
        if start.offset == 0:
            next(reader, None)  # the header
            first = 2
        base = first - reader.line_num - 1  # line_num counts the lines read so far
        for fields in reader:
            lineno = base + reader.line_num
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if len(fields) != len(header):
                _fail(f"{path}:{lineno}", f"{len(fields)} fields, the header has {len(header)}")
            yield lineno, fields


def _mooncake(path: Path, block_size: int, start: _Start) -> Iterator[TraceRow]:
    # kvcache-ai/Mooncake FAST25-release/README.md: {"timestamp": int ms from the trace's start,
    # "input_length", "output_length", "hash_ids": [...]}, one object per line, in arrival order
    # (its conversation, synthetic and tool-agent traces alike).
    order = _Order(path)
    for lineno, obj in _json_objects(path, start):
        where = f"{path}:{lineno}"
        t_ms = _number(obj.get("timestamp"), "timestamp", where)
        inp = _length(obj.get("input_length"), "input_length", where)
        out = _length(obj.get("output_length"), "output_length", where)
        hashes = _hash_ids(obj.get("hash_ids"), where)
        _check_blocks(inp, hashes, block_size, where)
        order.check(t_ms, lineno, obj["timestamp"])
        yield TraceRow(lineno, t_ms / 1000.0, inp, out, hashes)


def _mooncake_time(line: bytes) -> float | None:
    try:
        obj = json.loads(line)
        return float(obj["timestamp"]) / 1000.0
    except (ValueError, KeyError, TypeError):
        return None


def _bailian(path: Path, block_size: int) -> list[TraceRow]:
    # AIPerf docs/tutorials/bailian-trace.md (alibaba-edu/qwen-bailian-usagetraces-anon): chat_id,
    # parent_chat_id (-1 = root, the default), timestamp (seconds), input_length, output_length,
    # type, turn, hash_ids (16-token blocks; absent in some rows of the tutorial's example, so
    # optional here). Arrival order is not promised: rows are ordered by timestamp after reading.
    rows: list[TraceRow] = []
    parents: dict[str, str | None] = {}
    lines: dict[str, int] = {}
    for lineno, obj in _json_objects(path, _Start()):
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


class _Azure:
    # Azure/AzurePublicDataset AzureLLMInferenceDataset2023.md / 2024.md / AzureLMMInference
    # Dataset2025.md: TIMESTAMP (absolute wall time), ContextTokens, GeneratedTokens; the 2025
    # multimodal trace adds NumImages (images in the request). No prefix hashes. Rows are in
    # arrival order. Times are seconds from the first row (the file has no zero of its own).

    def __init__(self, path: Path) -> None:
        self.path = path
        self.header = _csv_header(path, AZURE_COLUMNS)
        self._cols = [self.header.index(c) for c in AZURE_COLUMNS]
        self._images = self.header.index("NumImages") if "NumImages" in self.header else None
        first = next(_csv_records(path, self.header, _Start()), None)
        if first is None:
            _fail(str(path), "no rows to replay")
        self.t0 = _azure_time(first[1][self._cols[0]], f"{path}:{first[0]}")

    @property
    def clock(self) -> TraceClock:
        return TraceClock("first_row", 0.0, self.t0.isoformat())

    def time_of(self, line: bytes) -> float | None:
        try:
            text = line.decode("utf-8").split(",")[self._cols[0]].strip()
            return (_azure_time(text, "") - self.t0).total_seconds()
        except (ValueError, IndexError, BadInput):
            return None

    def rows(self, start: _Start) -> Iterator[TraceRow]:
        path, order, t0 = self.path, _Order(self.path), self.t0
        ts, ctx, gen = self._cols
        images = self._images
        for lineno, rec in _csv_records(path, self.header, start):
            where = f"{path}:{lineno}"
            t_s = (_azure_time(rec[ts], where) - t0).total_seconds()
            order.check(t_s, lineno, rec[ts])
            inp = _length(rec[ctx], "ContextTokens", where)
            out = _length(rec[gen], "GeneratedTokens", where)
            n_images = _length(rec[images], "NumImages", where) if images is not None else 0
            yield TraceRow(lineno, t_s, inp, out, num_images=n_images)


class _BurstGPT:
    # HPMLL/BurstGPT README: Timestamp (seconds from 0:00 of day 1), Model (ChatGPT / GPT-4),
    # Request tokens, Response tokens, Total tokens, Log Type (Conversation log / API log); release
    # v2.0 (BurstGPT_3) inserts Session ID (conversation logs) and Elapsed time after Timestamp.
    # Needed: Timestamp and the token counts (what detection asks); Model and Log Type are read
    # where present (the filters need them). A failed request has Response tokens == 0: skipped
    # and counted (the *_without_fails_* files drop them; vLLM's loader too); a row with a reply
    # but Request tokens == 0 has no prompt to send: skipped and counted.

    def __init__(self, path: Path, model: str | None, log_type: str | None) -> None:
        self.path, self.model, self.log_type = path, model, log_type
        self.header = _csv_header(path, BURSTGPT_COLUMNS)
        for value, column, flag in ((model, "Model", "--trace-model"), (log_type, "Log Type", "--trace-log-type")):
            if value is not None and column not in self.header:
                _fail(f"{path}:1", f"{flag} filters on the {column} column, which this file lacks")
        self._time = self.header.index("Timestamp")

    def time_of(self, line: bytes) -> float | None:
        try:
            return float(line.decode("utf-8").split(",")[self._time])
        except (ValueError, IndexError):
            return None

    def rows(self, start: _Start, counts: TraceCounts) -> Iterator[TraceRow]:
        path, order = self.path, _Order(self.path)
        col = {name: i for i, name in enumerate(self.header)}
        ts, req, resp = col["Timestamp"], col["Request tokens"], col["Response tokens"]
        model_col, type_col, session_col = col.get("Model"), col.get("Log Type"), col.get("Session ID")
        models, types = set(), set()
        kept = 0
        for lineno, rec in _csv_records(path, self.header, start):
            where = f"{path}:{lineno}"
            t_s = _number(rec[ts], "Timestamp", where)
            order.check(t_s, lineno, rec[ts])
            inp = _length(rec[req], "Request tokens", where)
            out = _length(rec[resp], "Response tokens", where)
            model = rec[model_col] if model_col is not None else None
            kind = rec[type_col] if type_col is not None else None
            models.add(model)
            types.add(kind)
            if (self.model is not None and model != self.model) or (
                self.log_type is not None and kind != self.log_type
            ):
                counts.filtered += 1
                continue
            if out == 0:
                counts.failed += 1
                continue
            if inp == 0:
                counts.no_prompt += 1
                continue
            session = (rec[session_col].strip() or None) if session_col is not None else None
            kept += 1
            yield TraceRow(lineno, t_s, inp, out, session_id=session)
        if not kept and counts.filtered:
            _fail(
                str(path),
                f"no rows with Model {self.model!r} and Log Type {self.log_type!r} "
                f"(models: {', '.join(sorted(str(m) for m in models))}; "
                f"log types: {', '.join(sorted(str(t) for t in types))})",
            )


# --- detection and reading ----------------------------------------------------------------------


def detect_format(path: str | Path) -> TraceFormat:
    """The format from the first non-blank line: a JSON object's keys or a CSV header's columns,
    asking for exactly the fields its reader needs."""
    path = Path(path)
    first = _first_line(path)
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
    if set(AZURE_COLUMNS) <= header:
        return "azure"
    if set(BURSTGPT_COLUMNS) <= header:
        return "burstgpt"
    _fail(where, f"not a known trace header ({first.strip()[:80]!r}); give the format: {', '.join(FORMATS)}")


class TraceReader:
    """A trace opened for reading: its format, block size and clock known, its rows in a window
    read lazily (``rows``), what was passed over counted (``counts``)."""

    def __init__(self, sel: TraceSelection) -> None:
        path = Path(sel.path)
        if not path.is_file():
            raise TraceError(f"{path}: no such trace file")
        fmt = sel.format or detect_format(path)
        if fmt not in FORMATS:
            raise TraceError(f"unknown trace format {fmt!r}; one of {', '.join(FORMATS)}")
        if fmt != "burstgpt" and (sel.model is not None or sel.log_type is not None):
            raise TraceError(f"{path}: filtering by model or log type applies to BurstGPT traces, not {fmt}")
        if sel.block_size is not None and sel.block_size <= 0:
            raise TraceError(f"block size must be a positive number of tokens (got {sel.block_size})")
        self.path, self.format, self.selection = path, fmt, sel
        self.block_size = sel.block_size or DEFAULT_BLOCK_SIZE[fmt]
        self._azure = _Azure(path) if fmt == "azure" else None
        self._burst = _BurstGPT(path, sel.model, sel.log_type) if fmt == "burstgpt" else None
        self._bailian: list[TraceRow] | None = None
        self.clock = self._clock()

    def _clock(self) -> TraceClock:
        if self._azure is not None:
            return self._azure.clock
        first = next(self._all(_Start(), TraceCounts()), None)
        if first is None:
            raise TraceError(f"{self.path}: no rows to replay")
        return TraceClock("trace", first.timestamp_s)

    def _all(self, start: _Start, counts: TraceCounts) -> Iterator[TraceRow]:
        if self._azure is not None:
            return self._azure.rows(start)
        if self._burst is not None:
            return self._burst.rows(start, counts)
        if self.format == "mooncake":
            return _mooncake(self.path, self.block_size or 512, start)
        if self._bailian is None:
            self._bailian = _bailian(self.path, self.block_size or 16)
        return iter(self._bailian)

    def _start(self, start_s: float | None) -> _Start:
        if start_s is None or start_s <= self.clock.first_row_s or self.format == "bailian":
            return _Start()
        if self._azure is not None:
            return _seek_window(self.path, start_s, 1, self._azure.time_of)
        if self._burst is not None:
            return _seek_window(self.path, start_s, 1, self._burst.time_of)
        return _seek_window(self.path, start_s, 0, _mooncake_time)

    def rows(
        self, start_s: float | None = None, end_s: float | None = None, counts: TraceCounts | None = None
    ) -> Iterator[TraceRow]:
        """The rows with ``start_s <= timestamp_s < end_s`` (trace time; None: the selection's), in
        trace order, read as they are asked for; reading stops at the first row past ``end_s``
        (rows are in order). ``counts`` counts the rows passed over (TraceCounts)."""
        start_s = start_s if start_s is not None else self.selection.start_s
        end_s = end_s if end_s is not None else self.selection.end_s
        rows = self._all(self._start(start_s), counts if counts is not None else TraceCounts())
        if self._bailian is not None and start_s is not None:  # read whole, in time order
            times = [r.timestamp_s for r in self._bailian]
            rows = iter(self._bailian[bisect.bisect_left(times, start_s) :])
        for row in rows:
            if start_s is not None and row.timestamp_s < start_s:
                continue
            if end_s is not None and row.timestamp_s >= end_s:
                return
            yield row


# --- the file's digest and size, on the side ----------------------------------------------------


@dataclass
class TraceDigest:
    """The file's sha256 and its rows (data lines, less a CSV header), computed by one pass in a
    thread of its own so the first send never waits for them (hashlib and zlib release the GIL
    on large buffers); ``result`` waits for the pass."""

    path: Path
    header_lines: int = 0
    _done: threading.Event = field(default_factory=threading.Event)
    _sha256: str = ""
    _rows: int = 0
    _error: BaseException | None = None

    def start(self) -> TraceDigest:
        threading.Thread(target=self._run, name="trace-digest", daemon=True).start()
        return self

    def _run(self) -> None:
        try:
            digest, lines, last = hashlib.sha256(), 0, b"\n"
            with open(self.path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
            with gzip.open(self.path, "rb") if is_gzip(self.path) else open(self.path, "rb") as g:
                for chunk in iter(lambda: g.read(1 << 20), b""):
                    lines += chunk.count(b"\n")
                    last = chunk[-1:]
            lines += last != b"\n"  # a last line without its newline
            self._sha256, self._rows = digest.hexdigest(), max(0, lines - self.header_lines)
        except BaseException as exc:
            self._error = exc
        finally:
            self._done.set()

    def result(self, timeout_s: float | None = None) -> tuple[str, int] | None:
        """(sha256, rows), or None when the pass has not ended within ``timeout_s``."""
        if not self._done.wait(timeout_s):
            return None
        if self._error is not None:
            raise TraceError(f"{self.path}: {self._error}") from self._error
        return self._sha256, self._rows


def digest_of(reader: TraceReader) -> TraceDigest:
    return TraceDigest(reader.path, header_lines=1 if reader.format in ("azure", "burstgpt") else 0)


def read_trace(
    path: str | Path,
    format: TraceFormat | None = None,
    model: str | None = None,
    log_type: str | None = None,
    block_size: int | None = None,
) -> Trace:
    """The whole trace at once, validated, on the trace's clock (TraceReader streams it).

    ``model``/``log_type`` filter BurstGPT (exact column values, e.g. "GPT-4", "Conversation log");
    ``block_size`` overrides the format's tokens per hash id.
    """
    reader = TraceReader(TraceSelection(Path(path), format, block_size, model, log_type))
    counts = TraceCounts()
    rows = tuple(reader.rows(counts=counts))
    if not rows:
        raise TraceError(f"{reader.path}: no rows to replay")
    digest = digest_of(reader).start().result()
    assert digest is not None
    return Trace(
        reader.format,
        reader.path,
        digest[0],
        rows,
        reader.block_size,
        counts.failed,
        counts.filtered,
        reader.clock,
        counts.no_prompt,
    )
