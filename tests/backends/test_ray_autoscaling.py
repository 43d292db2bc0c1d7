"""The ray profile's relay with Serve autoscaling, without Ray: --layer-arg autoscaling=... as
Serve's autoscaling_config in the relay's settings, the scaler the launch answers at, and the
relay app naming its replica in x-served-by."""

from __future__ import annotations

import json

import pytest
from test_profiles_ray import relay_spec
from test_ray_serve_app import relay, upstream

from tokenbench.backends import ray as ray_profile
from tokenbench.backends.ray_serve_app import ServeConfig
from tokenbench.errors import BackendError
from tokenbench.mock import MockServer
from tokenbench.mock.settings import MockSettings

pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")


def test_autoscaling_keys_are_serves_autoscaling_config():
    spec = relay_spec("autoscaling=min:1,max:2,target_ongoing:2,upscale_delay:1,downscale_delay:5,look_back:2")
    config = ServeConfig.from_json(ray_profile.local(spec).argv[3])
    assert config.autoscaling == {
        "min_replicas": 1,
        "max_replicas": 2,
        "target_ongoing_requests": 2.0,
        "upscale_delay_s": 1.0,
        "downscale_delay_s": 5.0,
        "look_back_period_s": 2.0,
    }
    assert config.replicas_port == 8302  # the metrics port (8301) + 1
    target = ray_profile.PROFILE.scaler(spec) if ray_profile.PROFILE.scaler else None
    assert target is not None
    assert (target.url, target.kind) == ("http://127.0.0.1:8302/api/serve/applications/", "ray-serve")


def test_without_autoscaling_the_command_is_unchanged_and_there_is_no_scaler():
    spec = relay_spec()
    assert "autoscaling" not in json.loads(ray_profile.local(spec).argv[3])
    assert ray_profile.scaler(spec) is None


@pytest.mark.parametrize(
    ("text", "says"), [("min:1", "needs max:N"), ("max:two", "KEY:NUMBER"), ("most:2", "min, max, target_ongoing")]
)
def test_autoscaling_settings_that_serve_would_not_take_are_refused(text, says):
    with pytest.raises(BackendError, match=says):
        ray_profile.local(relay_spec(f"autoscaling={text}"))


async def test_each_relayed_reply_names_the_replica():
    mock = MockServer(MockSettings(ttft_ms=0, itl_ms=0))
    body = {"model": "layer-model", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 2}
    async with upstream(mock.app) as url, relay(url, served_by="r7x2k9ab") as (session, base):
        async with session.post(base + "/v1/chat/completions", json=body) as resp:
            await resp.read()
            assert resp.status == 200 and resp.headers["x-served-by"] == "r7x2k9ab"
        async with session.post(base + "/v1/completions", json={**body, "stream": False}) as resp:
            assert resp.headers["x-served-by"] == "r7x2k9ab"
    async with upstream(mock.app) as url, relay(url) as (session, base):  # outside Serve: no replica
        async with session.post(base + "/v1/chat/completions", json=body) as resp:
            await resp.read()
            assert "x-served-by" not in resp.headers
