"""Agent-programs runs against the mock (``--dataset programs``), for the tests of what reads them
(the report, compare): a recorded Weka session replayed with its waits scaled down."""

from __future__ import annotations

from pathlib import Path

from run_helpers import quiet

from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.run import run

# 32 calls, 12 of them a sub-agent's (Weka kv-cache-tester, Apache-2.0): 25 on its critical path
WEKA_SESSION = Path(__file__).resolve().parent / "fixtures" / "programs" / "weka" / "trace_0291.json"
WEKA_CALLS = 32


def program_config(
    url: str, out_dir: Path, sessions: int = 1, time_scale: float = 0.001, traces_port: int | None = None
) -> RunConfig:
    """One user replaying the session ``sessions`` times, one after another (max-requests ends the
    point as the last one completes: none is cut short), every reply 4 tokens; ``traces_port``:
    the server's spans received there (--server-traces)."""
    return RunConfig(
        target=TargetConfig(url=url, api="chat"),
        loads=[UsersLoad(users=1)],
        stop=StopConfig(max_requests=WEKA_CALLS * sessions),
        dataset=DatasetConfig(name="programs", path=WEKA_SESSION, program_time_scale=time_scale, output_tokens=4),
        live=False,
        out_dir=out_dir,
        server_traces=traces_port is not None,
        server_traces_port=traces_port or 0,
    )


def program_run(
    url: str, out_dir: Path, sessions: int = 1, time_scale: float = 0.001, traces_port: int | None = None
) -> Path:
    """``program_config``'s run: its run directory."""
    return run(program_config(url, out_dir, sessions, time_scale, traces_port), quiet()).run_dir
