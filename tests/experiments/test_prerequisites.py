"""What an experiment's servers need, checked before its first cell: a router whose venv is not
there names the make target that installs it."""

from types import SimpleNamespace

from tokenbench.backends import routers
from tokenbench.config import BackendConfig
from tokenbench.experiments.prerequisites import missing


def test_a_fleet_without_its_router_names_make_routers(monkeypatch, tmp_path):
    monkeypatch.setattr(routers, "VENV_BIN", tmp_path / ".cache/router-venv/bin")
    monkeypatch.delenv("TOKENBENCH_VLLM_ROUTER_BIN", raising=False)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    plan = SimpleNamespace(backend=BackendConfig(name="vllm-router", model=str(gguf), replicas=2))
    why = missing(plan)
    assert why is not None and "vllm-router' not found" in why and "run `make routers`" in why
