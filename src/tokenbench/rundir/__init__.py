"""The run directory: config.json, records.jsonl (appended as requests finish, flushed within 50 ms),
results.json (rewritten after each point, so a crash keeps every finished point).

Every JSON file is written through ``write_json``, which masks credentials (redact.py); records'
error texts (a server may echo a key in its error) are masked too. A directory is checked before
anything starts: it must be new or empty, writable, and have room (``MIN_FREE_BYTES``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

import orjson  # records are written on the client's hot path, one line per finished request

from tokenbench.common.redact import mask, mask_text
from tokenbench.errors import BadInput
from tokenbench.records import RequestRecord
from tokenbench.results import RunResults
from tokenbench.results.layout import CONFIG, RECORDS, RESULTS
from tokenbench.results.manifest import RunManifest


def default_run_dir(root: Path = Path("runs")) -> Path:
    return root / datetime.now().strftime("%Y%m%d-%H%M%S")


# A run writes ~0.3-1 KB per request to records.jsonl and a few KB per scrape to samples.jsonl:
# less free space than this fails before any load is sent rather than midway.
MIN_FREE_BYTES = 64 * 1024 * 1024


class OutDirError(BadInput):
    """--out cannot hold a run: the message names the path and what to do."""


def check_out_dir(path: Path) -> None:
    """Make ``path`` and prove it takes files: raise OutDirError naming it if it is a file, holds
    files already (a failed start's server logs excepted: see ``remove_failed_start``), cannot be
    written or is full."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutDirError(f"--out {path} is a file: give a directory (a new one, or an empty one)")
    if path.exists() and any(not _failed_start_log(p) for p in path.iterdir()):
        raise OutDirError(
            f"--out {path} already holds files (a run?); pick a new directory, or "
            f"`tokenbench recompute {path}` to re-derive its results"
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".tokenbench-write-test"
        with open(probe, "wb") as f:
            f.write(b"x" * 4096)
            f.flush()
            os.fsync(f.fileno())
        probe.unlink()
    except OSError as exc:
        raise OutDirError(f"--out {path} is not writable: {exc.strerror or exc}") from None
    free = shutil.disk_usage(path).free
    if free < MIN_FREE_BYTES:
        raise OutDirError(
            f"--out {path}: only {free / 2**20:.0f} MB free on its filesystem; a run "
            f"needs at least {MIN_FREE_BYTES / 2**20:.0f} MB. Free space or pick another place"
        )


def _failed_start_log(path: Path) -> bool:
    """An engine's log left by a start that failed (server.log, server-upstream.log): all such a
    start keeps of its --out, so the error that names it can be read; the next run replaces it."""
    return path.is_file() and path.name.startswith("server") and path.suffix == ".log"


def fresh_out_dir(path: Path) -> bool:
    """``path`` is not there yet, or holds nothing but a failed start's logs: a run may remove
    what it made there."""
    return not path.exists() or (path.is_dir() and all(_failed_start_log(p) for p in path.iterdir()))


def remove_failed_start(path: Path, made: bool) -> None:
    """Undo what a run that failed before its first record wrote in ``path``: every file but the
    engine's logs (the error may name them), then the directory itself if the run ``made`` it
    and nothing is left. ``--out`` may then be given again."""
    for entry in path.iterdir() if path.is_dir() else ():
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        elif not (_failed_start_log(entry) and entry.stat().st_size > 0):
            entry.unlink(missing_ok=True)
    if made:
        with contextlib.suppress(OSError):
            path.rmdir()  # only when empty


# records.jsonl's writes: flushed this long after a write at most, through a buffer that holds
# that long's records at thousands of requests a second (a point's end flushes before reading)
FLUSH_S = 0.05
RECORDS_BUFFER = 1 << 18


class RunWriter:
    def __init__(self, out_dir: Path, keep_text: bool = False) -> None:
        self.dir = Path(out_dir)
        check_out_dir(self.dir)
        for stale in self.dir.iterdir():  # a failed start's engine logs: this run writes its own
            stale.unlink()
        self._keep_text = keep_text
        # binary, a large buffer, flushed within FLUSH_S of a write (not once a record)
        self._records = open(self.dir / RECORDS, "ab", buffering=RECORDS_BUFFER)
        self._flush_by = 0.0  # a flush is due (time.monotonic() before this)
        self._manifest: RunManifest | None = None

    def write_config(self, manifest: RunManifest) -> None:
        """config.json (rewritten whole when a fact is added, e.g. the workers' clocks)."""
        data = json.loads(json.dumps(mask(manifest.to_json())))
        self._manifest = RunManifest.from_json(data)  # exactly what a reader gets back: masked
        write_json(self.dir / CONFIG, data)

    def manifest(self) -> RunManifest:
        """config.json as written (masked): what recompute reads."""
        assert self._manifest is not None, "write_config first"
        return self._manifest

    def write_record(self, record: RequestRecord) -> None:
        self.write_records((record,))

    def write_records(self, records: Iterable[RequestRecord]) -> None:
        """Records as they ended (one, or a worker's batch): on disk within ``FLUSH_S`` (at
        once off an event loop), and whenever the records are read back or the writer closes."""
        lines = []
        keep_text = self._keep_text
        for record in records:
            if not record.error and not keep_text:  # the usual record: orjson from its fields
                lines.append(record.to_line())
                continue
            data = record.to_json(keep_text)
            if data.get("error"):
                data["error"] = mask_text(data["error"])
            lines.append(orjson.dumps(data, option=orjson.OPT_APPEND_NEWLINE))
        if not lines:
            return
        self._records.write(lines[0] if len(lines) == 1 else b"".join(lines))
        self._flush_soon()

    def _flush_soon(self) -> None:
        """One flush a while after the first write since the last: a run of 1,000 requests/s
        makes ~20 writes to the file a second, not 1,000 (a flush per record was ~3% of the
        client's CPU per request at 4-token replies)."""
        now = time.monotonic()
        if now < self._flush_by:  # one is due (asked for under a second ago: its loop runs it)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop to flush later on: now
            self._records.flush()
            return
        self._flush_by = now + 1.0  # (a loop closed with the flush due never runs it: ask again then)
        loop.call_later(FLUSH_S, self._flush)

    def _flush(self) -> None:
        self._flush_by = 0.0
        if not self._records.closed:
            self._records.flush()

    def has_records(self) -> bool:
        """A record was written (a run that fails before its first has measured nothing)."""
        if not self._records.closed:
            self._records.flush()
        path = self.dir / RECORDS
        return path.is_file() and path.stat().st_size > 0

    def records_offset(self) -> int:
        """Where the next record will start in records.jsonl."""
        return self._records.tell()

    def records_since(self, offset: int) -> RecordSlice:
        """The records written from ``offset`` on, read back from the file each time they are
        iterated (a point's records: points run one after another, so theirs are contiguous)."""
        self._records.flush()
        return RecordSlice(self.dir / RECORDS, [(offset, self._records.tell())])

    def write_results(self, results: RunResults) -> None:
        write_json(self.dir / RESULTS, results.to_json())

    def close(self) -> None:
        self._records.close()


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically: readers (and a resumed experiment) never see half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(mask(data), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # readers never see half a file


def read_records(run_dir: Path) -> list[RequestRecord]:
    with open(Path(run_dir) / RECORDS, "rb") as f:
        return parse_records(f)


def parse_records(lines: Iterable[bytes | str]) -> list[RequestRecord]:
    """Records from records.jsonl lines (see ``iter_records``), as a list."""
    return list(iter_records(lines))


def iter_records(lines: Iterable[bytes | str], first_line: int = 1) -> Iterator[RequestRecord]:
    """Records from records.jsonl lines (bytes; orjson: ~4x json.loads on chunk-time lists), one
    at a time. A torn last line (the run was killed mid-write) is skipped; a bad line elsewhere is
    an error naming its line number (counted from ``first_line``)."""
    pending_error: str | None = None
    for number, line in enumerate(lines, first_line):
        if pending_error is not None:
            raise BadInput(pending_error)
        if not line.strip():
            continue
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            whole = line.endswith(b"\n") if isinstance(line, bytes) else line.endswith("\n")
            if not whole:
                pending_error = f"records.jsonl line {number}: {exc}"  # fine if it is the last
                continue
            raise BadInput(f"records.jsonl line {number} is not a record: {exc}") from None
        yield RequestRecord.from_json(data)


class RecordSlice:
    """Some of records.jsonl's records, as byte ranges [start, end) of whole lines, read from the
    file each time they are iterated: a point's summary streams them (metrics.ChunkTally) and never
    holds them all. ``end`` None: to the end of the file."""

    def __init__(self, path: Path, ranges: Sequence[tuple[int, int | None]]) -> None:
        self.path = Path(path)
        self.ranges = ranges

    def __iter__(self) -> Iterator[RequestRecord]:
        with open(self.path, "rb") as f:
            for start, end in self.ranges:
                f.seek(start)
                try:
                    yield from iter_records(_lines_until(f, end))
                except ValueError as exc:  # its line numbers count from the range's start
                    raise BadInput(f"{exc} (counting from byte {start} of {self.path})") from None


def _lines_until(f: BinaryIO, end: int | None) -> Iterator[bytes]:
    position = f.tell()
    for line in f:
        if end is not None and position >= end:
            return
        position += len(line)
        yield line


_POINT_PREFIX = re.compile(rb'\{"point":(\d+),')


def point_ranges(path: Path) -> dict[int, list[tuple[int, int]]]:
    """Each point's records in records.jsonl as byte ranges of consecutive lines (one range a
    point when points ran one after another, as a run writes them). Reads each line's point from
    its first key (how records are written), parsing the line only when it is written otherwise."""
    ranges: dict[int, list[tuple[int, int]]] = {}
    position = 0
    current: int | None = None
    with open(path, "rb") as f:
        for line in f:
            start, position = position, position + len(line)
            if not line.strip():
                continue
            match = _POINT_PREFIX.match(line)
            if match:
                point = int(match.group(1))
            else:
                try:
                    point = int(orjson.loads(line)["point"])
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                    point = current if current is not None else 0  # a torn or bad line: the reader says which
            if point == current:
                first, _ = ranges[point][-1]
                ranges[point][-1] = (first, position)
            else:
                ranges.setdefault(point, []).append((start, position))
                current = point
    return ranges
