"""The run's workers from its settings: started, their clocks set, given the dataset, and their
facts for config.json (``workers``) and results."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from tokenbench.config import RunConfig
from tokenbench.config.target import ResolvedTarget
from tokenbench.loadgen.programs import ProgramSource
from tokenbench.loadgen.schedule import Share
from tokenbench.loadgen.sessions import SessionSource
from tokenbench.loadgen.source import RequestSource, TraceSource
from tokenbench.loadgen.stats import LiveStats
from tokenbench.records import RequestRecord, RunClock
from tokenbench.results.client import WorkerClock, Workers
from tokenbench.telemetry.client_monitor import Sample
from tokenbench.workers.core import Setup
from tokenbench.workers.pool import Handle, WorkerPool, ray_session, start_workers

# where the pool's records, client samples and messages go (the run's writer, sampler and console)
PoolIO = tuple[Callable[[list[RequestRecord]], None], Callable[[Sample], None], Callable[[str], None]]


@contextlib.asynccontextmanager
async def worker_pool(
    config: RunConfig,
    target: ResolvedTarget,
    source: RequestSource | SessionSource | TraceSource | ProgramSource,
    clock: RunClock,
    run_dir: Path,
    io: PoolIO,
    stats: LiveStats,
) -> AsyncIterator[WorkerPool]:
    """The run's workers: one on this process's own loop, or ``--workers`` processes or ``--ray``
    actors. Stopped, whatever ends the block."""
    workers = config.workers
    async with ray_session(workers):
        handles = await start_workers(workers, run_dir)
        pool = WorkerPool(handles, clock, *io, stats=stats)
        try:
            await pool.set_up(
                lambda h, origin: _setup(config, target, source, clock, Share(h.index, len(handles)), origin)
            )
            yield pool
            await pool.check_clocks()
        finally:
            await pool.close()


def _setup(
    config: RunConfig,
    target: ResolvedTarget,
    source: RequestSource | SessionSource | TraceSource | ProgramSource,
    clock: RunClock,
    lane: Share,
    origin: float,
) -> Setup:
    secrets = tuple(s for s in (target.api_key(), *target.headers.values()) if s)
    common = Setup(
        lane, origin, clock.origin_unix_s, target, config.keep_text, config.dataset.tokenizer, secrets=secrets
    )
    if isinstance(source, SessionSource):
        return dataclasses.replace(
            common,
            conversations=source.conversations,
            sessions=config.sessions,
            max_model_len=source.max_model_len,
            session_prefix=source.id_prefix,
        )
    if isinstance(source, ProgramSource):  # a session stays on the worker that starts it
        return dataclasses.replace(
            common, programs=source.programs, dataset=config.dataset, session_prefix=source.id_prefix
        )
    if isinstance(source, TraceSource):  # each worker opens the trace and builds its own rows
        return dataclasses.replace(common, trace=source.plan)
    return dataclasses.replace(common, requests=source.requests, unique_nonce=source.unique_nonce)


def workers_facts(config: RunConfig, pool: WorkerPool, handles: list[Handle] | None = None) -> Workers:
    """config.json's ``workers_facts``: how the load ran, and each worker's clock offset (start, end)."""
    workers = config.workers
    clocks = []
    for h in handles or pool.handles:
        start, end, info = pool.offsets.get(h.index), pool.end_offsets.get(h.index), pool.infos.get(h.index)
        clocks.append(
            WorkerClock(
                worker=h.index,
                node=info.node if info else None,
                pid=info.pid if info else None,
                offset_s=start.offset_s if start else None,
                uncertainty_s=start.uncertainty_s if start else None,
                end_offset_s=end.offset_s if end else None,
                end_uncertainty_s=end.uncertainty_s if end else None,
                lost=h.lost,
            )
        )
    return Workers(
        mode="ray" if workers.on_ray else "process",
        count=workers.count,
        ray_address=workers.ray_address,
        cpus_per_worker=workers.cpus_per_worker if workers.on_ray else None,
        clocks=clocks,
    )
