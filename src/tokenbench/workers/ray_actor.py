"""Workers as Ray async actors (``--ray``: a local Ray instance; ``--ray-address ADDR|auto``: a
cluster), spread over the nodes (the SPREAD strategy), ``--ray-cpus-per-worker`` logical CPUs each
(1 by default; 0 lets more actors than cores be placed on a small machine). An async actor runs
its methods on one event loop (Ray's default of up to 1,000 concurrent calls), as a worker process
does. Ray is an optional extra: ``pip install 'tokenbench[ray]'``.

Every node must have tokenbench installed (the same version as the driver).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from tokenbench.errors import BadInput
from tokenbench.workers import WorkerLost
from tokenbench.workers.core import WorkerCore
from tokenbench.workers.remote import CLOSE_TIMEOUT_S, RemoteWorker


class _Actor:
    def __init__(self) -> None:
        self.core = WorkerCore()

    async def call(self, method: str, args: tuple[Any, ...]) -> Any:
        return await self.core.call(method, args)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BadInput("--ray needs Ray: pip install 'tokenbench[ray]'") from None
    return ray


def start_ray(address: str | None, workers: int, cpus_per_worker: float) -> bool:
    """Attach to ``address`` (a cluster, or "auto"), or start a local instance with room for the
    workers; True when this call started it (the run shuts it down at the end)."""
    ray = _ray()
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
    if address is not None:
        ray.init(address=address, **options)
    else:
        cpus = max(os.cpu_count() or 1, int(workers * cpus_per_worker + 0.999))
        ray.init(address="local", num_cpus=cpus, **options)
    return True


def stop_ray() -> None:
    _ray().shutdown()


class RayWorker(RemoteWorker):
    """The driver's end of one Ray actor."""

    def __init__(self, index: int, cpus: float) -> None:
        ray = _ray()
        self.index = index
        options = {"num_cpus": cpus, "scheduling_strategy": "SPREAD", "max_restarts": 0}
        self.actor = ray.remote(**options)(_Actor).remote()
        self.lost: str | None = None

    @property
    def describe(self) -> str:
        return f"worker {self.index} (Ray actor)"

    async def call(self, method: str, *args: Any, timeout_s: float | None = None) -> Any:
        ray = _ray()
        if self.lost is not None:
            raise WorkerLost(f"{self.describe} was lost: {self.lost}")
        try:
            return await asyncio.wait_for(self.actor.call.remote(method, args), timeout_s)
        except ray.exceptions.RayActorError as e:
            self.lost = f"its actor died ({type(e).__name__})"
            raise WorkerLost(f"{self.describe}: {self.lost}") from None
        except TimeoutError:
            raise WorkerLost(f"{self.describe} did not answer {method} within {timeout_s:g} s") from None
        except ray.exceptions.RayTaskError as e:
            raise RuntimeError(str(e)) from None

    async def stop(self) -> None:
        ray = _ray()
        if self.lost is None:
            try:
                await self.call("close", timeout_s=CLOSE_TIMEOUT_S)
            except (WorkerLost, RuntimeError):
                pass
        ray.kill(self.actor)
