"""A router in front of a fleet (Profile.router, BackendConfig.replicas): every replica starts first,
each on its own port with its own log, the router is given all their URLs, and everything stops
when the block ends, the router first, also when a replica or the router fails to start. The
replicas and the "router" are `tokenbench mock` processes (scripted servers)."""

from dataclasses import replace

import pytest
from mock_profiles import failing_launch, mock_launch, mock_profile

from tokenbench import backends
from tokenbench.backends import BackendError
from tokenbench.backends import server as server_mod
from tokenbench.backends.base import Launch, LaunchSpec, Profile
from tokenbench.backends.server import server_under_test
from tokenbench.common.procs import port_in_use
from tokenbench.config import BackendConfig, EngineKnobs
from tokenbench.telemetry.prom import MetricNames

_mock, _fails = mock_launch, failing_launch


def _profile(name: str, local, **fields) -> Profile:
    return mock_profile(name, local, metrics=MetricNames(running=("r",)), **fields)


@pytest.fixture
def fleet(monkeypatch):
    """Profiles "eng" (an engine whose replicas take a share: a --threads engine arg) and "rtr" (a
    router over it), the specs each one was rendered with, and the order servers were stopped in
    (by port)."""
    specs: dict[str, list[LaunchSpec]] = {"eng": [], "rtr": []}
    stopped: list[tuple[str, int]] = []

    def recording(name, local):
        def render(spec: LaunchSpec) -> Launch:
            specs[name].append(spec)
            return local(spec)

        return render

    def share(backend: BackendConfig, replicas: int) -> BackendConfig:
        return backend.model_copy(update={"knobs": EngineKnobs(engine_args=(f"--threads={replicas}",))})

    eng = _profile("eng", recording("eng", _mock), replica_launch=share)
    rtr = _profile("rtr", recording("rtr", _mock), layer=True, router=True, default_upstream="eng")
    monkeypatch.setitem(backends.PROFILES, "eng", eng)
    monkeypatch.setitem(backends.PROFILES, "rtr", rtr)
    original_stop = server_mod.ManagedServer.stop

    def stop(self):
        if self._proc is not None:
            stopped.append((self.profile.name, self.spec.port))
        original_stop(self)

    monkeypatch.setattr(server_mod.ManagedServer, "stop", stop)
    return specs, stopped, eng, rtr


def test_the_replicas_start_first_and_the_router_is_given_every_url(fleet, tmp_path):
    specs, stopped, _, _ = fleet
    said: list[str] = []
    config = BackendConfig(name="rtr", replicas=2, layer_args=("policy=x",), ready_timeout_s=30)
    with server_under_test(config, None, tmp_path / "server.log", said.append) as sut:
        replicas, (router,) = specs["eng"], specs["rtr"]
        ports = [r.port for r in replicas]
        assert len(set(ports + [router.port])) == 3
        urls = tuple(f"http://127.0.0.1:{p}" for p in ports)
        assert router.upstream_urls == urls and router.upstream_url == urls[0]
        assert router.knobs == EngineKnobs(engine_args=("policy=x",))  # the router's own settings only
        assert all(r.knobs.engine_args == ("--threads=2",) for r in replicas)  # each replica's share
        assert sut.url == f"http://127.0.0.1:{router.port}" and sut.fresh
        assert [(e.name, e.url, e.backend) for e in sut.replicas] == [(u.split("//")[1], u, "eng") for u in urls]
        assert [e.metrics_url for e in sut.replicas] == [f"{u}/metrics" for u in urls]
        assert [" ".join(line.split()[:2]) for line in said] == ["starting ENG:", "ENG ready"] * 2 + [
            "starting RTR:",
            "RTR ready",
        ]
        facts = sut.facts.to_json()
        assert (facts["backend"], facts["knobs"], "upstream" in facts) == ("rtr", None, False)
        assert [r["url"] for r in facts["replicas"]] == list(urls)
        assert [r["log"] for r in facts["replicas"]] == [str(tmp_path / f"server-replica-{k}.log") for k in range(2)]
        assert all(r["backend"] == "eng" and r["cold_start_s"] > 0 and r["command"] for r in facts["replicas"])
    # the router first, then the replicas, last-started first
    assert stopped == [("rtr", router.port), *(("eng", p) for p in reversed(ports))]
    assert not any(port_in_use("127.0.0.1", p) for p in [*ports, router.port])


def test_the_started_replicas_stop_when_one_fails_to_start(fleet, monkeypatch, tmp_path):
    specs, stopped, eng, _ = fleet
    calls: list[LaunchSpec] = []

    def second_fails(spec: LaunchSpec) -> Launch:
        calls.append(spec)
        return _fails(spec) if len(calls) == 2 else _mock(spec)

    monkeypatch.setitem(backends.PROFILES, "eng", replace(eng, local=second_fails))
    with pytest.raises(BackendError, match="ENG did not become ready"):
        with server_under_test(BackendConfig(name="rtr", replicas=3, ready_timeout_s=30), None, tmp_path / "s.log"):
            pytest.fail("the block must not run")
    assert len(calls) == 2 and stopped == [("eng", calls[1].port), ("eng", calls[0].port)]
    assert not port_in_use("127.0.0.1", calls[0].port)


def test_every_replica_stops_when_the_router_fails_to_start(fleet, monkeypatch, tmp_path):
    specs, stopped, _, rtr = fleet
    monkeypatch.setitem(backends.PROFILES, "rtr", replace(rtr, local=_fails))
    with pytest.raises(BackendError, match="RTR did not become ready"):
        with server_under_test(BackendConfig(name="rtr", replicas=2, ready_timeout_s=30), None, tmp_path / "s.log"):
            pytest.fail("the block must not run")
    ports = [s.port for s in specs["eng"]]
    assert [name for name, _ in stopped] == ["rtr", "eng", "eng"] and [p for _, p in stopped[1:]] == ports[::-1]
    assert not any(port_in_use("127.0.0.1", p) for p in ports)


def test_the_router_is_ready_only_when_its_body_says_so(fleet, monkeypatch, tmp_path):
    """Profile.ready_body: a 2xx whose body is not accepted is not ready yet (the mock's /health
    body never counts workers, so the launch times out)."""
    _, stopped, _, rtr = fleet
    monkeypatch.setitem(backends.PROFILES, "rtr", replace(rtr, ready_body=lambda spec, body: b"workers" in body))
    with pytest.raises(BackendError, match="RTR did not become ready: .* answered but not ready within 6s"):
        with server_under_test(BackendConfig(name="rtr", replicas=1, ready_timeout_s=6), None, tmp_path / "s.log"):
            pytest.fail("the block must not run")
    assert [name for name, _ in stopped] == ["rtr", "eng"]
