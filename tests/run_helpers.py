"""Helpers for the tests that run tokenbench in this process against the mock: a small config,
a console that prints nowhere, the records a run wrote."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console

from tokenbench.common.procs import free_port, stop, wait_http
from tokenbench.config import DatasetConfig, RunConfig, TargetConfig
from tokenbench.config.target import ResolvedTarget

# config.json's settings keys added since the 0.2.1 run directories in tests/fixtures/rundirs were
# written (additive: an older file reads each as RunConfig's default). A new settings key goes here.
# A nested key is dotted ("target.batch_size": embeddings).
SETTINGS_ADDED_SINCE_FIXTURES = {
    "trials": 1,
    "fingerprint": False,  # the served model's fingerprint (--fingerprint)
    "target.batch_size": None,
    "lora_mix": None,
    "mix": None,
    "tenant_header": "X-Tenant",
    "dataset.image_size": "512x512",
    "dataset.image_format": "png",
    "dataset.sharegpt_sampling": "tokenbench",
    "dataset.context_tokens": None,  # trace replay's context guard
    "dataset.over_context": "skip",
    "dataset.program_format": "auto",  # agent programs
    "dataset.program_output": "live",
    "dataset.program_time_scale": 1.0,
    "server_traces": False,
    "server_traces_port": 0,
    "server_traces_grpc_port": 0,  # server spans: the OTLP/gRPC receiver
    "target.replica_header": "x-served-by",  # fleets
    "dataset.grader": None,  # graded datasets
}


def settings_added(data: dict) -> dict:
    """The added settings' values in a config.json's data, by their dotted keys."""
    found = {}
    for dotted in SETTINGS_ADDED_SINCE_FIXTURES:
        value = data
        for name in dotted.split("."):
            value = value[name]
        found[dotted] = value
    return found


def without_settings_added(data: dict) -> dict:
    """A config.json's data without the settings added since the fixtures (a copy)."""
    data = json.loads(json.dumps(data))
    for dotted in SETTINGS_ADDED_SINCE_FIXTURES:
        *parents, last = dotted.split(".")
        holder = data
        for name in parents:
            holder = holder[name]
        holder.pop(last)
    return data


def quiet() -> Console:
    return Console(file=io.StringIO())


def config(url, tmp_path, loads, stop, api="chat", **kw) -> RunConfig:
    return RunConfig(
        target=TargetConfig(url=url, api=api, read_timeout_s=kw.pop("read_timeout_s", 120.0)),
        loads=loads,
        stop=stop,
        dataset=DatasetConfig(input_tokens=8, output_tokens=kw.pop("output_tokens", 20), num_prompts=10),
        live=False,
        out_dir=tmp_path / "run",
        **kw,
    )


def records_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]


def mock_command(port: int, **knobs) -> list[str]:
    """``tokenbench mock`` on ``port`` with knobs as its flags: ttft_ms=10 -> --ttft-ms 10,
    priority_queue=True -> --priority-queue (False: --no-priority-queue)."""
    cmd = [sys.executable, "-m", "tokenbench", "mock", "--port", str(port)]
    for key, value in knobs.items():
        flag = key.replace("_", "-")
        if isinstance(value, bool):
            cmd.append(f"--{flag}" if value else f"--no-{flag}")
        else:
            cmd += [f"--{flag}", str(value)]
    return cmd


def spawn_mock(**knobs) -> tuple[subprocess.Popen, str]:
    """A ``tokenbench mock`` child process (``mock_command``'s knobs) on a free loopback port,
    answering: the process (the caller stops it) and its base URL."""
    port = free_port()
    proc = subprocess.Popen(mock_command(port, **knobs), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/health", 20.0, proc)
    except BaseException:
        stop(proc, grace_s=10)
        raise
    return proc, url


@contextlib.contextmanager
def mock_process(**knobs) -> Iterator[str]:
    """``spawn_mock``'s base URL while the block runs, the process stopped after."""
    proc, url = spawn_mock(**knobs)
    try:
        yield url
    finally:
        stop(proc, grace_s=10)


def resolved(**fields: object) -> ResolvedTarget:
    """A target as a run resolves it (run.resolve_target), from the settings' fields: a client and
    its wire take only a resolved one. ``url``, ``model``, ``api`` and ``continuous_usage`` default
    to a mock's; any other field is a setting."""
    decided = {"url": "http://127.0.0.1:1", "model": "m", "api": "chat", "continuous_usage": False}
    given = {k: v for k, v in fields.items() if not (k == "continuous_usage" and v is None)}
    return ResolvedTarget.of(TargetConfig(), **{**decided, **given})
