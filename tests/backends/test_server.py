"""The one seam for the server a run measures (backends/server.py): attach to a URL or launch a profile (the launch
itself is proven on real engines in tests/e2e); the profile prepares its own launch defaults."""

import pytest

from tokenbench.backends import EMBEDDED, BackendError
from tokenbench.backends.server import server_under_test
from tokenbench.config import (
    BackendConfig,
    DatasetConfig,
    EngineKnobs,
    RateLoad,
    RunConfig,
    StopConfig,
    TargetConfig,
    UsersLoad,
)
from tokenbench.run import _launch


def test_attach_to_a_server_tokenbench_knows_nothing_of(tmp_path):
    with server_under_test(None, "http://127.0.0.1:9", tmp_path / "server.log") as sut:
        assert (sut.url, sut.model, sut.profile, sut.metrics_url) == ("http://127.0.0.1:9", None, None, None)
        assert sut.facts.to_json() == {"backend": "attached", "engine": None}
        assert sut.facts.backend is None  # "attached" is the JSON's word for it, not a value to test for
    assert not (tmp_path / "server.log").exists()  # nothing launched, nothing logged


def test_attach_with_a_profile_scrapes_its_metrics(tmp_path):
    with server_under_test(BackendConfig(name="vllm"), "http://h:8000", tmp_path / "log") as sut:
        assert sut.profile.name == "vllm" and sut.metrics_url == "http://h:8000/metrics"
        assert sut.facts.to_json() == {"backend": "vllm", "engine": sut.profile.title}
    override = BackendConfig(name="vllm", metrics_url="http://h:9/m")
    with server_under_test(override, "http://h:8000", tmp_path / "log") as sut:
        assert sut.metrics_url == "http://h:9/m"
    with server_under_test(BackendConfig(metrics_url="http://h:9/m"), "http://h:8000", tmp_path / "log") as sut:
        assert sut.profile is None and sut.metrics_url == "http://h:9/m"


def test_nothing_to_attach_to_or_launch_is_an_error(tmp_path):
    with pytest.raises(BackendError, match="--url"):
        with server_under_test(None, None, tmp_path / "log"):
            pass


def _config(loads, backend=None, url=None, model=None):
    return RunConfig(
        target=TargetConfig(url=url, model=model),
        loads=loads,
        backend=backend,
        stop=StopConfig(duration_s=5),
        dataset=DatasetConfig(),
    )


def test_the_embedded_profile_gives_one_slot_per_user_unless_told():
    launch = _launch(_config([UsersLoad(users=3), RateLoad(rate_per_s=1, max_concurrency=7)], model="m.gguf"))
    assert launch.name == EMBEDDED and launch.knobs.max_num_seqs == 7 and launch.model == "m.gguf"
    told = BackendConfig(name=EMBEDDED, knobs=EngineKnobs(max_num_seqs=2))
    assert _launch(_config([UsersLoad(users=3)], backend=told)).knobs.max_num_seqs == 2
    vllm = BackendConfig(name="vllm", model="org/m")  # other profiles: the settings as given
    assert _launch(_config([UsersLoad(users=3)], backend=vllm)) == vllm
    assert _launch(_config([UsersLoad(users=3)], url="http://h:1")) is None


def test_a_launched_servers_facts_are_what_config_json_says_of_it(tmp_path):
    """Before it starts (no version, no cold start yet): every key results.json's target spreads."""
    from tokenbench.backends import get_profile
    from tokenbench.backends.server import ManagedServer
    from tokenbench.common.redact import mask_argv
    from tokenbench.results.manifest import ServerFacts

    server = ManagedServer(get_profile("vllm"), BackendConfig(name="vllm", model="org/m", port=18999), tmp_path / "log")
    facts = server.describe()
    assert (facts.backend, facts.engine, facts.engine_version, facts.cold_start_s) == ("vllm", "vLLM", None, None)
    data = facts.to_json()
    assert list(data) == [
        "backend",
        "engine",
        "engine_version",
        "cold_start_s",
        "cold_start_includes",
        "command",
        "command_env",
        "knobs",
        "engine_model",
        "log",
    ]
    assert data["command"] == mask_argv(server.launch.argv) and data["log"] == str(tmp_path / "log")
    assert data["knobs"] == EngineKnobs().model_dump(mode="json") and data["engine_model"] == "org/m"
    assert ServerFacts.from_json(data) == facts
