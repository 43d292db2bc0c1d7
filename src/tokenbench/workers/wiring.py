"""The run's workers from its settings: started, their clocks set, given the dataset, and their
facts for config.json (``workers``) and results."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from ..config import RunConfig, TargetConfig
from ..live import LiveStats
from ..load import Share
from ..records import RequestRecord, RunClock
from ..request_source import RequestSource
from ..results.client import WorkerClock, Workers
from ..session_load import SessionSource
from .core import Setup
from .pool import Handle, WorkerPool, ray_session, start_workers


@contextlib.asynccontextmanager
async def worker_pool(
    config: RunConfig,
    target: TargetConfig,
    source: RequestSource | SessionSource,
    clock: RunClock,
    run_dir: Path,
    io: tuple[Callable[[list[RequestRecord]], None], Callable[[dict[str, Any]], None], Callable[[str], None]],
    stats: LiveStats,
) -> AsyncIterator[WorkerPool | None]:
    """The run's workers (None: the run's one process sends the load); ``io``: where records,
    samples and messages go. Stopped, whatever ends the block."""
    workers = config.workers
    if not workers.distributed:
        yield None
        return
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
    target: TargetConfig,
    source: RequestSource | SessionSource,
    clock: RunClock,
    lane: Share,
    origin: float,
) -> Setup:
    common: dict[str, Any] = {
        "lane": lane,
        "origin_monotonic_s": origin,
        "origin_unix_s": clock.origin_unix_s,
        "target": target.model_dump(mode="json"),
        "keep_text": config.keep_text,
        "tokenizer": config.dataset.tokenizer,
        "secrets": tuple(s for s in (target.api_key(), *target.headers.values()) if s),
    }
    if isinstance(source, SessionSource):
        assert config.sessions is not None
        return Setup(
            **common,
            conversations=source.conversations,
            sessions=config.sessions.model_dump(mode="json"),
            max_model_len=source.max_model_len,
            session_prefix=source.id_prefix,
        )
    return Setup(**common, requests=source.requests, unique_nonce=source.unique_nonce)


def workers_facts(config: RunConfig, pool: WorkerPool, handles: list[Handle] | None = None) -> Workers:
    """config.json's ``workers_facts``: how the load ran, and each worker's clock offset (start, end)."""
    workers = config.workers
    clocks = []
    for h in handles or pool.handles:
        start, end, info = pool.offsets.get(h.index), pool.end_offsets.get(h.index), pool.infos.get(h.index, {})
        clocks.append(
            WorkerClock(
                worker=h.index,
                node=info.get("node"),
                pid=info.get("pid"),
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
