"""Child processes tokenbench starts (servers under test, the sampler, the mock): start them so
they die with us, wait until they answer, stop them by PID. Only processes we started are ever
signalled.

No orphans, whatever ends tokenbench (Ctrl-C, SIGTERM, kill -9, the OOM killer, a crash):
- every child gets the Linux parent-death signal (``prctl(PR_SET_PDEATHSIG)``, ``child_preexec``);
- an engine runs in its own process group (vLLM's engine core is a grandchild the death signal
  does not reach), watched by a *guardian* (``python -m tokenbench.common.procs``) that holds a pipe
  from us: when the pipe closes without a "release" (we died), it stops the whole group,
  SIGTERM then SIGKILL after a short grace. It also writes the engine's output to the log with
  credentials masked;
- the sampler reads a pipe from us and exits when it closes.
Signals to tokenbench itself (SIGINT, SIGTERM) go through ``Interrupts``.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import AnyStr


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it; a race with another process is
    possible but has not been seen on loopback)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])  # (host, port)


class NotReady(Exception):
    """The child exited, or did not answer in time; the message says which."""


def wait_http(
    url: str,
    timeout_s: float,
    proc: subprocess.Popen[AnyStr] | None = None,
    accept: Callable[[bytes], bool] | None = None,
) -> None:
    """Poll ``url`` until it answers 2xx (and ``accept`` takes its body, when given); fail early if
    ``proc`` exits."""
    t0 = time.perf_counter()
    refused: bytes | None = None  # the last 2xx body ``accept`` did not take
    while time.perf_counter() - t0 < timeout_s:
        if proc is not None and proc.poll() is not None:
            raise NotReady(f"the process serving {url} exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if 200 <= resp.status < 300:
                    body = resp.read() if accept is not None else b""
                    if accept is None or accept(body):
                        return
                    refused = body
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    if refused is not None:
        text = refused[:200].decode(errors="replace")
        raise NotReady(f"{url} answered but not ready within {timeout_s:.0f}s (last answer: {text!r})")
    raise NotReady(f"{url} did not answer within {timeout_s:.0f}s")


def stop(proc: subprocess.Popen[AnyStr] | None, grace_s: float = 15.0, group: bool = False) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``. ``group``: signal the process group the child
    leads (it was started with ``start_new_session=True``, so the group is the child and the
    workers it spawned, e.g. vLLM's engine-core process), not just the child."""
    if proc is None:
        return
    if group:
        _stop_group(proc.pid, grace_s, reap=proc.poll)
        proc.wait()
        return
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _stop_group(pgid: int, grace_s: float, reap: Callable[[], object] = lambda: None) -> None:
    """SIGTERM to the group, SIGKILL to whatever of it is left after ``grace_s``. ``reap``: for
    our own child leading the group (a zombie stays in the group until it is waited for)."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.perf_counter() + grace_s
    while True:
        reap()
        if not _group_alive(pgid) or time.perf_counter() >= deadline:
            break
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


# --- no orphans --------------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_prctl: Callable[..., int] | None  # libc's prctl(option, arg2, arg3, arg4, arg5)
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before fork: nothing to load after
except (OSError, AttributeError):  # pragma: no cover - not Linux
    _prctl = None

GUARD_GRACE_S = 3.0  # SIGTERM to SIGKILL when the guardian stops an orphaned engine


def child_preexec(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks the kernel to send ``sig`` to the child when we die (the death
    of the thread that forks: tokenbench starts children from its main thread)."""
    if _prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        _prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # we died between fork and prctl
            os._exit(1)

    return preexec


class Guardian:
    """Watches a process group for us: ``Guardian(pgid, engine_output_fd, log_path, secrets)``.

    ``release()`` when we stopped the group ourselves; if we die first, the guardian's pipe
    closes and it stops the group."""

    def __init__(self, pgid: int, output_fd: int, log_path: Path, secrets: list[str]) -> None:
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tokenbench.common.procs",
                "--pgid",
                str(pgid),
                "--fd",
                str(output_fd),
                "--log",
                str(log_path),
                "--grace",
                str(GUARD_GRACE_S),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            pass_fds=(output_fd,),
            start_new_session=True,  # a Ctrl-C in the terminal is ours to handle, not its
        )
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps({"secrets": secrets}) + "\n").encode())
        self._proc.stdin.flush()

    def release(self, timeout_s: float = 10.0) -> None:
        """The group is stopped: the guardian finishes the log and exits without signalling."""
        proc = self._proc
        try:
            assert proc.stdin is not None
            proc.stdin.write(b"release\n")
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _guard_main(argv: list[str]) -> None:
    import argparse

    from tokenbench.common.redact import mask_text, register

    ap = argparse.ArgumentParser(prog="tokenbench-guardian")
    ap.add_argument("--pgid", type=int, required=True)
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--grace", type=float, default=GUARD_GRACE_S)
    args = ap.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    first = sys.stdin.buffer.readline()
    try:
        register(*json.loads(first or b"{}").get("secrets", []))
    except ValueError:
        pass

    def copy_log() -> None:
        with os.fdopen(args.fd, "rb", buffering=0) as src, open(args.log, "ab", buffering=0) as log:
            pending = b""
            while chunk := src.read(65536):
                pending += chunk
                lines, _, pending = pending.rpartition(b"\n")
                if lines:
                    log.write(mask_text((lines + b"\n").decode("utf-8", "replace")).encode())
            if pending:
                log.write(mask_text(pending.decode("utf-8", "replace")).encode())

    copier = threading.Thread(target=copy_log, daemon=True)
    copier.start()
    released = b"release" in sys.stdin.buffer.read()  # blocks until the pipe closes
    if not released:
        _stop_group(args.pgid, args.grace)
    copier.join(timeout=5.0)


# --- who holds a port ----------------------------------------------------------------------------


def port_in_use(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


def port_holder(port: int) -> str:
    """Who listens on ``port``, for an error message: "PID 123 (python -m ...)", or a hint."""
    import psutil  # type: ignore[import-untyped]  # its stubs (types-psutil) are not a dependency

    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                try:
                    cmd = " ".join(psutil.Process(conn.pid).cmdline())[:200]
                except psutil.Error:
                    cmd = "?"
                return f"PID {conn.pid} ({cmd})"
    except (psutil.Error, OSError):
        pass
    return "a process this user cannot see"


# --- what a process tree has used ------------------------------------------------------------------


def tree_cpu_s(roots: Sequence[int]) -> tuple[float, int] | None:
    """CPU seconds (user + system) that the processes ``roots`` and their live descendants have
    used, the children they reaped included, and how many processes were alive; None when none of
    ``roots`` is. A server's engine core, a layer's workers and llama.cpp's child are descendants
    of the process tokenbench started, so this is the whole server's CPU (a descendant that died
    unreaped takes its seconds with it; a daemon that left the tree, Ray's, is not counted)."""
    import psutil

    total, alive = 0.0, 0
    for pid in roots:
        try:
            root = psutil.Process(pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for proc in tree:
            try:
                t = proc.cpu_times()
            except psutil.Error:  # ended between the listing and the read
                continue
            total += t.user + t.system + t.children_user + t.children_system
            alive += 1
    return (total, alive) if alive else None


# --- signals to tokenbench ----------------------------------------------------------------------


class Interrupts:
    """SIGINT and SIGTERM mean the same: stop, keep every record, stop the children. The first
    one interrupts (``KeyboardInterrupt``, or inside a load point the ``during`` callback, which
    cancels in-flight requests as records); a second one exits at once (records are flushed as
    they are written; ``tokenbench recompute`` derives results.json from them), and the
    guardians and the sampler stop what we started. Exit code: 128 + the first signal."""

    received: int | None = None
    _callback: Callable[[], object] | None = None  # what it returns is not read

    @classmethod
    def install(cls) -> None:
        """At the start of a command: forget earlier signals, handle SIGINT and SIGTERM."""
        cls.received = None
        cls.ensure()

    @classmethod
    def ensure(cls) -> None:
        """Handle SIGINT and SIGTERM if nobody installed us (tokenbench used as a library)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(sig) != cls._handler:
                signal.signal(sig, cls._handler)

    @classmethod
    def _handler(cls, sig: int, frame: FrameType | None) -> None:
        if cls.received is not None:
            os.write(
                2,
                f"\nsecond signal ({signal.Signals(sig).name}): exiting now; records are on "
                f"disk, `tokenbench recompute DIR` derives the results\n".encode(),
            )
            os._exit(128 + cls.received)
        cls.received = sig
        if cls._callback is not None:
            cls._callback()
            return
        raise KeyboardInterrupt

    @classmethod
    @contextlib.contextmanager
    def during(cls, callback: Callable[[], object]) -> Iterator[None]:
        """Inside the block, the first signal calls ``callback`` instead of raising."""
        previous, cls._callback = cls._callback, callback
        try:
            if cls.received is not None:  # a signal came just before the block
                callback()
            yield
        finally:
            cls._callback = previous

    @classmethod
    def exit_code(cls) -> int:
        return 128 + (cls.received or signal.SIGINT)


if __name__ == "__main__":
    _guard_main(sys.argv[1:])
