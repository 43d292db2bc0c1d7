"""Request APIs vs chat on the same server (report/sections/apis.py): the baseline found by the
rows' API, the difference and its side with known answers (paired by trial), the sentences, and
the per-configuration table."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenbench.report.read.data import ExperimentHeader, PointRow, ReportData
from tokenbench.report.sections.apis import api_costs, api_lines, apis_table, baselines, has_study
from tokenbench.results import TrialStat, mean_ci95


def _stat(*values: float) -> TrialStat:
    return mean_ci95(values)


def _row(api: str, users: int = 1, server: str | None = "llamacpp", swept: dict | None = None, **metrics) -> PointRow:
    return PointRow(
        source="exp",
        config=f"{server} · {api}",
        backend="xllamacpp",
        swept=swept or {},
        variant=api,
        point=0,
        label=f"{users} users",
        load_kind="users",
        load_value=float(users),
        metrics=dict(metrics),
        outcomes={"ok": 10},
        num_trials=3,
        server=server,
        api=api,
    )


def _data(rows: list[PointRow], trials: int = 3) -> ReportData:
    header = ExperimentHeader(Path("exp"), "exp", "", True, trials, "users", None, "synthetic", {}, (), ())
    return ReportData(runs=(), experiments=(header,), rows=tuple(rows), series=())


def test_the_baseline_is_the_chat_row_of_the_same_server_and_load():
    rows = [_row("chat"), _row("messages"), _row("responses"), _row("messages", users=2)]
    chosen = {key[3]: base.config if base else None for key, base in baselines(rows).items()}
    assert chosen == {("users", 1.0): "llamacpp · chat", ("users", 2.0): None}  # no chat at 2 users
    # another server configuration (its swept knobs) is not a baseline
    other = [_row("chat", swept={"max_num_seqs": 2}), _row("messages", swept={"max_num_seqs": 4})]
    assert not has_study(_data(other))
    assert not has_study(_data([_row("chat"), _row("completions")]))  # no Messages or Responses row


def test_the_difference_is_api_minus_chat_paired_by_trial():
    chat = _stat(0.100, 0.110, 0.090)
    slower = _stat(0.110, 0.121, 0.099)  # +10% in every trial: worse beyond a CI of 0
    same = _stat(0.102, 0.108, 0.090)
    rows = [
        _row("chat", ttft_s_p50=chat, server_cpu_cores_mean=_stat(1.0, 1.0, 1.0)),
        _row("messages", ttft_s_p50=slower, server_cpu_cores_mean=_stat(1.2, 1.2, 1.2)),
        _row("responses", ttft_s_p50=same),
    ]
    costs = {(c.api, c.metric): c for c in api_costs(_data(rows))}
    ttft = costs[("messages", "ttft_s_p50")]
    assert ttft.diff.paired and ttft.side == "worse"
    assert ttft.diff.delta == pytest.approx(0.010) and ttft.diff.pct == pytest.approx(0.10)
    assert costs[("messages", "server_cpu_cores_mean")].side == "worse"
    assert costs[("responses", "ttft_s_p50")].side == "no difference"
    # a metric measured on neither side is left out (an attached server's CPU), not "unknown"
    assert ("responses", "tpot_s_p50") not in costs and ("responses", "server_cpu_cores_mean") in costs
    lines = api_lines(list(costs.values()), _data(rows))
    assert lines[0] == "llamacpp · messages was worse than llamacpp · chat on TTFT p50 (+10.0% ± 0.0% at 1 user)."
    assert "llamacpp · responses made no difference beyond the 95% CI to llamacpp · chat on any metric." in lines


def test_one_trial_has_no_ci_and_the_table_holds_every_api():
    rows = [_row("chat", ttft_s_p50=_stat(0.1)), _row("messages", ttft_s_p50=_stat(0.2))]
    data = _data(rows, trials=1)
    assert api_lines(api_costs(data), data) == [
        "llamacpp · messages: one trial per configuration, so no CI: run trials to tell the API from chat."
    ]
    table = apis_table(data)
    assert table is not None and [r[1] for r in table.rows] == ["chat", "messages"]
