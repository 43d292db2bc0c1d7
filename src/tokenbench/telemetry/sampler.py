"""The sampler: a child process that scrapes a server's /metrics (and NVML) every interval and
appends one JSON line per scrape to ``samples.jsonl`` in the run directory, flushed as it goes.

Why a process: parsing a vLLM /metrics page (~300 samples with histograms) takes milliseconds of
pure-Python CPU; inside the load generator's event loop that would delay chunk timestamps.
Timestamps use ``time.perf_counter()`` minus the run's origin, as records do: on Linux it is
CLOCK_MONOTONIC, one clock for every process on the machine, so samples and records share an axis.

File lines: first ``{"kind": "header", ...}`` (URL, backend, interval, GPU availability), then
``{"kind": "scrape", "t_s", "ok", "scrape_s", "values", "raw", "gpu"}``; a failed scrape is
``"ok": false`` with its ``error`` (noted, never fatal). A fleet's replicas (``--replica
NAME=URL``) are scraped in the same pass, after the router: ``"replicas": {NAME: {"ok", "values",
"raw", "scrape_s"} or {"ok": false, "error"}}`` on the scrape's line (one t_s for the whole pass;
each replica's ``scrape_s`` is from that t_s to its answer). A launched server's processes
(``--server-pid``, repeat: the engine, a layer in front of it, a fleet's replicas and router) are
read at the start of each scrape: ``"server_cpu": {"cpu_s", "processes"}``, the CPU seconds their
trees have used so far (procs.tree_cpu_s; null once none is alive). With a scaler to poll (``--scaler-url``
and ``--scaler-kind``: telemetry/scaler.py), each scrape is followed by one poll of it, its own line
``{"kind": "replicas", "t_s", "ok", "source", "replicas": [{"id", "state"}], "desired", "poll_s"}``
(results.scaling.ReplicaPoll), on the same grid. The run's own events come in through
the sampler's stdin, one JSON object a line, and are written as they are (the file is the run's
timeline, one writer): ``{"kind": "point_start", ...}`` and ``{"kind": "point", ...}`` with a
load point's span (manifest.PointStart and PointEnd), which ``tokenbench recompute`` needs. When stdin closes
(the run ended, or died) the sampler exits.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from tokenbench.common import procs
from tokenbench.common.redact import mask_text
from tokenbench.common.replica_states import SCALER_KINDS
from tokenbench.telemetry.gpu import GPUSampler
from tokenbench.telemetry.prom import MetricNames, flat, normalize, parse
from tokenbench.telemetry.scaler import ScalerTarget, poll_line

if TYPE_CHECKING:  # the sampler's own process never reads them: it copies event lines as they come
    from tokenbench.results.manifest import PointEnd, PointStart
    from tokenbench.results.scaling import ReplicaPoll


class Event(Protocol):
    """One of the run's own events (manifest.PointStart, manifest.PointEnd): its line is its JSON."""

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Fleet:
    """A fleet's replicas, scraped beside its router: each one's name (host:port) and metrics URL,
    and their engine's metric names (None: raw samples only)."""

    replicas: tuple[tuple[str, str], ...] = ()
    names: MetricNames | None = None


def scrape_line(
    url: str,
    names: MetricNames | None,
    origin: float,
    gpu: GPUSampler,
    timeout_s: float,
    fleet: Fleet = Fleet(),
    server_pids: Sequence[int] = (),
) -> dict[str, Any]:
    """One scrape's line (Any: JSON values, the server's metrics as it gave them), its fleet's
    replicas' beside, and the CPU the launched server's processes have used (at t_s)."""
    t = time.perf_counter() - origin
    line: dict[str, Any] = {"kind": "scrape", "t_s": t}
    if server_pids:
        used = procs.tree_cpu_s(server_pids)
        line["server_cpu"] = {"cpu_s": used[0], "processes": used[1]} if used is not None else None
    if url:
        line.update(_scrape(url, names, timeout_s))
        line["scrape_s"] = time.perf_counter() - origin - t
    if fleet.replicas:
        replicas: dict[str, Any] = {}
        for name, replica_url in fleet.replicas:
            replicas[name] = {
                **_scrape(replica_url, fleet.names, timeout_s),
                "scrape_s": time.perf_counter() - origin - t,
            }
        line["replicas"] = replicas
    line["gpu"] = gpu.read()
    return line


def _scrape(url: str, names: MetricNames | None, timeout_s: float) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            text = resp.read().decode("utf-8", errors="replace")
        samples = parse(text)
        return {"ok": True, "values": normalize(samples, names) if names is not None else {}, "raw": flat(samples)}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}


def _exit_now(*_: object) -> None:
    raise SystemExit(0)  # unwinds through stop.wait(), releasing its lock, and closes the file


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    names = MetricNames.from_json(json.loads(args.metric_names)) if args.metric_names else None
    fleet = Fleet(
        tuple(_named_url(r) for r in args.replica),
        MetricNames.from_json(json.loads(args.replica_metric_names)) if args.replica_metric_names else None,
    )
    stop = threading.Event()
    # SIGTERM (procs.stop's fallback, or our parent's death signal) exits at once. Not
    # stop.set(): a handler that takes the Event's lock while the main thread holds it in
    # stop.wait() deadlocks (seen: a sampler that outlived a kill -9 of its run).
    signal.signal(signal.SIGTERM, _exit_now)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the run's to handle: it closes our stdin
    gpu = GPUSampler.open()
    with open(args.out, "a", buffering=1) as out:
        write = _line_writer(out)
        write(json.dumps(_header(args, gpu)))
        wake = threading.Event()
        reader = threading.Thread(target=_copy_events, args=(write, stop, wake), daemon=True)
        reader.start()
        _scrape_until(stop, wake, args, names, gpu, write, fleet)
        reader.join(timeout=1.0)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="tokenbench-sampler")
    ap.add_argument("--metrics-url", default="")
    ap.add_argument("--backend", default=None)
    ap.add_argument("--metric-names", default="", help="the backend profile's MetricNames as JSON")
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--origin", type=float, required=True, help="the run clock's perf_counter origin")
    ap.add_argument("--out", required=True)
    ap.add_argument("--replica", action="append", default=[], help="a fleet's replica, NAME=METRICS_URL (repeat)")
    ap.add_argument("--replica-metric-names", default="", help="the replicas' engine's MetricNames as JSON")
    ap.add_argument("--scaler-url", default="", help="a scaler's API to poll for its replicas (telemetry/scaler.py)")
    ap.add_argument("--scaler-kind", default="ray-serve", choices=SCALER_KINDS)
    ap.add_argument("--server-pid", type=int, action="append", default=[], help="a launched server's process (repeat)")
    return ap.parse_args(argv)


def _named_url(value: str) -> tuple[str, str]:
    name, _, url = value.partition("=")
    return name, url


def _line_writer(out: TextIO) -> Callable[[str], None]:
    """One line at a time from two threads (the scrapes and the run's events)."""
    lock = threading.Lock()

    def write(line: str) -> None:
        with lock:
            out.write(line if line.endswith("\n") else line + "\n")

    return write


def _header(args: argparse.Namespace, gpu: GPUSampler) -> dict[str, Any]:
    header: dict[str, Any] = {
        "kind": "header",
        "metrics_url": mask_text(args.metrics_url) or None,
        "backend": args.backend,
        "interval_s": args.interval,
        "gpu": {"available": gpu.available, "reason": gpu.reason},
    }
    if args.scaler_url:  # only a run polling a scaler
        header["scaler"] = {"kind": args.scaler_kind, "url": mask_text(args.scaler_url)}
    return header


def _copy_events(write: Callable[[str], None], stop: threading.Event, wake: threading.Event) -> None:
    """The run's events, as they come; EOF: the run is over (or dead). A point's end (its
    ``point`` event) wakes the scrapes for one at once: the runner waits for a scrape after the
    point to bracket its counters, and the grid's next one was up to an interval away."""
    for line in sys.stdin:
        if line.strip():
            write(line)
            if _is_point_end(line):
                wake.set()
    stop.set()
    wake.set()


def _is_point_end(line: str) -> bool:
    try:
        event = json.loads(line)
    except ValueError:
        return False
    return isinstance(event, dict) and event.get("kind") == "point"


def _scrape_until(
    stop: threading.Event,
    wake: threading.Event,
    args: argparse.Namespace,
    names: MetricNames | None,
    gpu: GPUSampler,
    write: Callable[[str], None],
    fleet: Fleet,
) -> None:
    """A scrape every interval, on a fixed grid (a slow scrape does not shift the next ones), and
    one more whenever ``wake`` is set (a point ended): the grid stays where it was."""
    next_t = time.perf_counter()
    while not stop.is_set():
        timeout_s = min(5.0, max(args.interval, 0.5))
        line = scrape_line(args.metrics_url, names, args.origin, gpu, timeout_s, fleet, args.server_pid)
        write(json.dumps(line))
        if args.scaler_url:
            write(json.dumps(poll_line(args.scaler_url, args.scaler_kind, args.origin, timeout_s)))
        if time.perf_counter() >= next_t:  # this was the grid's scrape, not an extra one
            next_t += args.interval
        wake.wait(max(0.0, next_t - time.perf_counter()))
        wake.clear()


class JsonlTail:
    """The complete lines appended to a growing file since the last call (a line still being
    written is left for the next one)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._offset = 0

    def new_lines(self) -> list[bytes]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        complete = data.rfind(b"\n") + 1
        self._offset += complete
        return data[:complete].splitlines()


class SamplesFile:
    """Reads a samples file as it grows: each call parses only the lines appended since the last
    one (the runner looks after every point and polls while waiting for a bracketing scrape; a
    long run's file is megabytes of raw metrics). A line still being written is left for later."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tail = JsonlTail(path)
        # Any: each line's JSON as written (a scrape's values are the server's); the run's own
        # point events are typed by point_starts and point_ends
        self._scrapes: list[dict[str, Any]] = []
        self._header: dict[str, Any] | None = None
        self._events: list[dict[str, Any]] = []

    def _refresh(self) -> None:
        for line in self._tail.new_lines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue  # a torn line (the writer was killed mid-write)
            kind = obj.get("kind")
            if kind == "scrape":
                self._scrapes.append(obj)
            elif kind == "header" and self._header is None:
                self._header = obj
            elif kind is not None:
                self._events.append(obj)

    def scrapes(self) -> list[dict[str, Any]]:
        self._refresh()
        return self._scrapes

    def header(self) -> dict[str, Any] | None:
        self._refresh()
        return self._header

    def events(self, kind: str) -> list[dict[str, Any]]:
        """The run's events of one kind (e.g. the client's own samples, ``client``), in the order written."""
        self._refresh()
        return [e for e in self._events if e.get("kind") == kind]

    def replica_polls(self) -> list[ReplicaPoll]:
        """The ``replicas`` lines: each poll of the scaler, in time order."""
        from tokenbench.results.scaling import ReplicaPoll

        return [ReplicaPoll.model_validate(e) for e in self.events("replicas")]

    def point_starts(self) -> list[PointStart]:
        """The ``point_start`` events: each point as it started."""
        from tokenbench.results.manifest import PointStart

        return [PointStart.from_json(e) for e in self.events("point_start")]

    def point_ends(self) -> list[PointEnd]:
        """The ``point`` events: each finished point's span."""
        from tokenbench.results.manifest import PointEnd

        return [PointEnd.from_json(e) for e in self.events("point")]


class Sampler:
    """Context manager owning the sampler child: ``with Sampler(...) as s: ... s.wait_past(t)``."""

    def __init__(
        self,
        out: Path,
        origin_monotonic_s: float,
        metrics_url: str | None,
        backend: str | None,
        interval_s: float,
        names: MetricNames | None = None,
        replicas: Sequence[tuple[str, str]] = (),
        replica_names: MetricNames | None = None,
        scaler: ScalerTarget | None = None,
        server_pids: Sequence[int] = (),
    ) -> None:
        """``names``: the backend profile's metric names (None: no normalized values); they go to
        the child on its command line, so it never imports the backends. ``replicas``: a fleet's
        (name, metrics URL) pairs, scraped beside, read with ``replica_names``. ``scaler``: a
        scaler's API to poll for its replicas after each scrape (None: none). ``server_pids``: the
        processes tokenbench launched as the server, whose CPU each scrape reads (none: attached)."""
        self.out = out
        self.file = SamplesFile(out)
        self.interval_s = interval_s
        self.metrics_url = metrics_url
        self._argv = [
            sys.executable,
            "-m",
            "tokenbench.telemetry.sampler",
            "--out",
            str(out),
            "--origin",
            repr(origin_monotonic_s),
            "--interval",
            str(interval_s),
        ]
        if metrics_url:
            self._argv += ["--metrics-url", metrics_url]
        if backend:
            self._argv += ["--backend", backend]
        if names is not None:
            self._argv += ["--metric-names", json.dumps(names.to_json())]
        for name, url in replicas:
            self._argv += ["--replica", f"{name}={url}"]
        if replicas and replica_names is not None:
            self._argv += ["--replica-metric-names", json.dumps(replica_names.to_json())]
        if scaler is not None:
            self._argv += ["--scaler-url", scaler.url, "--scaler-kind", scaler.kind]
        for pid in server_pids:
            self._argv += ["--server-pid", str(pid)]
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Sampler:
        # stdin is our pipe to it: events in, and its end (EOF) when we stop or die
        self._proc = subprocess.Popen(self._argv, stdin=subprocess.PIPE, preexec_fn=procs.child_preexec())
        return self

    def event(self, data: dict[str, Any] | Event) -> None:
        """Write one event line into samples.jsonl (through the sampler: one writer): a point's
        (its model's JSON) or the client's own samples (a dict)."""
        if not isinstance(data, dict):
            data = data.to_json()
        proc = self._proc
        if proc is None or proc.stdin is None or proc.poll() is not None:
            return
        try:
            proc.stdin.write((json.dumps(data) + "\n").encode())
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def __exit__(self, *exc: object) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # EOF: it writes what it has and exits
            proc.wait(timeout=5.0)
        except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
            procs.stop(proc, grace_s=5.0)

    async def wait_past(self, t_s: float, timeout_s: float | None = None) -> None:
        """Wait until a scrape stamped at or after ``t_s`` is on disk (so a point's counters are
        bracketed), or ``timeout_s`` passes (default: three intervals + 5 s)."""
        import asyncio

        deadline = time.perf_counter() + (timeout_s if timeout_s is not None else 3 * self.interval_s + 5)
        while time.perf_counter() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                return
            scrapes = self.file.scrapes()
            if scrapes and scrapes[-1]["t_s"] >= t_s:  # lines are appended in time order
                return
            await asyncio.sleep(min(0.1, self.interval_s / 4))


if __name__ == "__main__":
    main()
