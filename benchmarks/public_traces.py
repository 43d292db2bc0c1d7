"""Public traces replayed against `tokenbench mock`: what reading and replaying each costs (a program, not a test).

For each case (CASES: a trace and a command line), runs `python -m tokenbench run --dataset trace` in a
process of its own against one mock started here on 127.0.0.1, and prints: the rows in the file, the
requests sent, the time to the first send (from the run's process start), the run's peak RSS, the
replay lag (sent_s - scheduled_s over the requests, from records.jsonl: p50 / p99 / max ms), the
images carried (the multimodal case) and the run's wall time. A case that fails is a row saying so
("fails: <its error>", "over N s", "over N MB"), never the end of the benchmark.

The real traces come from `.cache/traces/` (scripts/get_public_traces.sh fills it from local git
mirrors; a missing one is skipped with a line saying how to get it) or --data DIR. The Azure 2024
week-long and 2025 multimodal formats are generated here (seeded, their token counts drawn from the
2023 conversation trace's rows) into the same folder and reused when present.

--src DIR runs `tokenbench run` from another checkout's src (first on its PYTHONPATH; the same venv,
so the same dependencies): a before/after comparison is two runs, each with --json, then --compare.
Run it alone: the cases time start-up and memory, and two measurements on two cores disturb each other.

    python benchmarks/public_traces.py                                   # every case, this checkout
    python benchmarks/public_traces.py --only azure23-conv,azure25-mm    # a quick look
    python benchmarks/public_traces.py --src ../before/src --label before --json before.json
    python benchmarks/public_traces.py --label after --json after.json
    python benchmarks/public_traces.py --compare before.json after.json  # side by side
    python benchmarks/public_traces.py --week-rows 16803695              # the real week file's size
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from tokenbench.common.procs import child_preexec, free_port, stop, wait_http

try:
    import psutil  # type: ignore[import-untyped]  # its stubs (types-psutil) are not a dependency
except ImportError:  # a dependency of tokenbench: missing only from a broken venv (then getrusage gives the peak)
    psutil = None

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / ".cache" / "traces"
PYCACHE = ROOT / ".cache" / "public_traces" / "pycache"  # bytecode of every checkout run, outside them
GET = "scripts/get_public_traces.sh MOONCAKE_GIT_DIR AZURE_GIT_DIR (see its header for where each file comes from)"
SEED = 0
WEEK_S = 7 * 86400
MM_ROWS = 2000
MM_MEAN_GAP_S = 0.3  # 2,000 rows over ~10 minutes: ~100 in the 30 s window
# The mock: short first tokens, 1 ms between chunks of 16 tokens: a 2,000-token Mooncake reply takes
# 130 ms, so the mock is never what the replay waits for; at most 128 replies generate at once.
MOCK_ARGS = ("--ttft-ms", "5", "--itl-ms", "1", "--tokens-per-chunk", "16", "--max-streams", "128")
# Every run: fixed output lengths (the trace's), no live view, bounded waits. There is no flag to
# skip a report: `tokenbench run` renders none (`tokenbench report` does, after the fact).
RUN_ARGS = ("--ignore-eos", "--no-live", "--drain-timeout", "30", "--request-timeout", "60")


@dataclass(frozen=True)
class Case:
    name: str
    file: str  # in the data folder; {rows}: --week-rows
    args: tuple[str, ...]
    api: str = "completions"
    generated: str | None = None  # "week", "week-gz", "multimodal": written here when missing
    what: str = ""


ONE_HOUR_FAST = ("--replay-speed", "100", "--max-requests", "300")
FIRST_MINUTE = ("--replay-speed", "10", "--replay-end", "60")
DAY_TWO = ("--replay-start", "86400", "--replay-end", "86430")
CASES: tuple[Case, ...] = (
    Case("mooncake-conv", "mooncake_conversation_trace.jsonl", ONE_HOUR_FAST, what="Mooncake conversation"),
    Case("mooncake-synth", "mooncake_synthetic_trace.jsonl", ONE_HOUR_FAST, what="Mooncake synthetic"),
    Case("azure23-conv", "AzureLLMInferenceTrace_conv.csv", FIRST_MINUTE, what="Azure 2023 conversation"),
    Case("azure23-code", "AzureLLMInferenceTrace_code.csv", FIRST_MINUTE, what="Azure 2023 code"),
    Case("azure24-week", "azure2024_week_{rows}.csv", DAY_TWO, generated="week", what="Azure 2024 week (generated)"),
    Case("azure24-week-gz", "azure2024_week_{rows}.csv.gz", DAY_TWO, generated="week-gz", what="the same, gzipped"),
    Case(
        "azure25-mm",
        f"azure2025_multimodal_{MM_ROWS}.csv",
        ("--replay-speed", "10", "--replay-end", "30"),
        api="chat",
        generated="multimodal",
        what="Azure 2025 multimodal (generated)",
    ),
)
CONV_2023 = "AzureLLMInferenceTrace_conv.csv"  # the token counts the generated traces draw from


@dataclass
class Measured:
    """One case's row; ``status`` is "ok", "fails: ...", "over N s", "over N MB" or "skipped: ..."."""

    name: str
    status: str
    command: list[str] = field(default_factory=list)
    rows_in_file: int | None = None
    rows_used: int | None = None  # the run's own count of rows in its replay window (config.json)
    requests: int | None = None  # records written
    sent: int | None = None  # records with a send time
    first_send_s: float | None = None
    peak_rss_mb: float | None = None
    rss_by: str | None = None
    rss_polled_mb: float | None = None  # psutil's largest reading (every 0.1 s): a cross-check
    lag_p50_ms: float | None = None
    lag_p99_ms: float | None = None
    lag_max_ms: float | None = None
    images: int | None = None  # requests that carried an image
    wall_s: float | None = None
    exit_code: int | None = None
    load_1m: float | None = None  # the machine's load average as the case started (noise)
    mock_cpu_s: float | None = None  # the mock's CPU time during the case (its /tokenize, its replies)


# --- the generated traces ------------------------------------------------------------------------


def _conv_tokens(data: Path) -> tuple[np.ndarray, np.ndarray]:
    """ContextTokens, GeneratedTokens of every row of the Azure 2023 conversation trace."""
    raw = np.loadtxt(data / CONV_2023, delimiter=",", skiprows=1, usecols=(1, 2), dtype=np.int64)
    return raw[:, 0], raw[:, 1]


def _draw_tokens(data: Path, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    ctx, gen = _conv_tokens(data)
    pick = rng.integers(0, len(ctx), n)  # whole rows: the pairs keep their correlation
    return ctx[pick], gen[pick]


def write_week(path: Path, data: Path, rows: int) -> None:
    """The 2024 week-long files' layout: 7 days of rows in order, exponential gaps, microsecond
    times with a +00:00 offset; a few in a thousand on a whole second, written with no fraction (as
    in the real files: rows drawn 1 in 100, where the whole second is not before the row above)."""
    rng = np.random.default_rng(SEED)
    gaps = rng.exponential(1.0, rows)
    us = np.floor(np.cumsum(gaps) / gaps.sum() * (WEEK_S - 1) * 1e6).astype(np.int64)  # inside the week
    whole = us - us % 1_000_000
    prev = np.concatenate(([0], us[:-1]))
    on_second = (rng.random(rows) < 0.01) & (whole >= prev)  # never before the row above
    us = np.where(on_second, whole, us)
    ctx, gen = _draw_tokens(data, rng, rows)
    start = np.datetime64("2024-05-12T00:00:00", "us")
    tmp = path.with_suffix(path.suffix + ".part")
    with tmp.open("w", newline="") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for lo in range(0, rows, 500_000):
            hi = min(rows, lo + 500_000)
            times = start + us[lo:hi]
            text = np.datetime_as_string(times, unit="us")
            bare = np.datetime_as_string(times, unit="s")
            stamps = np.where(on_second[lo:hi], bare, text)
            f.writelines(
                f"{t.replace('T', ' ')}+00:00,{c},{g}\n"
                for t, c, g in zip(stamps.tolist(), ctx[lo:hi].tolist(), gen[lo:hi].tolist())
            )
    tmp.replace(path)


def write_gz(path: Path, plain: Path) -> None:
    tmp = path.with_suffix(path.suffix + ".part")
    with plain.open("rb") as src, gzip.open(tmp, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    tmp.replace(path)


def write_multimodal(path: Path, data: Path, rows: int = MM_ROWS) -> None:
    """The 2025 multimodal trace's layout: ISO times with milliseconds and Z, NumImages before
    the token counts; half the rows text only, the rest 1-4 images."""
    rng = np.random.default_rng(SEED + 1)
    ms = np.floor(np.cumsum(rng.exponential(MM_MEAN_GAP_S, rows)) * 1e3).astype(np.int64)
    images = np.where(rng.random(rows) < 0.5, 0, rng.integers(1, 5, rows))
    ctx, gen = _draw_tokens(data, rng, rows)
    times = np.datetime_as_string(np.datetime64("2024-10-15T12:00:00", "ms") + ms, unit="ms")
    tmp = path.with_suffix(path.suffix + ".part")
    with tmp.open("w", newline="") as f:
        f.write("TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n")
        f.writelines(f"{t}Z,{i},{c},{g}\n" for t, i, c, g in zip(times.tolist(), images, ctx, gen))
    tmp.replace(path)


def ensure_trace(case: Case, data: Path, week_rows: int, console: Console) -> Path | str:
    """The case's trace file (written first when it is a generated one), or why it is skipped."""
    path = data / case.file.format(rows=week_rows)
    if path.is_file():
        return path
    if case.generated is None:
        return f"skipped: no {path}: get it with {GET}"
    if not (data / CONV_2023).is_file():
        return f"skipped: generating it draws token counts from {data / CONV_2023}: get it with {GET}"
    t0 = time.perf_counter()
    if case.generated == "multimodal":
        write_multimodal(path, data)
    else:
        plain = data / f"azure2024_week_{week_rows}.csv"
        if not plain.is_file():
            write_week(plain, data, week_rows)
        if case.generated == "week-gz":
            write_gz(path, plain)
    console.print(f"[dim]wrote {path} ({path.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s[/]")
    return path


def count_rows(path: Path) -> int:
    """Data rows: lines (a last one without a newline too), less a CSV's header."""
    n, head, last = 0, b"", b"\n"
    with gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            n, head, last = n + block.count(b"\n"), head or block[:64], block[-1:]
    n += last != b"\n"
    return n - (0 if head.lstrip().startswith(b"{") else 1)


# --- one case ------------------------------------------------------------------------------------


def _run_env(src: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    # Bytecode is written, but under .cache/ (never into the checkout measured, nor site-packages):
    # without it every run would compile its imports again (the machine may set PYTHONDONTWRITEBYTECODE).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    env["TOKENBENCH_COMPILED"] = "0"  # the sources of each checkout, never a build in place
    env["COLUMNS"] = "160"
    return env


# The last resort: a fresh Python whose only child is the run, writing the largest RSS of its
# children (the kernel's, as GNU time's) in GNU time's words.
_GETRUSAGE = (
    "import resource, subprocess, sys; rc = subprocess.call(sys.argv[2:]); "
    "kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss; "
    "open(sys.argv[1], 'w').write(f'Maximum resident set size (kbytes): {kb}\\n'); sys.exit(rc)"
)


def _rss_wrapper(cmd: list[str], out: Path) -> tuple[list[str], str]:
    """The command wrapped to give its peak RSS in ``out``, and how: GNU time's maximum resident
    set size where /usr/bin/time is; else psutil's polling (no wrapper); else getrusage."""
    if Path("/usr/bin/time").is_file():
        return ["/usr/bin/time", "-v", "-o", str(out), *cmd], "time -v"
    if psutil is not None:
        return cmd, "psutil (every 0.1 s)"
    return [sys.executable, "-c", _GETRUSAGE, str(out), *cmd], "getrusage(RUSAGE_CHILDREN)"


def _peak_from_time(out: Path) -> float | None:
    try:
        for line in out.read_text().splitlines():
            if "Maximum resident set size" in line:
                return int(line.rsplit(":", 1)[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


def _tree_rss_mb(pid: int) -> float:
    """The largest RSS of one process in the tree under ``pid`` (the run, not the wrapper)."""
    if psutil is None:
        return 0.0
    best = 0.0
    try:
        proc = psutil.Process(pid)
        tree = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return best
    for p in tree:
        try:
            best = max(best, p.memory_info().rss / 2**20)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return best


def _error_line(out: Path, err: Path) -> str:
    """The run's error in one line: a traceback's last line, else the first line it printed."""
    for path in (err, out):
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith(("Command exited", "Command terminated"))]
        if not lines:
            continue
        if any(ln.startswith("Traceback") for ln in lines):
            return lines[-1][:160]
        return lines[0][:160]
    return "no output"


def _records(run_dir: Path) -> Iterator[dict[str, Any]]:  # Any: records.jsonl's JSON
    path = run_dir / "records.jsonl"
    if not path.is_file():
        return
    with path.open() as f:
        for line in f:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:  # a blank line, or a last one cut by a stopped run
                continue


def _carried_images(rec: dict[str, Any]) -> bool:  # Any: a record's JSON
    """A record of a request with an image (records.ImageInput: "images"; nested where a layout nests it)."""
    n = rec.get("images")
    nested = rec.get("image_input")
    if n is None and isinstance(nested, dict):
        n = nested.get("images")
    return bool(n)


def _clock_origin(run_dir: Path) -> float | None:
    for name in ("results.json", "config.json"):
        try:
            return float(json.loads((run_dir / name).read_text())["clock"]["origin_monotonic_s"])
        except (OSError, KeyError, TypeError, ValueError):
            continue
    return None


def _rows_used(run_dir: Path) -> int | None:
    try:
        info = json.loads((run_dir / "config.json").read_text())["dataset_info"]
        return int(info["trace"]["num_rows_used"])
    except (OSError, KeyError, TypeError, ValueError):
        return None


def _read_run(m: Measured, run_dir: Path, t0: float) -> None:
    records = list(_records(run_dir))
    sent = [r for r in records if r.get("sent_s") is not None]
    m.requests, m.sent, m.rows_used = len(records), len(sent), _rows_used(run_dir)
    m.images = sum(1 for r in records if _carried_images(r))
    origin = _clock_origin(run_dir)
    if sent and origin is not None:  # perf_counter's clock (CLOCK_MONOTONIC): the same in every process
        m.first_send_s = origin + min(r["sent_s"] for r in sent) - t0
    if sent:
        lag = np.array([r["sent_s"] - r["scheduled_s"] for r in sent]) * 1e3
        m.lag_p50_ms, m.lag_p99_ms = float(np.percentile(lag, 50)), float(np.percentile(lag, 99))
        m.lag_max_ms = float(lag.max())


def _cpu_s(pid: int) -> float | None:
    if psutil is None:
        return None
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def run_case(case: Case, trace: Path, url: str, args: argparse.Namespace, work: Path) -> Measured:
    run_dir, out, err, rss_file = work / "run", work / "stdout", work / "stderr", work / "rss"
    cmd = [sys.executable, "-m", "tokenbench", "run", "--url", url, "--api", case.api]
    cmd += ["--dataset", "trace", "--dataset-path", str(trace), *case.args, *RUN_ARGS, "--out", str(run_dir)]
    m = Measured(case.name, "ok", command=cmd, load_1m=os.getloadavg()[0])
    wrapped, m.rss_by = _rss_wrapper(cmd, rss_file)
    polled, over = 0.0, ""
    with out.open("wb") as fo, err.open("wb") as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            wrapped, stdout=fo, stderr=fe, env=_run_env(args.src), start_new_session=True, preexec_fn=child_preexec()
        )
        try:
            while proc.poll() is None:
                polled = max(polled, _tree_rss_mb(proc.pid))
                if time.perf_counter() - t0 > args.timeout:
                    over = f"over {args.timeout:g} s"
                elif polled > args.max_rss_mb:
                    over = f"over {args.max_rss_mb:g} MB"
                if over:
                    break
                time.sleep(0.1)
        finally:
            stop(proc, grace_s=10, group=True)  # the run's process group: the wrapper, the run, its sampler
        m.wall_s = time.perf_counter() - t0
    m.exit_code = proc.returncode
    m.peak_rss_mb, m.rss_polled_mb = _peak_from_time(rss_file), polled or None
    if m.peak_rss_mb is None and polled:  # no wrapper, or it was stopped before it wrote
        m.peak_rss_mb, m.rss_by = polled, "psutil (every 0.1 s)"
    _read_run(m, run_dir, t0)
    if over:
        m.status = over
    elif proc.returncode != 0:
        m.status = f"fails: {_error_line(out, err).replace(str(trace), trace.name)}"
    return m


# --- the whole benchmark -------------------------------------------------------------------------


def _which_tokenbench(src: Path | None) -> str:
    """Where the runs import tokenbench from (checked, so --src cannot silently miss)."""
    probe = [sys.executable, "-c", "import tokenbench; print(tokenbench.__file__)"]
    got = subprocess.run(probe, env=_run_env(src), capture_output=True, text=True, check=True).stdout.strip()
    if src is not None and not Path(got).resolve().is_relative_to(src.resolve()):
        sys.exit(f"--src {src}: the run would import tokenbench from {got}")
    return got


def _commit(src: Path | None) -> str | None:
    """The commit of the src measured, "+" when its files there differ from it (None: not git)."""
    where = ["git", "-C", str(src if src is not None else ROOT / "src")]
    try:
        head = subprocess.run([*where, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
        dirty = subprocess.run([*where, "status", "--porcelain", "--", "."], capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.strip() + ("+" if dirty.strip() else "")


def _warm_up(url: str, src: Path | None, work: Path) -> None:
    """One small replay first, so that no case pays for compiling the imports into PYCACHE."""
    sample = ROOT / "tests" / "fixtures" / "traces" / "mooncake_conversation.first400.jsonl"
    cmd = [sys.executable, "-m", "tokenbench", "run", "--url", url, "--api", "completions", "--dataset", "trace"]
    cmd += ["--dataset-path", str(sample), "--replay-speed", "1000", "--max-requests", "5", *RUN_ARGS]
    done = subprocess.run([*cmd, "--out", str(work)], env=_run_env(src), capture_output=True, timeout=300, check=False)
    if done.returncode != 0:
        print(f"warm-up run exited {done.returncode}: the first case may pay for compiling", file=sys.stderr)


def measure(args: argparse.Namespace, console: Console) -> dict[str, Any]:  # Any: the --json document
    data: Path = args.data
    data.mkdir(parents=True, exist_ok=True)
    cases = [c for c in CASES if not args.only or c.name in args.only]
    traces = {c.name: ensure_trace(c, data, args.week_rows, console) for c in cases}
    doc: dict[str, Any] = {
        "label": args.label,
        "src": str(args.src) if args.src else None,
        "tokenbench": _which_tokenbench(args.src),
        "commit": _commit(args.src),
        "python": sys.version.split()[0],
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "load_1m_at_start": os.getloadavg()[0]},
        "mock_args": list(MOCK_ARGS),
        "run_args": list(RUN_ARGS),
        "week_rows": args.week_rows,
        "started_unix_s": time.time(),
        "cases": [],
    }
    port = free_port()
    mock_cmd = [sys.executable, "-m", "tokenbench", "mock", "--port", str(port), *MOCK_ARGS]
    mock = subprocess.Popen(mock_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=child_preexec())
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/health", 30.0, mock)
        with tempfile.TemporaryDirectory(prefix="public-traces-") as tmp:
            _warm_up(url, args.src, Path(tmp) / "warm-up")
            for case in cases:
                trace = traces[case.name]
                if isinstance(trace, str):
                    m = Measured(case.name, trace)
                    console.print(f"{case.name}: {trace}")
                else:
                    work = Path(tmp) / case.name
                    work.mkdir()
                    console.print(f"[dim]{case.name}: {' '.join(case.args)} ...[/]")
                    cpu0 = _cpu_s(mock.pid)
                    m = run_case(case, trace, url, args, work)
                    cpu1 = _cpu_s(mock.pid)
                    m.mock_cpu_s = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
                    m.rows_in_file = count_rows(trace)
                    if args.keep_runs is not None:
                        shutil.copytree(work, args.keep_runs / args.label / case.name, dirs_exist_ok=True)
                doc["cases"].append(asdict(m))
    finally:
        stop(mock, grace_s=10)
    doc["host"]["load_1m_at_end"] = os.getloadavg()[0]
    return doc


# --- tables --------------------------------------------------------------------------------------


def _n(x: float | int | None, fmt: str = "{:,.0f}") -> str:
    return "-" if x is None else fmt.format(x)


def _lag(c: dict[str, Any]) -> str:  # Any: a case of the --json document
    if c["lag_p50_ms"] is None:
        return "-"
    return f"{c['lag_p50_ms']:.1f} / {c['lag_p99_ms']:.1f} / {c['lag_max_ms']:.1f}"


def _status(text: str) -> str:
    return "[green]ok[/]" if text == "ok" else f"[red]{text}[/]" if not text.startswith("skipped") else text


def table(doc: dict[str, Any]) -> Table:  # Any: the --json document
    t = Table(title=f"public traces against the mock: {doc['label']} (tokenbench from {doc['tokenbench']})")
    for col in ("case", "rows in file", "sent", "first send s", "peak RSS MB", "lag p50/p99/max ms", "images"):
        t.add_column(col, justify="right")
    t.add_column("wall s", justify="right")
    t.add_column("mock CPU s", justify="right")
    t.add_column("load", justify="right")
    t.add_column("status", overflow="fold", max_width=48)
    for c in doc["cases"]:
        t.add_row(
            c["name"],
            _n(c["rows_in_file"]),
            _n(c["sent"]),
            _n(c["first_send_s"], "{:.2f}"),
            _n(c["peak_rss_mb"]),
            _lag(c),
            _n(c["images"]) if c["name"] == "azure25-mm" else "",
            _n(c["wall_s"], "{:.1f}"),
            _n(c["mock_cpu_s"], "{:.1f}"),
            _n(c["load_1m"], "{:.1f}"),
            _status(c["status"]),
        )
    return t


def _pair(a: float | None, b: float | None, fmt: str) -> str:
    if a is None or b is None:
        return f"{_n(a, fmt)} -> {_n(b, fmt)}"
    ratio = f" ({b / a:.2f}x)" if a > 0 else ""
    return f"{fmt.format(a)} -> {fmt.format(b)}{ratio}"


def compare_table(before: dict[str, Any], after: dict[str, Any]) -> Table:  # Any: two --json documents
    t = Table(title=f"public traces: {before['label']} -> {after['label']}")
    for col in ("case", "rows", "sent", "first send s", "peak RSS MB", "lag p99 ms", "images", "wall s"):
        t.add_column(col, justify="right")
    t.add_column("status", overflow="fold", max_width=40)
    theirs = {c["name"]: c for c in after["cases"]}
    names = [c["name"] for c in before["cases"]] + [n for n in theirs if n not in {c["name"] for c in before["cases"]}]
    mine = {c["name"]: c for c in before["cases"]}
    empty: dict[str, Any] = {k: None for k in Measured.__dataclass_fields__} | {"status": "not run"}
    for name in names:
        a, b = mine.get(name, empty), theirs.get(name, empty)
        t.add_row(
            name,
            f"{_n(a['rows_in_file'])} -> {_n(b['rows_in_file'])}",
            f"{_n(a['sent'])} -> {_n(b['sent'])}",
            _pair(a["first_send_s"], b["first_send_s"], "{:.2f}"),
            _pair(a["peak_rss_mb"], b["peak_rss_mb"], "{:.0f}"),
            _pair(a["lag_p99_ms"], b["lag_p99_ms"], "{:.1f}"),
            f"{_n(a['images'])} -> {_n(b['images'])}" if name == "azure25-mm" else "",
            _pair(a["wall_s"], b["wall_s"], "{:.1f}"),
            _status(a["status"]) if a["status"] == b["status"] else f"{_status(a['status'])} -> {_status(b['status'])}",
        )
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of the traces (default .cache/traces)")
    parser.add_argument("--src", type=Path, help="a checkout's src/: the runs import tokenbench from it")
    parser.add_argument("--label", default="now", help="names this run's measurements")
    parser.add_argument("--json", type=Path, help="write the measurements here (for --compare)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"), help="print two --json files")
    parser.add_argument("--only", type=lambda s: s.split(","), help="cases to run, comma-separated names")
    parser.add_argument("--week-rows", type=int, default=2_000_000, help="rows of the generated 2024 week trace")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a case may take before it is stopped")
    parser.add_argument("--max-rss-mb", type=float, default=6144.0, help="a run's RSS at which it is stopped")
    parser.add_argument("--keep-runs", type=Path, help="copy each case's run directory and output under DIR/LABEL/")
    args = parser.parse_args()
    console = Console(width=200)
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        console.print(compare_table(before, after))
        return
    if args.only and (unknown := set(args.only) - {c.name for c in CASES}):
        parser.error(f"unknown case(s) {', '.join(sorted(unknown))}; the cases: {', '.join(c.name for c in CASES)}")
    doc = measure(args, console)
    console.print(table(doc))
    for c in CASES:
        if not args.only or c.name in args.only:
            console.print(f"[dim]{c.name} ({c.what}): --api {c.api} {' '.join(c.args)}[/]", highlight=False)
    console.print(f"[dim]mock: {' '.join(MOCK_ARGS)}; every run: {' '.join(RUN_ARGS)}[/]", highlight=False)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
        console.print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
