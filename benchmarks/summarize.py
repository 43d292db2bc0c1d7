"""Summarizing one big load point (a program, not a test): read its records.jsonl back, then
``metrics.summarize_point`` and ``metrics.timeseries`` over it, timed, with the process's memory.

The issue's targets ("memory that stays flat"): a streamed chunk costs <= 16 bytes of resident
memory, and one point of 10 million chunks summarizes in <= 10 s.

The point is synthetic: a closed loop of 64 users for about an hour (5 s time-series windows),
ok replies of 128 chunks (TTFT ~0.15 s, gaps ~20 ms, 3% of them 0: several events in one read),
1% failures (stream errors and timeouts with partial output, HTTP errors, no output), the requests
in flight at the end cancelled. It is written as a run writes it (``RunWriter.write_record``:
``RequestRecord.to_json`` through orjson, one line per record), in a child process so the
measuring process starts clean, into a temporary directory.

    python benchmarks/summarize.py                      # 10 M chunks
    python benchmarks/summarize.py --chunks 1000000     # smaller, for development
    python benchmarks/summarize.py --dump out.json      # also write the metrics, to compare runs
    python benchmarks/summarize.py --chunk-tokens       # ok replies carry 1-4 tokens a chunk, counted

Columns: seconds of the stage, chunks it covered, the process's RSS after it and its peak during
it (sampled every 5 ms), in MB. "records held" is the RSS the records add once read (streamed: without
their chunk times), per chunk; the peak is over the whole summary. `--in-memory`: 0.2.0's path.
"""

from __future__ import annotations

import argparse
import heapq
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

CHUNKS_PER_REPLY = 128
USERS = 64
RAMP_S, WARMUP_S, WINDOW_S = 60.0, 30.0, 5.0


# --- the synthetic point (child process) ----------------------------------------------------------


def write_point(out_dir: Path, chunks: int, seed: int, chunk_tokens: bool = False) -> dict:
    """Write the point's records.jsonl into ``out_dir``; return its span and counts."""
    from tokenbench.records import Outcome, RequestRecord, TokenSource
    from tokenbench.rundir import RunWriter

    rng = np.random.default_rng(seed)
    n_ok = max(1, chunks // CHUNKS_PER_REPLY)
    n_fail = n_ok // 100
    total = n_ok + n_fail
    # 0 ok, 1 stream_error (partial), 2 http_error, 3 timeout (partial), 4 no_output
    kind = np.zeros(total, dtype=np.int8)
    kind[rng.choice(total, n_fail, replace=False)] = rng.integers(1, 5, n_fail)
    n_chunks = np.full(total, CHUNKS_PER_REPLY)
    partial = (kind == 1) | (kind == 3)
    n_chunks[partial] = rng.integers(1, CHUNKS_PER_REPLY, int(partial.sum()))
    n_chunks[(kind == 2) | (kind == 4)] = 0
    ttft = 0.05 + rng.lognormal(np.log(0.1), 0.5, total)
    gaps = rng.gamma(4.0, 0.005, (total, CHUNKS_PER_REPLY))
    gaps[:, 0] = 0.0
    gaps[rng.random(gaps.shape) < 0.03] = 0.0  # several events in one read
    offsets = np.cumsum(gaps, axis=1)  # chunk k after the first, relative to it
    del gaps

    user_start = np.arange(USERS) * (RAMP_S / USERS)  # the ramp: users start one after another
    # Each request goes to the user free first (a closed loop); the load ends just after the
    # last request is sent: what is then still in flight is cancelled.
    free = [(float(t), u) for u, t in enumerate(user_start)]
    heapq.heapify(free)
    user = np.empty(total, dtype=np.int64)
    sent = np.empty(total)
    closed = np.empty(total)
    for i in range(total):
        t, u = heapq.heappop(free)
        s = t + 0.0005
        user[i], sent[i] = u, s
        k = kind[i]
        last = s + ttft[i] + offsets[i, n_chunks[i] - 1] if n_chunks[i] else s
        closed[i] = (
            last + 0.0003
            if k == 0
            else last + 0.001
            if k == 1
            else s + 0.005
            if k == 2
            else last + 5.0
            if k == 3
            else s + 0.2
        )
        heapq.heappush(free, (float(closed[i]), u))
    load_end = float(sent.max()) + 0.001
    point_end = load_end + 0.01
    writer = RunWriter(out_dir)
    written = {"records": 0, "chunks": 0, "ok": 0}
    t0 = time.perf_counter()
    for i in range(total):
        s = float(sent[i])
        n = int(n_chunks[i])
        times = (s + ttft[i] + offsets[i, :n]).tolist() if n else []
        k = int(kind[i])
        cancelled = closed[i] > load_end  # in flight when the load ended
        if cancelled:
            times = [t for t in times if t < load_end]
        rec = RequestRecord(
            point=0,
            id=i,
            scheduled_s=s - 0.0002,
            sent_s=s,
            chunk_times_s=times,
            user=int(user[i]),
            response_id=f"chatcmpl-{seed:04x}{i:012x}",
            dataset_prompt_tokens=512,
            status=200,
        )
        if cancelled:
            rec.outcome, rec.closed_s, rec.error = Outcome.CANCELLED, load_end, "in flight when the run stopped"
        elif k == 0:
            rec.outcome, rec.closed_s, rec.end_marker = Outcome.OK, float(closed[i]), True
            stop = i % 2 == 0
            rec.finish_reason = "stop" if stop else "length"
            rec.output_tokens = rec.server_output_tokens = n + 1 if stop else n
            rec.output_tokens_source = TokenSource.SERVER
            rec.prompt_tokens = 512
            if chunk_tokens:  # usage on every chunk: 1-4 tokens a chunk (per-token ITL, fluidity)
                rec.chunk_tokens = rng.integers(1, 5, n).tolist()
                rec.first_chunk_tokens = rec.chunk_tokens[0]
        elif k == 2:
            rec.status, rec.outcome, rec.closed_s = 500, Outcome.HTTP_ERROR, float(closed[i])
            rec.error = 'HTTP 500: {"error": "internal"}'
        else:
            rec.outcome, rec.closed_s = (
                (Outcome.STREAM_ERROR, Outcome.TIMEOUT, Outcome.NO_OUTPUT)[(1, 3, 4).index(k)],
                float(closed[i]),
            )
            rec.error = "synthetic failure"
        if times:
            rec.end_s = times[-1]
            if rec.output_tokens is None:
                rec.output_tokens, rec.output_tokens_source = len(times), TokenSource.CHUNKS
        writer.write_record(rec)
        written["records"] += 1
        written["chunks"] += len(times)
        written["ok"] += rec.outcome is Outcome.OK
    writer.close()
    seconds = time.perf_counter() - t0
    return {
        **written,
        "write_s": seconds,
        "start_s": 0.0,
        "ramp_end_s": RAMP_S,
        "window_start_s": RAMP_S + WARMUP_S,
        "load_end_s": load_end,
        "end_s": point_end,
        "user_spans": [(float(a), load_end) for a in user_start],
        "bytes": (out_dir / "records.jsonl").stat().st_size,
    }


# --- measuring ------------------------------------------------------------------------------------


class Peak:
    """The process's RSS, sampled every 5 ms while a stage runs."""

    def __init__(self) -> None:
        self._proc = psutil.Process()
        self.peak = 0

    def __enter__(self) -> Peak:
        self._stop = threading.Event()
        self.peak = self._proc.memory_info().rss
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)


def rss() -> int:
    return psutil.Process().memory_info().rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=10_000_000, help="chunks of the ok replies (128 each)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dump", type=Path, help="write summarize_point's and timeseries' results here")
    parser.add_argument(
        "--profile", choices=("summarize", "timeseries", "read", "stream"), help="run this stage under pyinstrument"
    )
    parser.add_argument(
        "--in-memory", action="store_true", help="read every record whole first (0.2.0's path), to compare"
    )
    parser.add_argument("--chunk-tokens", action="store_true", help="ok replies carry counted tokens per chunk")
    parser.add_argument("--write", type=Path, help=argparse.SUPPRESS)  # the child: write the point here
    args = parser.parse_args()
    if args.write is not None:
        print(json.dumps(write_point(args.write, args.chunks, args.seed, args.chunk_tokens)))
        return

    import tokenbench
    from tokenbench import metrics
    from tokenbench.config.slo import SLOConfig
    from tokenbench.rundir import RecordSlice, read_records

    print(
        f"tokenbench from {Path(tokenbench.__file__).parent}, python {sys.version.split()[0]}, numpy {np.__version__}"
    )
    with tempfile.TemporaryDirectory(prefix="tb-summarize-") as tmp:
        run_dir = Path(tmp) / "run"
        child = subprocess.run(
            [sys.executable, __file__, "--write", str(run_dir), "--chunks", str(args.chunks), "--seed", str(args.seed)]
            + (["--chunk-tokens"] if args.chunk_tokens else []),
            check=True,
            capture_output=True,
            text=True,
        )
        point = json.loads(child.stdout.strip().splitlines()[-1])
        chunks = point["chunks"]
        print(
            f"point: {point['records']:,} records ({point['ok']:,} ok), {chunks:,} chunks, "
            f"{point['end_s']:.0f} s, records.jsonl {point['bytes'] / 1e6:.0f} MB"
        )
        rows = [("write records.jsonl (child process)", point["write_s"], chunks, None, None)]

        def stage(name, fn):
            profiler = None
            if args.profile and args.profile in name:
                from pyinstrument import Profiler

                profiler = Profiler(interval=0.001)
                profiler.start()
            with Peak() as peak:
                t0 = time.perf_counter()
                out = fn()
                seconds = time.perf_counter() - t0
            if profiler is not None:
                profiler.stop()
                print(profiler.output_text(unicode=True, color=False, show_all=False))
            rows.append((name, seconds, chunks, rss(), peak.peak))
            return out

        before = rss()
        window = metrics.Window(point["window_start_s"], point["load_end_s"])
        span = metrics.PointSpan(window, open_loop=False, end_s=point["end_s"])
        slo = SLOConfig(ttft_s=0.5, tpot_s=0.05)
        user_spans = [tuple(s) for s in point["user_spans"]]
        if args.in_memory:  # every record whole in memory, then the summaries (0.2.0's path)
            records = stage("read records.jsonl (read_records)", lambda: read_records(run_dir))
            chunks_tally = None
            series_tokens = None
        else:  # the run's path (derive.point_result): streamed and tallied, chunks dropped
            tally = metrics.ChunkTally(span, metrics.series_edges(point["start_s"], point["end_s"], WINDOW_S))
            path = run_dir / "records.jsonl"
            records = stage("stream + tally records.jsonl", lambda: tally.consume(RecordSlice(path, [(0, None)])))
            chunks_tally, series_tokens = tally, tally.series_tokens
        held = rss() - before
        summary = stage("summarize_point", lambda: metrics.summarize_point(records, span, slo, chunks_tally))
        series = stage(
            "timeseries (5 s windows)",
            lambda: metrics.timeseries(
                records,
                point["start_s"],
                point["end_s"],
                point["ramp_end_s"],
                user_spans,
                WINDOW_S,
                tokens=series_tokens,
            ),
        )
        peak_all = max(r[4] for r in rows[1:])

    summarize_s = sum(r[1] for r in rows[2:])
    print()
    print(f"{'stage':<38}{'seconds':>9}{'chunks':>13}{'MB RSS':>9}{'MB peak':>9}")
    for name, seconds, n, after, peak in rows:
        mb = lambda b: f"{b / 2**20:9.0f}" if b is not None else f"{'':9}"  # noqa: E731
        print(f"{name:<38}{seconds:9.2f}{n:13,}{mb(after)}{mb(peak)}")
    print(f"{'summarize_point + timeseries':<38}{summarize_s:9.2f}{chunks:13,}")
    print(f"{'read + summarize + timeseries':<38}{summarize_s + rows[1][1]:9.2f}{chunks:13,}")
    print(
        f"records held after reading: {held / 2**20:.0f} MB RSS = {held / chunks:.1f} bytes per chunk "
        f"({len(records):,} records, {len(series)} windows)"
    )
    print(
        f"peak over the whole summary: {(peak_all - before) / 2**20:.0f} MB above the start = "
        f"{(peak_all - before) / chunks:.1f} bytes per chunk (target <= 16)"
    )
    if args.dump is not None:
        dump = {"summary": summary.model_dump(mode="json"), "timeseries": [w.model_dump(mode="json") for w in series]}
        args.dump.write_text(json.dumps(dump, indent=1))


if __name__ == "__main__":
    main()
