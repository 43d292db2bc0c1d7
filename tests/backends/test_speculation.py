"""Speculative decoding and per-request metrics knobs -> each engine's own flags (backends/
speculation.py): vLLM's --speculative-config JSON, SGLang's --speculative-* flags, llama.cpp's
--spec-type and draft flags, TensorRT-LLM's YAML (refused, naming it), Ray Serve LLM's
engine_kwargs; the knobs' own checks; an engine without them refuses them."""

from __future__ import annotations

import json

import pytest
import yaml
from pydantic import ValidationError

from tokenbench.backends import get_profile, ray
from tokenbench.backends.base import LaunchSpec, in_container
from tokenbench.config import EngineKnobs
from tokenbench.errors import BackendError

DRAFT = dict(spec_method="draft", spec_draft_model="/m/draft", spec_tokens=3)
NGRAM = dict(spec_method="ngram", spec_tokens=4, spec_ngram_max=5)


def _spec(model: str = "m", **knobs: object) -> LaunchSpec:
    return LaunchSpec(model=model, served_name="m", host="127.0.0.1", port=1, knobs=EngineKnobs(**knobs))


def _argv(profile: str, **knobs: object) -> list[str]:
    return list(get_profile(profile).local(_spec(**knobs)).argv)


def _after(argv: list[str], flag: str, n: int = 1) -> list[str]:
    i = argv.index(flag)
    return argv[i + 1 : i + 1 + n]


def _tail(argv: list[str], first: str) -> list[str]:
    return argv[argv.index(first) :]


def test_vllm_renders_one_speculative_config_json():
    argv = _argv("vllm", **DRAFT)
    assert json.loads(*_after(argv, "--speculative-config")) == {
        "method": "draft_model",
        "num_speculative_tokens": 3,
        "model": "/m/draft",
    }
    argv = _argv("vllm", **NGRAM, spec_ngram_min=2)
    config = json.loads(*_after(argv, "--speculative-config"))
    assert config == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 5}
    for ours, theirs in (("eagle", "eagle"), ("eagle3", "eagle3"), ("mtp", "mtp")):
        draft = {} if ours == "mtp" else {"spec_draft_model": "/h"}
        argv = _argv("vllm", spec_method=ours, **draft)
        assert json.loads(*_after(argv, "--speculative-config"))["method"] == theirs
    assert "--speculative-config" not in _argv("vllm")  # nothing set: nothing rendered


def test_vllm_per_request_metrics_and_detailed_speculation_figures():
    argv = _argv("vllm", per_request_metrics=True)
    assert "--enable-per-request-metrics" in argv and "--per-request-spec-decode-metrics" not in argv
    argv = _argv("vllm", **DRAFT, per_request_metrics=True)
    assert _tail(argv, "--enable-per-request-metrics") == [
        "--enable-per-request-metrics",
        "--per-request-spec-decode-metrics",
        "detailed",
    ]
    # speculation given as vLLM's own flag: the detailed figures still asked for, once
    own = ("--speculative-config", '{"method":"ngram","num_speculative_tokens":2}')
    argv = _argv("vllm", per_request_metrics=True, engine_args=own)
    assert _after(argv, "--per-request-spec-decode-metrics") == ["detailed"]
    argv = _argv("vllm", per_request_metrics=True, engine_args=(*own, "--per-request-spec-decode-metrics=summary"))
    assert argv.count("--per-request-spec-decode-metrics") == 0
    assert "--enable-per-request-metrics" not in _argv("vllm", per_request_metrics=False)


def test_vllm_refuses_what_it_would_refuse_itself():
    with pytest.raises(BackendError, match="--disable-log-stats: drop one"):
        _argv("vllm", per_request_metrics=True, engine_args=("--disable-log-stats",))
    with pytest.raises(BackendError, match="--engine-arg gives vLLM's own speculative flags too"):
        _argv("vllm", **DRAFT, engine_args=("--speculative-config={}",))


def test_sglang_renders_its_algorithm_steps_and_verify_width():
    argv = _argv("sglang", **DRAFT)
    assert _tail(argv, "--speculative-algorithm") == [
        *("--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "/m/draft"),
        *("--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"),
    ]
    argv = _argv("sglang", spec_method="ngram", spec_tokens=4)
    assert _tail(argv, "--speculative-algorithm") == [
        *("--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "5"),
    ]
    for ours, theirs in (("eagle", "EAGLE"), ("eagle3", "EAGLE3")):
        assert _after(_argv("sglang", spec_method=ours, spec_draft_model="/h"), "--speculative-algorithm") == [theirs]
    assert _tail(_argv("sglang", spec_method="mtp"), "--speculative-algorithm") == ["--speculative-algorithm", "NEXTN"]


def test_sglang_refuses_the_ngram_window_and_per_request_metrics():
    with pytest.raises(BackendError, match="SGLang has no native flag for --spec-ngram-max=5.*max-trie-depth"):
        _argv("sglang", **NGRAM)
    with pytest.raises(BackendError, match="no native flag for --per-request-metrics: .*sglang:spec_accept_length"):
        _argv("sglang", per_request_metrics=True)


def test_llamacpp_renders_spec_type_and_draft_flags_in_both_launches():
    expected = ["--spec-type", "draft-simple", "--spec-draft-model", "/m/draft", "--spec-draft-n-max", "3"]
    assert _tail(_argv("llamacpp", **DRAFT), "--spec-type") == expected
    ngram = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-m", "4", "--spec-ngram-simple-size-n", "5"]
    assert _tail(_argv("llamacpp", **NGRAM), "--spec-type") == ngram
    assert _after(_argv("llamacpp", spec_method="eagle3", spec_draft_model="/h"), "--spec-type") == ["draft-eagle3"]
    assert _after(_argv("llamacpp", spec_method="mtp", spec_tokens=2), "--spec-type", 3) == [
        *("draft-mtp", "--spec-draft-n-max", "2"),
    ]
    # the embedded server's child takes the same flags (tests/backends/test_xllamacpp_child.py)
    embedded = get_profile("xllamacpp").local(_spec(model=__file__, **DRAFT)).argv
    assert list(embedded[embedded.index("--spec-type") :][: len(expected)]) == expected
    # its timings carry the draft counts always: nothing to render
    assert _argv("llamacpp", per_request_metrics=True) == _argv("llamacpp")


def test_llamacpp_refuses_eagle_and_an_ngram_minimum():
    with pytest.raises(BackendError, match="llama.cpp has no native flag for --spec-method=eagle: .*draft-eagle3"):
        _argv("llamacpp", spec_method="eagle", spec_draft_model="/h")
    with pytest.raises(BackendError, match="--spec-ngram-min=2: .*set --spec-ngram-max only"):
        _argv("llamacpp", **NGRAM, spec_ngram_min=2)


def test_trtllm_refuses_naming_the_yaml_to_pass():
    with pytest.raises(BackendError) as info:
        _argv("trtllm", spec_method="eagle3", spec_draft_model="/m/eagle3", spec_tokens=3)
    message = str(info.value)
    assert "--engine-arg=--extra_llm_api_options --engine-arg=FILE" in message
    written = message.split("write '")[1].split("' to a file")[0]
    assert yaml.safe_load(written) == {
        "speculative_config": {"decoding_type": "Eagle3", "max_draft_len": 3, "speculative_model_dir": "/m/eagle3"}
    }
    with pytest.raises(BackendError) as info:
        _argv("trtllm", **NGRAM)
    written = str(info.value).split("write '")[1].split("' to a file")[0]
    config = yaml.safe_load(written)["speculative_config"]
    assert config == {"decoding_type": "NGram", "max_draft_len": 4, "max_matching_ngram_size": 5}
    with pytest.raises(BackendError) as info:
        _argv("trtllm", spec_method="mtp", spec_tokens=2)
    assert "{decoding_type: MTP, num_nextn_predict_layers: 2}" in str(info.value)
    with pytest.raises(
        BackendError, match="--per-request-metrics: it reports per-request figures at GET /perf_metrics"
    ):
        _argv("trtllm", per_request_metrics=True)


def test_ray_serve_llm_takes_vllms_speculative_config_in_engine_kwargs():
    config = ray.llm_config(_spec(**DRAFT), "m")
    assert config["engine_kwargs"] == {
        "speculative_config": {"method": "draft_model", "num_speculative_tokens": 3, "model": "/m/draft"}
    }
    with pytest.raises(BackendError, match="Ray Serve LLM has no native flag for --per-request-metrics"):
        ray.llm_config(_spec(per_request_metrics=True), "m")
    with pytest.raises(BackendError, match="Ray Serve LLM has no native flag for --lora-modules=a=/a"):
        ray.llm_config(_spec(lora_modules=("a=/a",)), "m")


@pytest.mark.parametrize("profile", ["tgi", "lmdeploy-pytorch", "mlc", "ollama"])
def test_engines_without_the_knobs_refuse_them(profile):
    with pytest.raises(BackendError, match="has no native flag for --spec-method=ngram; .*--engine-arg"):
        _argv(profile, spec_method="ngram")
    with pytest.raises(BackendError, match="has no native flag for --per-request-metrics; "):
        _argv(profile, per_request_metrics=True)
    _argv(profile, per_request_metrics=False)  # off is every engine's default: nothing to refuse


def test_a_local_draft_model_is_mounted_in_the_container(tmp_path):
    draft = tmp_path / "draft.gguf"
    draft.write_bytes(b"x")
    inside, volumes = in_container(_spec(spec_method="draft", spec_draft_model=str(draft)))
    assert inside.knobs.spec_draft_model == "/draft/draft.gguf"
    assert volumes[-2:] == ["-v", f"{tmp_path.resolve()}:/draft:ro"]
    argv = get_profile("llamacpp").container(_spec(spec_method="draft", spec_draft_model=str(draft))).argv
    assert _after(list(argv), "--spec-draft-model") == ["/draft/draft.gguf"]
    inside, volumes = in_container(_spec(spec_method="draft", spec_draft_model="org/draft"))  # a hub id: as is
    assert inside.knobs.spec_draft_model == "org/draft" and len(volumes) == 2


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        (dict(spec_tokens=3), "--spec-tokens needs --spec-method"),
        (dict(spec_tokens=3, spec_draft_model="/d"), "--spec-tokens, --spec-draft-model need --spec-method"),
        (dict(spec_method="eagle"), "--spec-method eagle drafts with another model: add --spec-draft-model"),
        (dict(spec_method="ngram", spec_draft_model="/d"), "drop --spec-draft-model"),
        (dict(spec_method="mtp", spec_ngram_max=3), "--spec-ngram-max sets --spec-method ngram's lookup, not mtp's"),
        (
            dict(spec_method="ngram", spec_ngram_min=5, spec_ngram_max=2),
            "--spec-ngram-min 5 is above --spec-ngram-max 2",
        ),
        (dict(spec_method="medusa"), "Input should be 'ngram', 'draft', 'eagle', 'eagle3' or 'mtp'"),
        (dict(spec_method="ngram", spec_tokens=0), "greater than 0"),
    ],
)
def test_the_knobs_check_each_other(knobs, message):
    with pytest.raises(ValidationError, match=message):
        EngineKnobs(**knobs)
