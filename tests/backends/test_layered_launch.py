"""A serving layer in front of an engine (BackendConfig.upstream): the engine starts first on its
own port, the layer is given its URL and model, and both stop when the block ends, the layer
first, also when the layer fails to start. The "engine" and the "layer" are `tokenbench mock`
processes (scripted servers), so no real engine is needed."""

import urllib.request
from dataclasses import replace

import pytest
from mock_profiles import failing_launch, mock_launch, mock_profile

from tokenbench import backends
from tokenbench.backends import EMBEDDED, BackendError
from tokenbench.backends import server as server_mod
from tokenbench.backends.base import Launch, LaunchSpec
from tokenbench.backends.server import check_launch, engine_profile, server_under_test, upstream_config
from tokenbench.common.procs import port_in_use
from tokenbench.config import BackendConfig, EngineKnobs

_mock, _fails = mock_launch, failing_launch


_profile = mock_profile


@pytest.fixture
def scripted(monkeypatch):
    """Profiles "eng" (an engine) and "lay" (a layer over it by default), the specs each one was
    rendered with, and the order servers were stopped in."""
    specs: dict[str, list[LaunchSpec]] = {"eng": [], "lay": []}
    stopped: list[str] = []

    def recording(name, local):
        def render(spec: LaunchSpec) -> Launch:
            specs[name].append(spec)
            return local(spec)

        return render

    eng = _profile("eng", recording("eng", _mock))
    lay = _profile("lay", recording("lay", _mock), layer=True, default_upstream="eng", default_served_name="ensemble")
    monkeypatch.setitem(backends.PROFILES, "eng", eng)
    monkeypatch.setitem(backends.PROFILES, "lay", lay)
    original_stop = server_mod.ManagedServer.stop

    def stop(self):
        if self._proc is not None:
            stopped.append(self.profile.name)
        original_stop(self)

    monkeypatch.setattr(server_mod.ManagedServer, "stop", stop)
    return specs, stopped, lay


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


def test_the_engine_starts_first_and_the_layer_is_given_its_url(scripted, tmp_path):
    specs, stopped, _ = scripted
    said: list[str] = []
    knobs = EngineKnobs(max_num_seqs=3)
    with server_under_test(
        BackendConfig(name="lay", knobs=knobs, ready_timeout_s=30), None, tmp_path / "server.log", said.append
    ) as sut:
        (engine,), (layer,) = specs["eng"], specs["lay"]
        assert sut.url == f"http://127.0.0.1:{layer.port}" and layer.port != engine.port
        assert layer.upstream_url == f"http://127.0.0.1:{engine.port}"
        assert (layer.upstream_model, engine.served_name) == ("engine-model", "engine-model")
        assert layer.model == engine.model == "engine-model"
        assert engine.knobs == knobs and layer.knobs == EngineKnobs()  # the knobs are the engine's
        assert sut.model == "ensemble"  # the layer's default served name: what requests use
        assert _answers(layer.upstream_url) and _answers(sut.url)
        assert [" ".join(line.split()[:2]) for line in said] == [
            "starting ENG:",
            "ENG ready",
            "starting LAY:",
            "LAY ready",
        ]
        facts = sut.facts.to_json()
        assert (facts["backend"], facts["engine"], facts["knobs"]) == ("lay", "LAY", None)
        up = facts["upstream"]
        assert (up["backend"], up["engine"], up["url"]) == ("eng", "ENG", layer.upstream_url)
        assert up["knobs"]["max_num_seqs"] == 3 and up["log"] == str(tmp_path / "server-upstream.log")
    assert stopped == ["lay", "eng"]
    assert not port_in_use("127.0.0.1", engine.port) and not port_in_use("127.0.0.1", layer.port)
    assert (tmp_path / "server-upstream.log").exists() and (tmp_path / "server.log").exists()


def test_the_engine_is_stopped_when_the_layer_fails_to_start(scripted, monkeypatch, tmp_path):
    specs, stopped, lay = scripted
    monkeypatch.setitem(backends.PROFILES, "lay", replace(lay, local=_fails))
    with pytest.raises(BackendError, match="LAY did not become ready"):
        with server_under_test(BackendConfig(name="lay", ready_timeout_s=30), None, tmp_path / "server.log"):
            pytest.fail("the block must not run")
    (engine,) = specs["eng"]
    assert stopped == ["lay", "eng"] and not port_in_use("127.0.0.1", engine.port)


def test_an_error_in_the_block_stops_both(scripted, tmp_path):
    specs, stopped, _ = scripted
    with pytest.raises(KeyboardInterrupt):
        with server_under_test(BackendConfig(name="lay", upstream="eng", ready_timeout_s=30), None, tmp_path / "s.log"):
            raise KeyboardInterrupt
    assert stopped == ["lay", "eng"] and (tmp_path / "s-upstream.log").exists()


def test_which_engine_a_layer_serves_from(scripted):
    _, _, lay = scripted
    assert upstream_config(lay, BackendConfig(name="lay")).name == "eng"  # the profile's default
    assert upstream_config(lay, BackendConfig(name="lay", upstream="none")) is None  # the layer's own engine
    # llamacpp is the embedded server unless --engine-bin names a llama-server
    assert upstream_config(lay, BackendConfig(name="lay", upstream="llamacpp")).name == EMBEDDED
    assert upstream_config(lay, BackendConfig(name="lay", upstream="llamacpp", executable="llama-server")).name == (
        "llamacpp"
    )
    # the engine's launch defaults (one slot per user for the embedded server) apply to the knobs
    assert engine_profile(lay, BackendConfig(name="lay", upstream="llamacpp")).name == EMBEDDED
    assert engine_profile(lay, BackendConfig(name="lay", upstream="none")) is lay


def test_bad_upstreams_name_the_flag(scripted):
    _, _, lay = scripted
    with pytest.raises(BackendError, match="--upstream lay is a serving layer"):
        upstream_config(lay, BackendConfig(name="lay", upstream="lay"))
    with pytest.raises(BackendError, match="--upstream eng: --backend vllm is an engine"):
        upstream_config(backends.PROFILES["vllm"], BackendConfig(name="vllm", upstream="eng"))
    with pytest.raises(BackendError, match="not a known backend"):
        upstream_config(lay, BackendConfig(name="lay", upstream="nope"))
    # an engine knob the upstream cannot map is refused before anything starts
    with pytest.raises(BackendError, match="--kv-memory"):
        check_launch(lay, BackendConfig(name="lay", upstream="llamacpp", knobs=EngineKnobs(kv_memory=0.5)))
