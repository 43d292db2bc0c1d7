"""--layer-arg (BackendConfig.layer_args): a serving layer's own settings reach the layer's command
and never its engine's; without an upstream the layer is its own engine and gets them beside
--engine-arg; an engine profile refuses them."""

import json
from types import SimpleNamespace

import pytest

from tokenbench.backends import BackendError, get_profile
from tokenbench.backends.server import launch_spec
from tokenbench.config import BackendConfig, EngineKnobs

LAYER_ARGS = ("stream_batching_interval_ms=25",)


def test_with_an_upstream_the_layer_gets_only_its_layer_args():
    ray = get_profile("ray")
    engine = SimpleNamespace(
        url="http://127.0.0.1:9000",
        spec=SimpleNamespace(model="/m.gguf", served_name="smol"),
    )
    config = BackendConfig(
        name="ray", knobs=EngineKnobs(max_num_seqs=4, engine_args=("--threads=1",)), layer_args=LAYER_ARGS
    )
    spec = launch_spec(ray, config, port=8300, upstream=engine)  # type: ignore[arg-type]
    assert spec.knobs == EngineKnobs(engine_args=LAYER_ARGS)
    relay = json.loads(ray.local(spec).argv[-1])["relay"]
    assert (relay["batch_interval_ms"], relay["upstream_model"]) == (25.0, "smol")


def test_without_an_upstream_layer_args_join_the_engine_args():
    ray = get_profile("ray")
    config = BackendConfig(
        name="ray", model="m", knobs=EngineKnobs(engine_args=("max_num_batched_tokens=64",)), layer_args=LAYER_ARGS
    )
    spec = launch_spec(ray, config, port=8300)
    assert spec.knobs.engine_args == ("max_num_batched_tokens=64", *LAYER_ARGS)
    llm = json.loads(ray.local(spec).argv[-1])["llm_config"]
    assert llm["experimental_configs"] == {"stream_batching_interval_ms": 25}


def test_an_engine_refuses_layer_args():
    with pytest.raises(BackendError, match="--layer-arg is for a serving layer"):
        launch_spec(get_profile("vllm"), BackendConfig(name="vllm", model="m", layer_args=LAYER_ARGS))
