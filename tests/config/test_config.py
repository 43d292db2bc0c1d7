"""The settings tree: validation errors name the flag to change; load sweeps become load points;
the settings written to config.json are masked."""

import pytest
from pydantic import ValidationError

from tokenbench.config import (
    DatasetConfig,
    LoadSweep,
    RateLoad,
    ReplayLoad,
    RunConfig,
    SessionConfig,
    StopConfig,
    TargetConfig,
    UsersLoad,
)


@pytest.mark.parametrize(
    "build,needle",
    [
        (lambda: StopConfig(), "--duration and/or --max-requests"),
        (lambda: DatasetConfig(min_prompt_tokens=50, max_prompt_tokens=10), "--min-prompt-tokens 50 is above"),
        (lambda: LoadSweep(users=[1], rates=[2.0]), "not both"),
        (lambda: LoadSweep(), "exactly one"),
        (lambda: LoadSweep(rates=[1.0], burstiness=0.5, arrival="poisson"), "--arrival gamma"),
        (lambda: ReplayLoad(start_s=5, end_s=2), "--replay-end 2 must be after --replay-start 5"),
        (lambda: ReplayLoad(speed=0), "greater than 0"),
        (lambda: _run(DatasetConfig(name="trace", path="t.jsonl"), RateLoad(rate_per_s=1)), "drop --users/--rate"),
        (lambda: _run(DatasetConfig(), ReplayLoad()), "--dataset trace --dataset-path FILE"),
        (lambda: _run(DatasetConfig(), UsersLoad(users=1), schedule_ends=True), "only a trace replay ends"),
        (lambda: DatasetConfig(name="trace"), "--dataset trace needs --dataset-path"),
        (lambda: DatasetConfig(block_size=16), "--block-size describe a trace"),
        (lambda: DatasetConfig(sharegpt_sampling="vllm"), "--sharegpt-sampling vllm draws ShareGPT prompts"),
        (lambda: DatasetConfig(name="dolly", sharegpt_sampling="sglang"), "use it with --dataset sharegpt"),
        (
            lambda: _run(DatasetConfig(name="sharegpt", sharegpt_sampling="vllm"), UsersLoad(users=1), sessions=True),
            "--sharegpt-sampling vllm draws single prompts .*--multi-turn",
        ),
    ],
)
def test_a_bad_setting_is_an_error_naming_what_to_change(build, needle):
    with pytest.raises(ValidationError, match=needle):
        build()


def _run(dataset: DatasetConfig, load, schedule_ends: bool = False, sessions: bool = False) -> RunConfig:
    stop = StopConfig(schedule_ends=True) if schedule_ends else StopConfig(max_requests=1)
    return RunConfig(loads=[load], stop=stop, dataset=dataset, sessions=SessionConfig() if sessions else None)


def test_sharegpt_sampling_defaults_to_tokenbenchs_own_and_is_taken_with_sharegpt():
    assert DatasetConfig().sharegpt_sampling == "tokenbench"
    assert DatasetConfig(name="sharegpt", sharegpt_sampling="sglang").sharegpt_sampling == "sglang"
    # tokenbench's own sampling is the conversations --multi-turn reads turn by turn: taken
    assert _run(DatasetConfig(name="sharegpt"), UsersLoad(users=1), sessions=True).sessions is not None


def test_a_trace_replay_needs_no_duration_its_schedule_ends_it():
    cfg = RunConfig(
        loads=[ReplayLoad(speed=2, jitter_s=0.5)],
        stop=StopConfig(schedule_ends=True),
        dataset=DatasetConfig(name="trace", path="t.jsonl", trace_format="mooncake", block_size=16),
    )
    assert cfg.stop.duration_s is None and cfg.stop.max_requests is None
    assert cfg.loads[0].kind == "replay" and cfg.loads[0].speed == 2
    # the load's kind picks its type when read back from config.json
    again = RunConfig.model_validate(cfg.model_dump(mode="json"))
    assert again.loads == cfg.loads


def test_a_sweep_is_one_point_per_value_and_burstiness_means_gamma():
    assert LoadSweep(users=[2, 8], ramp_up_s=4).points() == [
        UsersLoad(users=2, ramp_up_s=4),
        UsersLoad(users=8, ramp_up_s=4),
    ]
    (point,) = LoadSweep(rates=[3.0], burstiness=0.5, max_concurrency=2).points()
    assert point == RateLoad(rate_per_s=3.0, arrival="gamma", burstiness=0.5, max_concurrency=2)
    assert LoadSweep(rates=[1.0]).points()[0].arrival == "poisson"


def test_the_settings_written_are_masked():
    cfg = RunConfig(
        target=TargetConfig(url="http://h:1", headers={"X-Gateway": "gw-value"}, extra_body={"api_key": "k-123"}),
        loads=[UsersLoad(users=1)],
        stop=StopConfig(max_requests=1),
    )
    data = cfg.redacted()
    assert data["target"]["headers"] == {"X-Gateway": "***"}
    assert data["target"]["extra_body"] == {"api_key": "***"}
    assert data["target"]["url"] == "http://h:1" and data["loads"][0]["users"] == 1


def test_a_trace_refuses_unique_prefixes_that_would_break_its_shared_ones():
    with pytest.raises(ValidationError, match="--unique-prefix would break the trace's shared prefixes"):
        DatasetConfig(name="trace", path="t.jsonl", unique_prefix=True)
    assert DatasetConfig(name="trace", path="t.jsonl").unique_prefix is False
