"""Experiment files: validation names the field; expansion into servers and cells."""

import pytest

from tokenbench.experiments.presets import PRESETS, preset, preset_data
from tokenbench.experiments.spec import ExperimentError, expand, load_spec, parse_spec

BASE = {
    "name": "t",
    "backends": [{"backend": "xllamacpp", "sweep": {"max_num_seqs": [2, 4]}}],
    "load": {"users": [1, 2]},
    "stop": {"duration_s": 5},
    "variants": [{"label": "a"}, {"label": "b", "system_prompt": "be brief"}],
    "trials": 3,
}


def test_expansion_gives_one_server_per_sweep_value_and_one_cell_per_variant_and_trial():
    plans = expand(parse_spec(BASE))
    assert [p.label for p in plans] == ["xllamacpp_max_num_seqs=2", "xllamacpp_max_num_seqs=4"]
    assert [p.backend.knobs.max_num_seqs for p in plans] == [2, 4]
    cells = plans[0].cells
    assert len(cells) == 6 and len({c.id for c in cells}) == 6
    assert {c.config.dataset.system_prompt for c in cells} == {None, "be brief"}
    assert len({c.config.seed for c in cells}) == 3  # each trial its own seed
    assert [len(c.config.loads) for c in cells] == [2] * 6


def test_a_variant_may_send_shared_prefix_groups():
    variants = [{"label": "own"}, {"label": "shared", "prefix_groups": 4, "prefix_tokens": 64, "prefix_skew": 1.2}]
    cells = expand(parse_spec({**BASE, "variants": variants, "trials": 1}))[0].cells
    by_variant = {c.variant: c.config.dataset for c in cells}
    assert by_variant["own"].prefix_groups is None
    shared = by_variant["shared"]
    assert (shared.prefix_groups, shared.prefix_tokens, shared.prefix_skew) == (4, 64, 1.2)
    with pytest.raises(ExperimentError, match="variant 'x': --prefix-groups and --prefix-tokens go together"):
        parse_spec({**BASE, "variants": [{"label": "x", "prefix_groups": 4}]})


def test_deadlines_reach_every_cell_and_default_to_etalons():
    cells = expand(parse_spec({**BASE, "deadlines": {"ttft_s": 0.2, "tbt_s": 0.02}}))[0].cells
    assert {(c.config.deadlines.ttft_s, c.config.deadlines.tbt_s) for c in cells} == {(0.2, 0.02)}
    plain = expand(parse_spec(BASE))[0].cells[0].config.deadlines
    assert (plain.ttft_s, plain.tbt_s) == (0.1, 0.05)
    with pytest.raises(ExperimentError, match="deadlines.tbt_s"):
        parse_spec({**BASE, "deadlines": {"tbt_s": 0}})


@pytest.mark.parametrize(
    "patch,needle",
    [
        ({"trials": 0}, "trials"),
        ({"load": {"users": [1], "rates": [1.0]}}, "load: give users"),
        ({"backends": [{"backend": "vllm", "sweep": {"max_seqs": [1]}}]}, "backends.0.sweep"),
        ({"backends": [{"url": "http://127.0.0.1:1", "knobs": {"max_num_seqs": 4}}]}, "drop url"),
        ({"stop": {"duraton_s": 5}}, "stop.duraton_s"),
        ({"variants": [{"label": "x"}, {"label": "x"}]}, "unique"),
        ({"backends": []}, "backends"),
    ],
)
def test_bad_fields_are_named(patch, needle):
    with pytest.raises(ExperimentError) as exc:
        parse_spec({**BASE, **patch})
    assert needle in str(exc.value)


def test_yaml_errors_name_the_file(tmp_path):
    bad = tmp_path / "e.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(ExperimentError, match="e.yaml: not valid YAML"):
        load_spec(bad)
    with pytest.raises(ExperimentError, match="no such experiment file"):
        load_spec(tmp_path / "missing.yaml")


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_full_presets_validate(name):
    spec = preset(name, "full")
    assert spec.trials >= 1 and expand(spec)


def test_small_users_preset_is_cpu_sized():
    data = preset_data("users", "small")
    spec = parse_spec(data)
    assert spec.backends[0].backend == "xllamacpp"
    assert spec.load.users == [1, 2, 4] and {v.label for v in spec.variants} == {"no-system", "system"}
    total_s = len(spec.variants) * len(spec.load.users) * spec.stop.duration_s
    assert total_s <= 180  # minutes, not hours


REPLAY = {
    "name": "replay",
    "backends": [{"url": "http://127.0.0.1:9", "backend": "vllm"}],
    "load": {"replay": {"speeds": [1, 4], "start_s": 10, "end_s": 70, "jitter_s": 1.5}, "max_concurrency": 8},
    "stop": {"drain_timeout_s": 5},
    "dataset": {"name": "trace", "path": "trace.jsonl", "block_size": 16},
}


def test_a_replay_experiment_replays_the_trace_once_per_speed_and_ends_by_its_schedule():
    spec = parse_spec(REPLAY)
    assert spec.stop.schedule_ends and spec.stop.duration_s is None
    (cell,) = expand(spec)[0].cells
    assert [(p.kind, p.speed, p.start_s, p.end_s, p.jitter_s, p.max_concurrency) for p in cell.config.loads] == [
        ("replay", 1.0, 10, 70, 1.5, 8),
        ("replay", 4.0, 10, 70, 1.5, 8),
    ]
    assert cell.config.dataset.name == "trace" and cell.config.stop.schedule_ends


def test_a_replay_experiment_with_a_duration_keeps_it():
    spec = parse_spec({**REPLAY, "stop": {"duration_s": 30}})
    assert not spec.stop.schedule_ends and spec.stop.duration_s == 30


@pytest.mark.parametrize(
    "patch,needle",
    [
        ({"dataset": {"input_tokens": 16}}, "load.replay replays a trace"),
        ({"load": {"users": [1]}, "stop": {"duration_s": 5}}, "use load: {replay"),
        ({"load": {"replay": {"speeds": [0]}}}, "speeds must be > 0"),
        ({"load": {"users": [1], "replay": {"speeds": [1]}}}, "exactly one"),
    ],
)
def test_bad_replay_experiments_are_named(patch, needle):
    with pytest.raises(ExperimentError) as exc:
        parse_spec({**REPLAY, **patch})
    assert needle in str(exc.value)


def test_each_backend_entry_may_state_its_hardware_price():
    backends = [
        {"label": "big", "backend": "vllm", "model": "m", "cost_per_hour": 2.5, "gpus": 4},
        {"label": "one", "backend": "vllm", "model": "m", "cost_per_hour": 1.2},
        {"label": "free", "backend": "vllm", "model": "m"},
    ]
    plans = expand(parse_spec({**BASE, "backends": backends, "trials": 1}))
    costs = {p.label: {c.config.cost for c in p.cells} for p in plans}
    assert [(c.usd_per_gpu_hour, c.gpus, c.usd_per_hour) for c in costs["big"]] == [(2.5, 4, 10.0)]
    assert [(c.usd_per_gpu_hour, c.gpus) for c in costs["one"]] == [(1.2, 1)]  # one GPU by default
    assert costs["free"] == {None}


@pytest.mark.parametrize(
    "entry,needle",
    [
        ({"backend": "vllm", "gpus": 2}, "gpus counts the GPUs cost_per_hour pays for"),
        ({"backend": "vllm", "cost_per_hour": 0}, "backends.0.cost_per_hour"),
        ({"backend": "vllm", "cost_per_hour": 1, "gpus": 0}, "backends.0.gpus"),
    ],
)
def test_a_bad_price_is_named(entry, needle):
    with pytest.raises(ExperimentError, match=needle):
        parse_spec({**BASE, "backends": [entry]})


def test_a_serving_layer_entry_names_its_upstream_engine():
    backends = [{"label": "behind", "backend": "triton", "upstream": "llamacpp"}, {"backend": "xllamacpp"}]
    plans = expand(parse_spec({**BASE, "backends": backends, "trials": 1}))
    assert [(p.backend.name, p.backend.upstream) for p in plans] == [("triton", "llamacpp"), ("xllamacpp", None)]


def test_a_variant_may_send_its_own_lora_mix_and_workload_mix():
    mix = {"classes": [{"name": "hi", "share": 1, "priority": 0}, {"name": "lo", "share": 3, "priority": 9}]}
    variants = [{"label": "one", "lora_mix": {"a": 1}}, {"label": "four", "lora_mix": {"a": 1, "b": 1}, "mix": mix}]
    spec = {**BASE, "variants": variants, "trials": 1, "lora_mix": {"z": 1}, "tenant_header": "X-Org"}
    cells = expand(parse_spec(spec))[0].cells
    by_variant = {c.variant: c.config for c in cells}
    assert by_variant["one"].lora_mix == {"a": 1.0} and by_variant["one"].mix is None
    assert by_variant["four"].lora_mix == {"a": 1.0, "b": 1.0} and by_variant["four"].tenant_header == "X-Org"
    assert by_variant["four"].mix is not None and [c.priority for c in by_variant["four"].mix.classes] == [0, 9]
    assert by_variant["four"].dataset == by_variant["one"].dataset  # not dataset fields


def test_a_staged_load_needs_no_stop_its_stages_end_it():
    spec = {**BASE, "load": {"stages": "rate=2:10s, rate=8:10s ramp=2s"}, "trials": 1, "variants": [{"label": "a"}]}
    del spec["stop"]
    (cell,) = expand(parse_spec(spec))[0].cells[:1]
    assert cell.config.stop.duration_s == 20 and cell.config.loads[0].kind == "staged"
    shaped = {**spec, "load": {"shape": "spike:base=1,peak=4,at=5s,for=5s"}, "stop": {"duration_s": 30}}
    (cell,) = expand(parse_spec(shaped))[0].cells[:1]
    assert cell.config.stop.duration_s == 30 and cell.config.loads[0].stages[-1].duration_s == 20
