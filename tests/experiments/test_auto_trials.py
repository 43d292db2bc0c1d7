"""`trials: auto` (experiments/auto_trials.py, spec.AutoTrials, runner._more_trials): trials are
added to a configuration until its metric's CI is precise or apart from every other
configuration's, up to a ceiling; experiment.json and the report say how many each needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from tokenbench.experiments.auto_trials import verdicts
from tokenbench.experiments.runner import run_experiment
from tokenbench.experiments.spec import AutoTrials, ExperimentError, parse_spec
from tokenbench.results import AggregateRow, Load, mean_ci95

LOAD = Load(kind="users", users=2, warmup_s=0.0, duration_s=1.0, max_requests=None)


def row(server: str, values: list[float], point: int = 0) -> AggregateRow:
    return AggregateRow(
        server=server,
        backend=None,
        swept={},
        variant="default",
        point=point,
        label="2 users",
        load=LOAD,
        metrics={"output_tokens_per_s": mean_ci95(values)},
    )


def test_verdicts_precision_separation_ceiling() -> None:
    auto = AutoTrials(precision=0.05, min=3, max=5)
    # precise: 100 ± 4.3 * 1 / sqrt(3) = ±2.5% -> done
    [v] = verdicts([row("a", [99.0, 100.0, 101.0])], {("a", "default"): 3}, auto).values()
    assert (
        v is not None
        and v.stopped_by == "precision"
        and v.trials == 3
        and v.worst_precision == pytest.approx(0.0248, abs=1e-3)
    )
    # imprecise and alone: another trial; at the ceiling: stop
    wide = [80.0, 100.0, 120.0]
    assert verdicts([row("a", wide)], {("a", "default"): 3}, auto)[("a", "default")] is None
    assert verdicts([row("a", wide)], {("a", "default"): 5}, auto)[("a", "default")].stopped_by == "ceiling"
    # imprecise but apart from the other configuration: decided
    both = verdicts([row("a", wide), row("b", [300.0, 330.0, 360.0])], {("a", "default"): 3, ("b", "default"): 3}, auto)
    assert {g[0]: v.stopped_by for g, v in both.items() if v is not None} == {"a": "separated", "b": "separated"}
    # overlapping: neither decided
    close = verdicts([row("a", wide), row("b", [90.0, 110.0, 125.0])], {("a", "default"): 3, ("b", "default"): 3}, auto)
    assert set(close.values()) == {None}
    # no finished trial: stop, say so
    assert verdicts([], {("a", "default"): 0}, auto)[("a", "default")].stopped_by == "no results"


SPEC = {
    "name": "auto",
    "backends": [{"label": "a", "url": "http://127.0.0.1:1"}],
    "load": {"users": [2]},
    "stop": {"duration_s": 1},
    "trials": "auto",
}


def test_spec_auto_and_its_settings() -> None:
    spec = parse_spec({**SPEC, "auto_trials": {"precision": "2%", "min": 2, "max": 6}})
    assert spec.trials == "auto" and spec.auto_trials.precision == pytest.approx(0.02)
    assert parse_spec({**SPEC, "trials": 3}).trials == 3
    for bad, needle in [
        ({"auto_trials": {"metric": "latency"}}, "not an aggregated metric"),
        ({"auto_trials": {"min": 5, "max": 3}}, "max (3) is below min (5)"),
        ({"auto_trials": {"precision": "two%"}}, "write it as 0.02 or as 2%"),
        ({"trials": "many"}, "trials"),
        ({"load": None, "search": {"slo": "ttft:p90<=500ms"}}, "trials: auto adds trials to load: experiments"),
    ]:
        with pytest.raises(ExperimentError) as info:
            parse_spec({**SPEC, **bad})
        assert needle in str(info.value), str(info.value)


def test_an_experiment_file_reads_duration_and_warmup_auto_as_the_flags_do() -> None:
    """`stop: {duration_s: auto}` in a file is `--duration auto` (its ceiling --max-duration, else
    300 s), `warmup_s: auto` is `--warmup auto`; a word that is not auto still names the fix."""
    stop = parse_spec({**SPEC, "stop": {"duration_s": "auto", "warmup_s": "auto", "max_duration_s": 30}}).stop
    assert stop.duration_auto and stop.warmup_auto and stop.duration_s == 30 and stop.warmup_s == 0
    assert parse_spec({**SPEC, "stop": {"duration_s": "AUTO", "min_requests": 20}}).stop.duration_s == 300
    assert not parse_spec(SPEC).stop.duration_auto
    with pytest.raises(ExperimentError) as info:
        parse_spec({**SPEC, "stop": {"duration_s": "soon"}})
    assert "cannot read a duration from 'soon'" in str(info.value)


def test_auto_trials_against_the_mock(mock_server, tmp_path: Path) -> None:
    """One configuration (nothing to be apart from), never within 0.0001%: trials are added past
    the minimum of 2 up to the ceiling of 3 (the separation and precision stops: above). Each
    cell costs a run's ~3 s of set-up, hence one configuration."""
    url = mock_server(ttft_ms=10, itl_ms=2)
    spec = parse_spec(
        {
            "name": "auto",
            "backends": [{"label": "one", "url": url}],
            "load": {"users": [2]},
            "stop": {"max_requests": 8},
            "dataset": {"input_tokens": 8, "output_tokens": 8},
            "api": "chat",
            "trials": "auto",
            "auto_trials": {"precision": "0.0001%", "min": 2, "max": 3},
        }
    )
    out = tmp_path / "exp"
    console = Console(record=True, width=200)
    result = run_experiment(spec, out, console)
    state = json.loads((out / "experiment.json").read_text())
    needed = {r["server"]: (r["trials"], r["stopped_by"]) for r in state["trials_needed"]}
    assert needed == {"one": (3, "ceiling")}
    assert sorted(state["cells"]) == [f"{s}__default__t{i}" for s in ("one",) for i in (1, 2, 3)]
    assert {r["server"]: r["metrics"]["output_tokens_per_s"]["n"] for r in state["aggregates"]} == {"one": 3}
    text = console.export_text()
    assert result.state.complete and "trials: auto: trial 3" in text and "one · default: 3 trials (ceiling)" in text
    from tokenbench.report import write_report

    files = write_report([out], tmp_path / "report")
    assert "auto: one · default: 3 (ceiling)" in files.markdown.read_text()
