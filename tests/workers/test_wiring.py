"""The run's workers from its settings (workers.wiring): without --workers or --ray one worker on
the driver's own loop sharing the driver's lists; the typed setup every worker gets, and what
config.json's ``workers`` says of them."""

from __future__ import annotations

import asyncio
import pickle

from tokenbench.config import RunConfig, SessionConfig, StopConfig, TargetConfig, UsersLoad, WorkersConfig
from tokenbench.datasets.sessions import Conversation, Turn
from tokenbench.loadgen.schedule import Share
from tokenbench.loadgen.sessions import SessionSource
from tokenbench.loadgen.source import RequestSource
from tokenbench.loadgen.stats import LiveStats
from tokenbench.records import Request, RunClock
from tokenbench.workers.clock import Offset
from tokenbench.workers.core import LocalWorker, Setup, WorkerInfo
from tokenbench.workers.pool import SAME_CLOCK, WorkerPool
from tokenbench.workers.wiring import _setup, worker_pool, workers_facts

TARGET = TargetConfig(
    url="http://127.0.0.1:9", model="m", api="chat", api_key_env="TB_NO_SUCH_KEY", headers={"X-Key": "sk-secret-1234"}
)
REQUESTS = [Request(prompt="p", max_tokens=1)]


def _config(**kw: object) -> RunConfig:
    return RunConfig(target=TARGET, loads=[UsersLoad(users=1)], stop=StopConfig(max_requests=1), **kw)  # type: ignore[arg-type]


def test_a_run_without_workers_is_a_pool_of_one_worker_on_its_own_loop(tmp_path):
    async def body() -> WorkerPool:
        source = RequestSource(REQUESTS, unique_nonce="n0")
        io = (lambda records: None, lambda sample: None, lambda text: None)
        async with worker_pool(_config(), TARGET, source, RunClock.start(), tmp_path, io, LiveStats()) as pool:
            (handle,) = pool.handles
            assert isinstance(handle, LocalWorker) and handle.same_clock
            state = handle.core._state
            assert state is not None and isinstance(state.source, RequestSource)
            assert state.source.requests is source.requests  # the driver's list, not a copy
            assert state.source.unique_nonce == "n0" and state.target is TARGET
        return pool

    pool = asyncio.run(body())
    assert pool.offsets == pool.end_offsets == {0: SAME_CLOCK}
    assert not list(tmp_path.iterdir())  # no worker log: no worker process


def test_every_worker_gets_the_typed_settings_and_they_cross_a_process():
    clock = RunClock(100.0, 1.7e9)
    source = RequestSource(REQUESTS, unique_nonce="n0")
    setup = _setup(_config(keep_text=True), TARGET, source, clock, Share(1, 2), 99.5)
    assert (setup.lane, setup.origin_monotonic_s, setup.origin_unix_s) == (Share(1, 2), 99.5, 1.7e9)
    assert setup.target is TARGET and setup.requests is REQUESTS and setup.unique_nonce == "n0"
    assert setup.keep_text and setup.conversations is None and setup.secrets == ("sk-secret-1234",)
    assert pickle.loads(pickle.dumps(setup)) == setup

    sessions = SessionConfig(turns=2, max_history_tokens=50)
    conversations = [Conversation((Turn("hi", 1, 4), Turn("more", 1, 4)))]
    talk = SessionSource(conversations, len, sessions, max_model_len=512, id_prefix="ab12")
    setup = _setup(_config(sessions=sessions), TARGET, talk, clock, Share(0, 2), 100.0)
    assert setup.sessions is sessions and setup.conversations is conversations and setup.requests is None
    assert (setup.max_model_len, setup.session_prefix) == (512, "ab12")
    again = pickle.loads(pickle.dumps(setup))
    assert isinstance(again, Setup) and again.sessions == sessions and again.target == TARGET


class _Handle:
    def __init__(self, index: int, lost: str | None = None) -> None:
        self.index, self.lost, self.same_clock = index, lost, False


def test_the_workers_facts_name_each_workers_clock_and_loss():
    pool = WorkerPool([], RunClock.start(), print, print, print, LiveStats())
    handles = [_Handle(0), _Handle(1, "killed by signal SIGKILL")]
    pool.offsets = {0: Offset(0.5, 0.001), 1: Offset(-2.0, 0.002)}
    pool.end_offsets = {0: Offset(0.5001, 0.001)}
    pool.infos = {0: WorkerInfo(0, 11, "a"), 1: WorkerInfo(1, 12, "b")}
    config = _config(workers=WorkersConfig(count=2))
    facts = workers_facts(config, pool, handles).model_dump(mode="json")  # type: ignore[arg-type]
    assert {k: facts[k] for k in ("mode", "count", "ray_address", "cpus_per_worker")} == {
        "mode": "process",
        "count": 2,
        "ray_address": None,
        "cpus_per_worker": None,
    }
    first, second = facts["clocks"]
    assert first == {
        "worker": 0,
        "node": "a",
        "pid": 11,
        "offset_s": 0.5,
        "uncertainty_s": 0.001,
        "end_offset_s": 0.5001,
        "end_uncertainty_s": 0.001,
        "lost": None,
    }
    assert (second["pid"], second["end_offset_s"], second["lost"]) == (12, None, "killed by signal SIGKILL")
    ray = workers_facts(_config(workers=WorkersConfig(count=2, ray=True, cpus_per_worker=0.5)), pool, handles)  # type: ignore[arg-type]
    assert (ray.mode, ray.cpus_per_worker) == ("ray", 0.5)
