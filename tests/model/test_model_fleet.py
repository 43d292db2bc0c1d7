"""A fleet run as the model predicts it: its replicas from its settings, its router's policy as
the model's routing, and a policy the model has no model of refused with what to do."""

import pytest

from tokenbench.config import BackendConfig
from tokenbench.errors import BadInput
from tokenbench.model.validate import fleet_of


def test_a_single_server_is_one_replica():
    assert fleet_of(None).replicas == 1 and fleet_of(BackendConfig(name="vllm")).replicas == 1


def test_launched_and_attached_fleets_give_their_replicas_and_routing():
    launched = fleet_of(BackendConfig(name="vllm-router", replicas=3, layer_args=("policy=round_robin",)))
    assert (launched.replicas, launched.routing, launched.policy) == (3, "round-robin", "round_robin")
    attached = BackendConfig(
        replica_urls=("http://127.0.0.1:1", "http://127.0.0.1:2"), layer_args=("policy=power_of_two",)
    )
    assert (fleet_of(attached).replicas, fleet_of(attached).routing) == (2, "least-loaded")


def test_a_policy_the_model_does_not_have_is_refused():
    launched = fleet_of(BackendConfig(name="vllm-router", replicas=2))  # the router profile's default
    assert (launched.routing, launched.policy) == ("round-robin", "round_robin")
    with pytest.raises(BadInput, match="routes by cache_aware.*policy=round_robin"):
        fleet_of(BackendConfig(name="vllm-router", replicas=2, layer_args=("policy=cache_aware",)))
    with pytest.raises(BadInput, match="routing is not known"):
        fleet_of(BackendConfig(replica_urls=("http://127.0.0.1:1", "http://127.0.0.1:2")))
    with pytest.raises(BadInput, match="routes by power_of_two"):
        fleet_of(BackendConfig(name="vllm-router", replicas=3, layer_args=("policy=power_of_two",)))
