"""The report's rows (report/data.py): a row's trial mean of a metric, the load key that lines rows
up across configurations, and the configurations an input contributes, in order, once each."""

from __future__ import annotations

from pathlib import Path

from tokenbench.report.read.data import ExperimentHeader, Part, PointRow, RunHeader, ServerInfo, load_key
from tokenbench.results import TrialStat


def _row(config: str, label: str = "4 users", load_value: float | None = 4.0, **metrics: TrialStat) -> PointRow:
    return PointRow(
        source="run",
        config=config,
        backend="vllm",
        swept={},
        variant=None,
        point=0,
        label=label,
        load_kind="users",
        load_value=load_value,
        metrics=dict(metrics),
        outcomes={"ok": 10},
        num_trials=1,
    )


def _run(config: str) -> RunHeader:
    fields = {name: None for name in RunHeader.__dataclass_fields__}
    return RunHeader(**{**fields, "path": Path(config), "name": config, "config": config})


def test_mean_is_the_trial_mean_or_none():
    row = _row("a", ttft_s_mean=TrialStat(mean=0.2, ci95=None, n=1, values=[0.2]))
    assert row.mean("ttft_s_mean") == 0.2
    assert row.mean("tpot_s_mean") is None  # not measured: None, never 0
    empty = _row("a", ttft_s_mean=TrialStat(mean=None, ci95=None, n=0, values=[]))
    assert empty.mean("ttft_s_mean") is None


def test_load_key_is_the_kind_and_the_value_else_the_label():
    assert load_key(_row("a")) == ("users", 4.0)
    assert load_key(_row("b")) == load_key(_row("a"))  # one load, two configurations
    assert load_key(_row("a", label="trace x1", load_value=None)) == ("users", "trace x1")


def test_configs_are_the_rows_then_runs_then_servers_in_order_once_each():
    servers = tuple(
        ServerInfo(
            label=s,
            config=s,
            backend=None,
            swept={},
            status="ok",
            error=None,
            cold_start_s=None,
            engine_version=None,
            upstream=None,
        )
        for s in ("b", "failed")
    )
    fields = {name: None for name in ExperimentHeader.__dataclass_fields__}
    experiment = ExperimentHeader(**{**fields, "servers": servers})
    part = Part(
        name="x",
        runs=[_run("c"), _run("a")],
        experiments=[experiment],
        rows=[_row("b"), _row("a"), _row("b")],
        series=[],
        slos=[],
    )
    assert part.configs() == ["b", "a", "c", "failed"]
