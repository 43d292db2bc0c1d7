"""A server under test that tokenbench launched: start it from its profile's local command, wait
until it is ready, record its version and cold start, stop it by PID.

The engine runs in its own process group (so Ctrl-C in the terminal reaches tokenbench, which
then stops the engine in order) with stdout and stderr in ``server.log`` in the run directory.
Cold start = seconds from launch to the first 2xx of the profile's ready path, which includes
weight download, conversion or engine compilation where the engine does those at start.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

from .. import procs
from ..config import BackendConfig
from .base import BackendError, LaunchSpec, Profile

HOST = "127.0.0.1"


def launch_spec(profile: Profile, config: BackendConfig, port: int | None = None) -> LaunchSpec:
    model = config.model or (profile.default_model() if profile.default_model else None)
    if not model:
        raise BackendError(f"--backend {profile.name} without --url launches it: pass --model "
                           f"(what it should load)")
    return LaunchSpec(
        model=model,
        served_name=config.served_model_name or _default_served_name(model),
        host=HOST,
        port=port or config.port or profile.default_port,
        knobs=config.knobs,
        executable=config.executable,
    )


def metrics_url_for(profile: Profile | None, url: str | None, spec: LaunchSpec | None = None) -> str | None:
    """Where a server's Prometheus metrics are: the profile's own rule for a launched server (a
    separate metrics port), else the server URL + the profile's path; None without metrics."""
    if profile is None:
        return None
    if spec is not None and profile.metrics_url is not None:
        return profile.metrics_url(spec)
    if profile.metrics is None or url is None:
        return None
    return f"{url}{profile.metrics.path}"


def _default_served_name(model: str) -> str:
    path = Path(model)
    return path.stem if path.suffix == ".gguf" else path.name if path.exists() else model


class ManagedServer:
    """``with ManagedServer(profile, config, log_path) as server: server.url``."""

    def __init__(self, profile: Profile, config: BackendConfig, log_path: Path) -> None:
        self.profile = profile
        self.config = config
        self.log_path = log_path
        self.spec = launch_spec(profile, config, config.port or procs.free_port(HOST))
        self.launch = profile.local(self.spec)  # raises BackendError for unmapped knobs
        self.url = f"http://{HOST}:{self.spec.port}"
        self.cold_start_s: float | None = None
        self.version: str | None = None
        self._proc: subprocess.Popen | None = None
        self._log = None

    def __enter__(self) -> ManagedServer:
        env = {**os.environ, **self.launch.env}
        self._log = open(self.log_path, "ab")
        t0 = time.perf_counter()
        try:
            self._proc = subprocess.Popen(
                list(self.launch.argv), env=env, stdin=subprocess.DEVNULL, stdout=self._log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        except FileNotFoundError as exc:
            self._close_log()
            raise BackendError(
                f"cannot start {self.profile.title}: {self.launch.argv[0]!r} not found. Install it, "
                f"or point --engine-bin at its executable"
            ) from exc
        try:
            procs.wait_http(self.url + self.profile.ready_path, self.config.ready_timeout_s, self._proc)
        except procs.NotReady as exc:
            self.stop()
            raise BackendError(f"{self.profile.title} did not become ready: {exc}; see {self.log_path}") from exc
        self.cold_start_s = time.perf_counter() - t0
        self.version = self._version()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        procs.stop(proc, group=True)
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def _version(self) -> str | None:
        p = self.profile
        if p.version_path and p.version_field:
            try:
                with urllib.request.urlopen(self.url + p.version_path, timeout=5) as resp:
                    value = json.loads(resp.read())
                for key in p.version_field.split("."):
                    value = value[key]
                if value and value != "b0-unknown":
                    return str(value)
            except (OSError, ValueError, KeyError, TypeError):
                pass
        if p.version_package:
            from importlib.metadata import PackageNotFoundError, version

            try:
                return version(p.version_package)
            except PackageNotFoundError:
                return None
        return None

    def describe(self) -> dict:
        return {
            "backend": self.profile.name,
            "engine": self.profile.title,
            "engine_version": self.version,
            "cold_start_s": self.cold_start_s,
            "cold_start_includes": self.profile.cold_start_includes,
            "command": list(self.launch.argv),
            "command_env": dict(self.launch.env),
            "knobs": self.config.knobs.model_dump(mode="json"),
            "engine_model": self.config.model,
            "log": str(self.log_path),
        }
