"""A fleet for the end-to-end tests (conftest.py's ``shared_llamacpp_fleet``, test_router_fleet.py):
how it is launched, and the flags that attach a run to it."""

from pathlib import Path

from tokenbench.backends.server import ServerUnderTest
from tokenbench.config import BackendConfig, EngineKnobs

FLEET_REPLICAS = 2


def fleet_backend(gguf: Path, policy: str = "round_robin", replicas: int = FLEET_REPLICAS) -> BackendConfig:
    """``tokenbench run --backend vllm-router --replicas N --model GGUF --layer-arg policy=P`` as a
    BackendConfig: N embedded llama.cpp servers (one thread each on 2 cores: their fleet share)
    behind vllm-router, from the router venv (``make routers``)."""
    return BackendConfig(
        name="vllm-router",
        model=str(gguf),
        replicas=replicas,
        # retries on: llama.cpp closes a keep-alive connection idle for 5 s, and the router, reusing
        # one from its pool, answered 500 "error sending request" for 1 of 8 requests (seen once, 1
        # of 3 runs); tokenbench's own client re-sends on such a connection, the router only with
        # its retries
        layer_args=(f"policy={policy}", "retries=on"),
        knobs=EngineKnobs(max_num_seqs=2),
        ready_timeout_s=120,
    )


def fleet_flags(fleet: ServerUnderTest) -> list[str]:
    """`tokenbench run` flags that attach to a running fleet: its router, the router's metrics, its
    replicas and the engine they run (--upstream: the replicas' metric names)."""
    assert fleet.metrics_url is not None and fleet.profile is not None and fleet.replicas[0].backend
    flags = ["--url", fleet.url, "--backend", fleet.profile.name, "--metrics-url", fleet.metrics_url]
    flags += ["--upstream", fleet.replicas[0].backend]
    return flags + [f for r in fleet.replicas for f in ("--replica-url", r.url)]
