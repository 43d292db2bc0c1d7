"""An experiment file's run settings are the run models' own (config/): every field of them is taken
where its model is, with its checks, and reaches the cells; nothing in spec.py restates one."""

import json
from pathlib import Path

import pytest
from pydantic import Field, ValidationError

from tokenbench.config import BackendConfig, DatasetConfig, RunConfig, TargetConfig
from tokenbench.config.cost import CostConfig
from tokenbench.experiments.overlays import Fields, Layer
from tokenbench.experiments.presets import PRESETS, preset
from tokenbench.experiments.runner import _resumes, stored_spec
from tokenbench.experiments.spec import (
    ADDRESS,
    EXPERIMENT_OWN,
    SERVER_LIFE,
    BackendEntry,
    ExperimentError,
    ExperimentSpec,
    Variant,
    expand,
    parse_spec,
    same_experiment,
)

BASE = {
    "name": "t",
    "backends": [{"backend": "xllamacpp"}],
    "load": {"users": [1]},
    "stop": {"duration_s": 5},
}
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _keys(layered: type) -> set[str]:
    return set(layered.LAYER.model.model_fields)


def test_every_field_of_the_run_models_is_taken_where_its_model_is():
    """Read from the run models themselves: a field added to one is in these sets with no edit
    to spec.py. Left out are only what the experiment sets itself and a server's address."""
    run = set(RunConfig.model_fields) - EXPERIMENT_OWN
    target = set(TargetConfig.model_fields)
    assert _keys(ExperimentSpec) == run | (target - ADDRESS) | {"metrics_interval_s"}
    assert _keys(Variant) == set(DatasetConfig.model_fields) | (target - ADDRESS) | (run - SERVER_LIFE - {"dataset"})
    renamed = {"name": "backend", "executable": "engine_bin", "usd_per_gpu_hour": "cost_per_hour"}
    server = {renamed.get(f, f) for f in (*BackendConfig.model_fields, *CostConfig.model_fields)}
    assert _keys(BackendEntry) == server | (target - {"model"})
    for layered in (ExperimentSpec, Variant, BackendEntry):  # no run setting hidden by one of the file's own keys
        assert not _keys(layered) & set(layered.model_fields)


def test_what_a_variant_or_entry_leaves_out_is_not_set_and_the_top_level_has_the_runs_defaults():
    for layered in (Variant, BackendEntry):
        fields = layered.LAYER.model.model_fields.values()
        assert all(not f.is_required() and f.get_default(call_default_factory=True) is None for f in fields)
    top = ExperimentSpec.LAYER.model.model_fields
    for model in (RunConfig, TargetConfig):
        for name, info in model.model_fields.items():
            if name in top:
                assert top[name].is_required() == info.is_required()
                if not info.is_required():
                    assert top[name].get_default(call_default_factory=True) == _default(model, name)


def _default(model, name):
    return model.model_fields[name].get_default(call_default_factory=True)


@pytest.mark.parametrize(
    "model,name",
    [(DatasetConfig, n) for n in DatasetConfig.model_fields]
    + [(TargetConfig, n) for n in TargetConfig.model_fields if n not in ADDRESS]
    + [(RunConfig, n) for n in RunConfig.model_fields if n not in EXPERIMENT_OWN | SERVER_LIFE | {"dataset", "stop"}],
)
def test_a_variant_takes_every_run_setting_and_its_cells_get_it(model, name):
    """Each setting a variant may give, written as its default, parses and reaches the variant's cells
    (a null is 'not set': the experiment's, here that same default)."""
    value = _default(model, name)
    data = value.model_dump() if hasattr(value, "model_dump") else value
    spec = parse_spec({**BASE, "variants": [{"label": "v", name: data}]})
    (cell,) = expand(spec)[0].cells
    section = {DatasetConfig: cell.config.dataset, TargetConfig: cell.config.target, RunConfig: cell.config}[model]
    assert getattr(section, name) == value


def test_a_field_added_to_a_run_model_is_taken_with_its_type_and_constraints():
    class Wider(DatasetConfig):
        flavour: int | None = Field(default=None, gt=0)

    layer = Layer("variant", (Fields(Wider, "dataset"),), unset=True)
    assert layer.validated({"flavour": 3, "input_tokens": None}) == {"flavour": 3}  # null: not set
    assert layer.routed({"flavour": 3})["dataset"] == {"flavour": 3}
    with pytest.raises(ValidationError, match="flavour"):
        layer.validated({"flavour": 0})


def test_settings_the_hand_written_lists_left_out_reach_the_cells():
    spec = parse_spec(
        {
            **BASE,
            "backends": [
                {"label": "a", "backend": "vllm", "model": "m", "port": 8123, "headers": {"X-Pool": "a"}},
                {
                    "label": "b",
                    "url": "http://127.0.0.1:9",
                    "backend": "vllm",
                    "metrics_interval_s": 0.5,
                    "request_timeout_s": 30,
                },
            ],
            "keep_text": True,
            "temperature": None,  # the top level keeps a null: no temperature sent
            "stop": {"duration_s": 5, "drain_timeout_s": 2},
            "variants": [
                {"label": "plain"},
                {"label": "own", "num_prompts": 7, "extra_body": {"top_p": 0.9}, "slo": "ttft=1s", "seed": 3},
            ],
        }
    )
    plans = {p.label: p for p in expand(spec)}
    assert plans["a"].backend.port == 8123 and plans["b"].backend is None and plans["b"].url == "http://127.0.0.1:9"
    cells = {(p, c.variant): c.config for p, plan in plans.items() for c in plan.cells}
    assert cells["a", "plain"].keep_text and cells["a", "plain"].target.temperature is None
    assert cells["a", "plain"].target.headers == {"X-Pool": "a"} and cells["b", "plain"].target.headers == {}
    assert cells["b", "own"].target.request_timeout_s == 30 and cells["b", "own"].backend.metrics_interval_s == 0.5
    own, plain = cells["a", "own"], cells["a", "plain"]
    assert (own.dataset.num_prompts, plain.dataset.num_prompts) == (7, 1000)
    assert own.target.extra_body == {"top_p": 0.9} and own.slo.ttft_s == 1.0 and plain.slo.ttft_s is None
    assert (own.seed, plain.seed) == (3, 0)


@pytest.mark.parametrize(
    "patch,needle",
    [
        ({"variants": [{"label": "a"}, {"label": "b", "input_tokns": 3}]}, "variants.1.input_tokns: Extra inputs"),
        ({"backends": [{"backend": "vllm", "modle": "m"}]}, "backends.0.modle: Extra inputs"),
        ({"ignore_eso": True}, "ignore_eso: Extra inputs"),
        ({"variants": [{"label": "a", "trials": 2}]}, "variants.0.trials: Extra inputs"),  # the experiment's own
        ({"variants": [{"label": "a", "prefix_cache": "reset"}]}, "variants.0.prefix_cache: Extra"),  # a server's
        ({"variants": [{"label": "a", "num_prompts": 0}]}, "variants.0.num_prompts: Input should be greater than 0"),
        ({"backends": [{"backend": "vllm", "port": 70000}]}, "backends.0.port: Input should be less than 65536"),
        ({"backends": [{"url": "http://h:1/v1"}]}, "backends.0.url: drop the /v1"),
        ({"variants": [{"label": "a", "lora_mix": {"a": -1}}]}, "variants.0.lora_mix: --lora-mix: 'a' needs"),
        ({"tenant_header": "X Org"}, "tenant_header: --tenant-header 'X Org' is not an HTTP header name"),
        ({"backends": [{"backend": "vllm", "sweep": {"max_num_seqs": [2, 0]}}]}, "backends.0.sweep.max_num_seqs"),
        ({"variants": [{"label": "a", "tool_choice": "auto"}]}, "variant 'a': --tool-choice needs --tools"),
        ({"batch_size": 2}, "experiment: --batch-size 2 sets the inputs of a pooling request"),
        (
            {"sessions": {}, "backends": [{"backend": "vllm"}, {"backend": "vllm", "label": "e", "api": "embeddings"}]},
            "backends.1: --multi-turn sends conversations",
        ),
    ],
)
def test_a_bad_setting_is_named_where_it_is_when_the_file_is_read(patch, needle):
    with pytest.raises(ExperimentError) as exc:
        parse_spec({**BASE, **patch})
    assert needle in str(exc.value)


def test_an_experiment_json_an_earlier_version_wrote_resumes():
    """Its spec spelt out every default of the hand-written entries: read back, it is the same
    experiment as its file; other settings are still another experiment."""
    earlier = json.loads((FIXTURES / "experiment_spec_0.2.1.json").read_text())
    doc = {
        "name": "t",
        "backends": [
            {"backend": "vllm", "model": "m", "sweep": {"max_num_seqs": [2, 4]}, "cost_per_hour": 2},
            {"url": "http://127.0.0.1:9", "backend": "vllm", "api": "completions"},
        ],
        "load": {"users": [1, 2]},
        "stop": {"duration_s": 5},
        "dataset": {"input_tokens": 16},
        "variants": [{"label": "a"}, {"label": "b", "system_prompt": "be brief", "output_tokens": 8}],
        "trials": 2,
        "api": "chat",
    }
    spec = parse_spec(doc)
    assert earlier != stored_spec(spec) and _resumes(earlier, stored_spec(spec))
    assert not _resumes(earlier, stored_spec(parse_spec({**doc, "trials": 3})))
    assert not _resumes(earlier, stored_spec(parse_spec({**doc, "dataset": {"input_tokens": 17}})))


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_spec_experiment_json_holds_reads_back_to_the_same_experiment(name):
    spec = preset(name, "full")
    again = parse_spec(stored_spec(spec))
    assert same_experiment(spec, again) and again.model_dump() == spec.model_dump()


def test_experiment_json_masks_a_request_headers_value():
    spec = parse_spec({**BASE, "variants": [{"label": "a", "headers": {"X-Gateway": "plantedSpecGateway0042"}}]})
    stored = json.dumps(stored_spec(spec))
    assert "X-Gateway" in stored and "plantedSpecGateway0042" not in stored


def test_with_settings_is_the_file_with_them():
    spec = parse_spec({**BASE, "variants": [{"label": "a"}, {"label": "b", "input_tokens": 9}]})
    traced = spec.with_settings(server_traces=True)
    assert traced.settings()["server_traces"] and not spec.settings()["server_traces"]
    assert [c.config.model_copy(update={"server_traces": False}) for c in expand(traced)[0].cells] == [
        c.config for c in expand(spec)[0].cells
    ]
