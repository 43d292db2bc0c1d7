"""The router profiles (vllm-router, sglang-router): the command a fleet's router runs, its
--layer-arg settings and their refusals, readiness, and its metrics per replica."""

from pathlib import Path

import pytest

from tokenbench.backends import EMBEDDED, PROFILES, BackendError, llamacpp, routers
from tokenbench.backends.base import LaunchSpec
from tokenbench.backends.server import check_launch, fleet_size, upstream_config
from tokenbench.config import BackendConfig, EngineKnobs
from tokenbench.telemetry.prom import ROUTED_PREFIX, normalize, parse

URLS = ("http://127.0.0.1:8001", "http://127.0.0.1:8002")


def _spec(*layer_args: str, urls: tuple[str, ...] = URLS, port: int = 9000) -> LaunchSpec:
    return LaunchSpec(
        model="m",
        served_name="m",
        host="127.0.0.1",
        port=port,
        knobs=EngineKnobs(engine_args=layer_args),
        upstream_url=urls[0] if urls else None,
        upstream_urls=urls,
    )


@pytest.fixture(autouse=True)
def _no_override(monkeypatch):
    for router in (routers.VLLM, routers.SGLANG):
        monkeypatch.delenv(router.env_bin, raising=False)


def test_vllm_router_renders_the_fleet_and_a_benchmarks_defaults():
    argv = PROFILES["vllm-router"].local(_spec()).argv
    assert Path(argv[0]).name == "vllm-router"
    assert list(argv[1:]) == [
        *("--worker-urls", *URLS),
        *("--policy", "round_robin", "--disable-retries"),
        *("--host", "127.0.0.1", "--port", "9000"),
        *("--prometheus-host", "127.0.0.1", "--prometheus-port", "9001"),
        *("--worker-startup-check-interval", "1"),
    ]
    assert routers.metrics_url(_spec()) == "http://127.0.0.1:9001/metrics"


def test_sglang_router_runs_its_launch_subcommand_with_the_same_flags():
    argv = PROFILES["sglang-router"].local(_spec("policy=cache_aware")).argv
    assert Path(argv[0]).name == "sglang-router" and argv[1] == "launch"
    assert argv[argv.index("--policy") + 1] == "cache_aware"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"  # its default binds 0.0.0.0
    assert argv[argv.index("--prometheus-host") + 1] == "127.0.0.1"


def test_layer_args_set_the_policy_retries_thresholds_and_own_flags():
    argv = (
        PROFILES["vllm-router"]
        .local(
            _spec(
                "policy=cache_aware",
                "retries=on",
                "cache_threshold=0.5",
                "balance_abs_threshold=8",
                "balance_rel_threshold=1.2",
                "--disable-circuit-breaker",
            )
        )
        .argv
    )
    assert "--disable-retries" not in argv
    joined = " ".join(argv)
    assert "--policy cache_aware --cache-threshold 0.5 --balance-abs-threshold 8 --balance-rel-threshold 1.2" in joined
    assert "--disable-circuit-breaker" in argv


@pytest.mark.parametrize(
    ("profile", "arg", "match"),
    [
        ("vllm-router", "policy=manual", "vllm-router routes by random, round_robin"),
        ("sglang-router", "policy=consistent_hash", "sglang-router routes by"),
        ("vllm-router", "retries=yes", "on or off"),
        ("vllm-router", "cache_threshold=high", "a number"),
        ("vllm-router", "workers=3", "KEY one of policy, retries"),
        ("vllm-router", "policy", "KEY one of policy"),
    ],
)
def test_bad_layer_args_name_what_is_taken(profile, arg, match):
    with pytest.raises(BackendError, match=match):
        PROFILES[profile].local(_spec(arg))


def test_a_router_without_replicas_is_refused():
    with pytest.raises(BackendError, match="is a router: it is launched in front of --replicas N"):
        PROFILES["vllm-router"].local(_spec(urls=()))


def test_the_executable_is_the_router_venvs_unless_the_environment_says(monkeypatch):
    assert PROFILES["vllm-router"].local(_spec()).argv[0] == str(routers.VENV_BIN / "vllm-router")
    monkeypatch.setenv("TOKENBENCH_SGLANG_ROUTER_BIN", "/opt/py -m sglang_router.launch_router")
    argv = PROFILES["sglang-router"].local(_spec()).argv
    assert argv[:4] == ("/opt/py", "-m", "sglang_router.launch_router", "launch")


def test_the_version_is_the_router_venvs_wheel(monkeypatch, tmp_path):
    monkeypatch.setattr(routers, "VENV_BIN", tmp_path / "bin")
    assert routers.installed_version(routers.VLLM) is None
    (tmp_path / "lib/python3.11/site-packages/vllm_router-0.1.17.dist-info").mkdir(parents=True)
    reader = PROFILES["vllm-router"].version_reader
    assert reader is not None and reader() == "0.1.17"
    monkeypatch.setenv("TOKENBENCH_VLLM_ROUTER_BIN", "/elsewhere/vllm-router")
    assert reader() is None  # another install: its version is not the venv's


def test_ready_once_every_replica_is_counted_healthy():
    ready = PROFILES["vllm-router"].ready_body
    assert PROFILES["vllm-router"].ready_path == "/readiness" and ready is not None
    assert ready(_spec(), b'{"status":"ready","healthy_workers":2,"total_workers":2}')
    assert not ready(_spec(), b'{"status":"ready","healthy_workers":1,"total_workers":1}')  # one registered yet
    assert not ready(_spec(), b"All servers healthy") and not ready(_spec(), b"[]")


VLLM_ROUTER_SCRAPE = """\
# TYPE vllm_router_requests_total counter
vllm_router_requests_total{route="/v1/chat/completions"} 5
vllm_router_requests_total{route="/v1/completions"} 4
# TYPE vllm_router_processed_requests_total counter
vllm_router_processed_requests_total{worker="http://127.0.0.1:8001"} 5
vllm_router_processed_requests_total{worker="http://127.0.0.1:8002"} 4
# TYPE vllm_router_running_requests gauge
vllm_router_running_requests{worker="http://127.0.0.1:8001"} 2
vllm_router_running_requests{worker="http://127.0.0.1:8002"} 1
"""
SGLANG_ROUTER_SCRAPE = """\
# TYPE smg_router_requests_total counter
smg_router_requests_total{router_type="http",backend_type="regular",model="m",endpoint="completions"} 4
# TYPE smg_worker_cb_outcomes_total counter
smg_worker_cb_outcomes_total{worker="http://127.0.0.1:8001",outcome="success"} 2
smg_worker_cb_outcomes_total{worker="http://127.0.0.1:8001",outcome="failure"} 1
smg_worker_cb_outcomes_total{worker="http://127.0.0.1:8002",outcome="success"} 1
"""


def test_each_replicas_routed_requests_are_a_field_named_by_its_host_and_port():
    """As scraped live (backends/routers.py): the worker label is the replica's base URL."""
    values = normalize(parse(VLLM_ROUTER_SCRAPE), PROFILES["vllm-router"].metrics)
    assert values == {
        "requests": 9,
        "running": 3,
        f"{ROUTED_PREFIX}127.0.0.1:8001": 5,
        f"{ROUTED_PREFIX}127.0.0.1:8002": 4,
    }
    assert ROUTED_PREFIX + "127.0.0.1:8001" == "routed_requests@127.0.0.1:8001"  # the shape others read
    values = normalize(parse(SGLANG_ROUTER_SCRAPE), PROFILES["sglang-router"].metrics)
    assert values == {"requests": 4, f"{ROUTED_PREFIX}127.0.0.1:8001": 3, f"{ROUTED_PREFIX}127.0.0.1:8002": 1}


def test_a_router_serves_from_the_embedded_llama_cpp_server_by_default():
    profile = PROFILES["vllm-router"]
    assert profile.router and profile.layer
    assert upstream_config(profile, BackendConfig(name="vllm-router")).name == EMBEDDED
    with pytest.raises(BackendError, match="is a router: it needs an engine"):
        upstream_config(profile, BackendConfig(name="vllm-router", upstream="none"))
    assert fleet_size(profile, BackendConfig(name="vllm-router", replicas=3)) == 3


def test_replicas_need_a_router():
    with pytest.raises(BackendError, match="add --backend vllm-router .* --backend vllm is not a router"):
        check_launch(PROFILES["vllm"], BackendConfig(name="vllm", model="m", replicas=2))
    with pytest.raises(BackendError, match="--backend vllm-router"):
        upstream_config(PROFILES["triton"], BackendConfig(name="triton", replicas=2))


def test_check_launch_renders_every_replica_then_the_router(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    config = BackendConfig(name="vllm-router", model=str(gguf), replicas=2, layer_args=("policy=power_of_two",))
    *engines, router = check_launch(PROFILES["vllm-router"], config)
    assert len(engines) == 2
    ports = [e.argv[e.argv.index("--port") + 1] for e in engines]
    assert len(set(ports)) == 2
    assert all(e.argv[e.argv.index("--threads") + 1] == str(llamacpp._threads(2)) for e in engines)
    assert all(e.argv.count("--threads") == 1 for e in engines)  # the fleet's share, not the default too
    urls = router.argv[router.argv.index("--worker-urls") + 1 : router.argv.index("--policy")]
    assert urls == tuple(f"http://127.0.0.1:{p}" for p in ports)
    assert router.argv[router.argv.index("--policy") + 1] == "power_of_two"


def test_a_llama_cpp_replica_gets_its_share_of_the_cores_unless_told(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    replica = llamacpp.fleet_replica(BackendConfig(name=EMBEDDED), 2)
    assert replica.knobs.engine_args == ("--threads", "1")  # 2 cores: one left to the client, one each
    monkeypatch.setattr("os.cpu_count", lambda: 9)
    assert llamacpp.fleet_replica(BackendConfig(name=EMBEDDED), 2).knobs.engine_args == ("--threads", "4")
    given = BackendConfig(name=EMBEDDED, knobs=EngineKnobs(engine_args=("-t", "3")))
    assert llamacpp.fleet_replica(given, 2) == given
