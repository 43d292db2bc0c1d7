"""cli/run_flags.py: run's options (by parameter name) -> RunConfig. A plain flag reaches its field
with no code of its own; the parsed ones (lists, headers, JSON, deadlines), the scenario and the
flags that only mean something with another are this module's."""

from __future__ import annotations

from typing import Any

import pytest

from tokenbench.cli.common import UsageError
from tokenbench.cli.flags import run_options
from tokenbench.cli.run_flags import DEFAULT_DURATION_S, DEFAULT_USERS, run_config
from tokenbench.config import RunConfig, UsersLoad, WorkersConfig


def _nothing_given() -> dict[str, Any]:
    return {o.param: None for o in run_options()}


def test_dataset_trace_is_one_replay_point_ended_by_the_trace():
    from tokenbench.cli.run_flags import run_config
    from tokenbench.config import ReplayLoad

    params = _nothing_given()
    params.update(
        dataset="trace", dataset_path="t.jsonl", replay_speed=2.0, replay_jitter=0.5, max_concurrency=3, block_size=16
    )
    cfg = run_config(params)
    assert cfg.loads == [ReplayLoad(speed=2.0, jitter_s=0.5, max_concurrency=3)]
    assert cfg.stop.schedule_ends and cfg.stop.duration_s is None and cfg.stop.max_requests is None
    assert (cfg.dataset.name, cfg.dataset.block_size, cfg.dataset.trace_format) == ("trace", 16, None)


def test_deadlines_and_continuous_usage_flags():
    from tokenbench.cli.run_flags import run_config
    from tokenbench.config import DeadlinesConfig

    params = _nothing_given()
    params.update(users="2", max_requests=4, deadlines="ttft=200ms", continuous_usage=True)
    cfg = run_config(params)
    assert cfg.deadlines == DeadlinesConfig(ttft_s=0.2, tbt_s=0.05)  # tbt: Etalon's default
    assert cfg.target.continuous_usage is True
    params.update(deadlines=None, continuous_usage=None)
    cfg = run_config(params)
    assert cfg.deadlines == DeadlinesConfig(ttft_s=0.1, tbt_s=0.05) and cfg.target.continuous_usage is None


def test_a_plain_flag_reaches_its_field_with_no_code_of_its_own():
    params = _nothing_given()
    params.update(users="2", max_requests=4, request_timeout=7.5, keep_text=False, window=2.0, seed=3)
    cfg = run_config(params)
    assert cfg.target.request_timeout_s == 7.5 and cfg.keep_text is False and cfg.window_s == 2.0 and cfg.seed == 3
    assert cfg.loads == [UsersLoad(users=2)] and cfg.stop.max_requests == 4


def test_nothing_given_is_the_embedded_default_scenario():
    cfg = run_config(_nothing_given())
    assert cfg.loads == [UsersLoad(users=DEFAULT_USERS, ramp_up_s=10.0)]
    assert cfg.stop.duration_s == DEFAULT_DURATION_S and cfg.target.url is None
    assert (cfg.dataset.input_tokens, cfg.dataset.output_tokens) == (64, 64)
    assert cfg.workers == WorkersConfig() and cfg.sessions is None and cfg.cost is None
    assert cfg == RunConfig.model_validate(cfg.model_dump())


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"turns": 3, "session_header": "X-A"},
            "--turns, --session-header shape multi-turn sessions: add --multi-turn",
        ),
        ({"ray_cpus_per_worker": 0.5}, "--ray-cpus-per-worker sizes Ray actors: add --ray or --ray-address"),
        ({"gpus": 2}, "--gpus counts the GPUs --cost-per-hour pays for"),
        ({"header": ["nocolon"]}, "--header takes 'Name: value'"),
        ({"extra_body": "[1]"}, "--extra-body takes a JSON object"),
    ],
)
def test_a_flag_that_needs_another_is_refused_naming_it(given, message):
    params = _nothing_given()
    params.update(users="1", max_requests=1, **given)
    with pytest.raises(UsageError, match=message.replace("[", r"\[")):
        run_config(params)


def test_scale_out_and_cost_flags_become_their_settings():
    params = _nothing_given()
    params.update(users="1", max_requests=1, workers=3, ray=True, ray_cpus_per_worker=0.0, cost_per_hour=2.0)
    cfg = run_config(params)
    assert cfg.workers == WorkersConfig(count=3, ray=True, cpus_per_worker=0.0)
    assert cfg.cost is not None and (cfg.cost.usd_per_gpu_hour, cfg.cost.gpus) == (2.0, 1)


def test_connect_timeout_is_a_flag_and_must_be_above_0():
    from typer.testing import CliRunner

    from tokenbench.cli import app

    params = _nothing_given()
    params.update(users="1", max_requests=1, connect_timeout=2.5)
    assert run_config(params).target.connect_timeout_s == 2.5
    result = CliRunner().invoke(app, ["run", "--users", "1", "--max-requests", "1", "--connect-timeout", "0"])
    assert result.exit_code == 2, result.output
    assert "--connect-timeout: Input should be greater than 0" in result.output
