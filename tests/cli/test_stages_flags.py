"""--stages and --load-shape: the flags -> one staged point, its duration its stages' (a longer
--duration holds the last level), a trace's own rate curve read from its file, and bad input that
exits 2 naming what to fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tokenbench.cli import app
from tokenbench.cli.common import UsageError
from tokenbench.cli.flags import run_options
from tokenbench.cli.run_flags import run_config
from tokenbench.config import StagedLoad

UNREACHABLE = "http://127.0.0.1:9"  # nothing listens: every case here fails before a request


def _params(**given: Any) -> dict[str, Any]:
    params: dict[str, Any] = {o.param: None for o in run_options()}
    params.update(url=UNREACHABLE, **given)
    return params


def _staged(**given: Any) -> tuple[StagedLoad, float | None]:
    cfg = run_config(_params(**given))
    (load,) = cfg.loads
    assert isinstance(load, StagedLoad)
    return load, cfg.stop.duration_s


def test_stages_make_one_point_as_long_as_they_are():
    load, duration = _staged(stages="rate=2:20s, rate=8:20s ramp=5s, rate=2:20s", arrival="constant")
    assert duration == 60 and load.open_loop and load.arrival == "constant"
    assert [(s.level, s.ramp_s) for s in load.stages] == [(2, 0), (8, 5), (2, 0)]


def test_a_longer_duration_holds_the_last_stage_and_a_shorter_one_is_refused():
    load, duration = _staged(stages="users=2:10s, users=4:10s", duration=30.0, think_time="1s")
    assert duration == 30 and load.stages[-1].duration_s == 20 and load.think_time_s == 1
    with pytest.raises(ValueError, match="shorter than the stages"):
        run_config(_params(stages="users=2:10s, users=4:10s", duration=15.0))


def test_a_shape_is_its_stages_and_keeps_its_text():
    load, duration = _staged(load_shape="spike:base=2,peak=10,at=20s,for=10s")
    assert duration == 50 and load.shape == "spike:base=2,peak=10,at=20s,for=10s"
    assert [s.level for s in load.stages] == [2, 10, 2]


def test_a_trace_shape_is_the_traces_rate_curve_scaled(tmp_path: Path):
    trace = tmp_path / "t.jsonl"
    # from the first row: 3 rows in the first 10 s of trace time, 2 in the next, the last at its end (Mooncake: ms)
    rows = [(1000, 10, 5), (2000, 10, 5), (9000, 10, 5), (15000, 10, 5), (21000, 10, 5)]
    trace.write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": i, "output_length": o, "hash_ids": [1]}) + "\n"
            for t, i, o in rows
        )
    )
    load, duration = _staged(load_shape=f"trace:path={trace},window=10s,scale=2")
    assert [(s.duration_s, s.rate_per_s) for s in load.stages] == [(10, 0.6), (10, 0.4)]
    assert duration == 20


@pytest.mark.parametrize(
    "given,needle",
    [
        ({"stages": "rate=2:10s", "rate": "4"}, "drop --rate"),
        ({"stages": "rate=2:10s", "load_shape": "spike:base=1,peak=2,at=1s,for=1s"}, "give one"),
        ({"stages": "rate=2:10s", "duration": "auto"}, "drop --duration auto"),
        ({"load_shape": "trace:window=10s"}, "trace:path=FILE"),
        ({"load_shape": "trace:path=/nonexistent.jsonl"}, "no such trace file"),
    ],
)
def test_flags_that_do_not_go_with_stages_name_what_to_drop(given, needle):
    with pytest.raises(UsageError, match=needle):
        run_config(_params(**given))


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--stages", "rate=2"], "write rate=r:duration"),
        (["--stages", "rate=2:10s, users=3:10s"], "not both"),
        (["--load-shape", "wave:min=1"], "one of steps, spike"),
        (["--stages", "rate=2:10s", "--multi-turn"], "not with --stages"),
    ],
)
def test_bad_stages_exit_2_naming_what_to_fix(argv, needle, tmp_path):
    result = CliRunner().invoke(
        app, ["run", "--url", UNREACHABLE, "--out", str(tmp_path / "out"), *argv], env={"COLUMNS": "400"}
    )
    assert result.exit_code == 2, result.output
    assert needle in " ".join(result.output.lower().split()), result.output
