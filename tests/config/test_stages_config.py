"""A staged load's settings: --stages and --load-shape's text, the shapes' stages as known answers,
one level kind a point, its duration its stages' (a longer --duration holds the last level), and
errors that name what to fix."""

import math

import pytest
from pydantic import ValidationError

from tokenbench.config import LoadSweep, RunConfig, StagedLoad, StopConfig, open_loop
from tokenbench.config.stages import Stage, level_at, parse_shape, parse_stages, trace_rate_stages
from tokenbench.errors import BadInput


def _levels(stages: list[Stage]) -> list[tuple[float, float, float]]:
    return [(s.duration_s, s.level, s.ramp_s) for s in stages]


def test_stages_text_reads_levels_durations_and_ramps():
    stages = parse_stages("rate=2:20s, rate=8:20s ramp=5s, rate=2:500ms")
    assert _levels(stages) == [(20, 2, 0), (20, 8, 5), (0.5, 2, 0)]
    assert [s.kind for s in parse_stages("users=4:30s, users=16:1m ramp=10s")] == ["users", "users"]


@pytest.mark.parametrize(
    "text,needle",
    [
        ("rate=2", "rate=R:DURATION"),
        ("speed=2:10s", "rate=R:DURATION"),
        ("rate=x:10s", "'x' is not a number"),
        ("rate=2:10s jitter=1s", "only ramp=DURATION"),
        ("rate=2:10s ramp=20s", "at most its duration"),
        ("users=2.5:10s", "whole number"),
        ("rate=2:soon", "cannot read a duration"),
        ("", "--stages is empty"),
    ],
)
def test_a_bad_stage_names_what_to_fix(text, needle):
    with pytest.raises(BadInput, match=needle):
        parse_stages(text)


def test_one_level_kind_per_point():
    with pytest.raises(ValidationError, match="not both"):
        LoadSweep(stages="rate=2:10s, users=3:10s").points()
    with pytest.raises(ValidationError, match="rate > 0"):
        LoadSweep(stages="rate=0:10s").points()
    with pytest.raises(ValidationError, match="max-concurrency"):
        LoadSweep(stages="users=3:10s", max_concurrency=2).points()


def test_shapes_make_their_stages():
    spike, start = parse_shape("spike:base=2,peak=10,at=20s,for=10s")
    assert _levels(spike) == [(20, 2, 0), (10, 10, 0), (20, 2, 0)] and start == 2
    drain, _ = parse_shape("burst-drain:burst=20,for=10s,drain=30s")
    assert _levels(drain) == [(10, 20, 0), (30, 0, 0)]
    steps, _ = parse_shape("steps:levels=4/16/4,each=30s,ramp=10s,of=users")
    assert _levels(steps) == [(30, 4, 0), (30, 16, 10), (30, 4, 10)] and steps[0].kind == "users"


def test_diurnal_samples_the_sinusoid_as_ramps_from_its_minimum():
    stages, start = parse_shape("diurnal:min=1,max=9,period=80s,levels=4,cycles=2")
    assert start == 1 and len(stages) == 8
    assert [s.level for s in stages[:4]] == pytest.approx([5, 9, 5, 1])
    assert all(s.ramp_s == s.duration_s == 20 for s in stages)
    # between the samples the level is linear: halfway up the first ramp, halfway from 1 to 5
    assert level_at(stages, start, 10.0) == pytest.approx(3.0)
    assert level_at(stages, start, 40.0) == pytest.approx(1 + 8 * (1 - math.cos(math.pi)) / 2)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("wave:min=1", "one of steps, spike"),
        ("spike:base=2,peak=10,at=20s", "give for="),
        ("spike:base=2,peak=10,at=20s,for=10s,width=3", "unknown key"),
        ("diurnal:min=5,max=1,period=10s", "max= must be at least min="),
        ("spike:of=tokens,base=1,peak=2,at=1s,for=1s", "of= is rate"),
    ],
)
def test_a_bad_shape_names_what_to_fix(text, needle):
    with pytest.raises(BadInput, match=needle):
        parse_shape(text)


def test_a_trace_rate_curve_is_its_arrivals_per_window_scaled():
    arrivals = [0.0, 1.0, 2.0, 3.0, 10.5, 12.0, 25.0]  # 4 in [0, 10), 2 in [10, 20), 1 in [20, 30)
    stages = trace_rate_stages(arrivals, 10.0, 2.0)
    assert _levels(stages) == [(10, 0.8, 0), (10, 0.4, 0), (10, 0.2, 0)]
    assert _levels(trace_rate_stages([0.0, 5.0, 10.0], 5.0, 1.0)) == [(5, 0.2, 0), (5, 0.4, 0)]  # 10 s: the last


def test_a_staged_point_lasts_its_stages_and_a_longer_duration_holds_the_last_level():
    load = LoadSweep(stages="rate=2:20s, rate=8:20s ramp=5s").points()[0]
    assert isinstance(load, StagedLoad) and open_loop(load) and load.duration_s == 40
    assert load.level_at(22.5) == pytest.approx(5.0) and load.level_at(39) == 8
    run = RunConfig(loads=[load], stop={})
    assert run.stop.duration_s == 40
    longer = RunConfig(loads=[load], stop=StopConfig(duration_s=60))
    (held,) = longer.loads
    assert longer.stop.duration_s == 60 and isinstance(held, StagedLoad) and held.stages[-1].duration_s == 40
    assert RunConfig(loads=[load], stop={"duration_s": "1m"}).stop.duration_s == 60  # a file's duration, with its unit
    with pytest.raises(ValidationError, match="shorter than the stages"):
        RunConfig(loads=[load], stop=StopConfig(duration_s=30))
    with pytest.raises(ValidationError, match="run it alone"):
        RunConfig(loads=[load, load], stop={})
    with pytest.raises(ValidationError, match="drop --stop-oversaturated"):
        RunConfig(loads=[load], stop={"stop_oversaturated": True})


def test_an_experiment_files_stages_read_as_the_flags():
    sweep = LoadSweep.model_validate({"stages": [{"duration_s": "10s", "users": 2}, {"duration_s": 5, "users": 6}]})
    (load,) = sweep.points()
    assert isinstance(load, StagedLoad) and not load.open_loop and load.users == 6
    assert LoadSweep.model_validate({"stages": "users=2:10s, users=6:5s"}).points() == [load]
