"""Console tables (report/console.py): a run's summary from RunResults, an experiment's from
its Experiment state."""

from __future__ import annotations

from report_synthetic import point, results
from rich.console import Console

from tokenbench.console.tables import experiment_table, summary_table, workload_text
from tokenbench.results import AggregateRow, CellRow, Experiment, Load, RunResults, ServerRow, mean_ci95


def _text(table) -> str:
    console = Console(record=True, width=240, color_system=None)
    console.print(table)
    return console.export_text()


def test_summary_table_of_a_run() -> None:
    run = RunResults.from_json(
        results([point(0, "users", 4, tokens_per_s=400.0), point(1, "users", 8, outcomes={"ok": 18, "timeout": 2})])
    )
    text = _text(summary_table(run))
    assert "4 users" in text and "8 users" in text
    assert "20/20" in text and "18/20" in text and "timeout 2" in text
    assert "400.0" in text  # output throughput, tok/s
    assert "TTFT (ms) mean / p50 / p99 (n)" in text and "100.0 / 100.0 / 200.0 (20)" in text
    assert "server: KV usage % mean / max" in text and "40.0 / 60.0" in text


def test_summary_table_without_server_figures() -> None:
    run = RunResults.from_json(results([point(0, "users", 4, server=False)]))
    assert "server:" not in _text(summary_table(run))


def test_experiment_table() -> None:
    load = Load(kind="users", users=4, warmup_s=0.0, duration_s=10.0, max_requests=None)
    state = Experiment(
        name="e",
        spec={},
        servers=[
            ServerRow(label="a", backend="vllm", swept={}, status="ok", error=None),
            ServerRow(label="b", backend="vllm", swept={}, status="failed", error="no"),
        ],
        cells={
            "a1": CellRow(server="a", variant="default", trial=1, status="ok", error=None, run_dir="cells/a1"),
            "b1": CellRow(server="b", variant="default", trial=1, status="failed", error="no", run_dir="cells/b1"),
        },
        aggregates=[
            AggregateRow(
                server="a",
                backend="vllm",
                swept={},
                variant="default",
                point=0,
                label="4 users",
                load=load,
                metrics={"output_tokens_per_s": mean_ci95([100.0, 110.0])},
            )
        ],
    )
    text = _text(experiment_table(state))
    assert "experiment e: 1/2 cells ok, 1 failed" in text
    assert "105.0 ± 63.5" in text  # mean ± t(0.975, 1) · s / √2
    assert "server failed" in text


def _queueing_experiment(slo: bool) -> Experiment:
    load = Load(kind="users", users=8, warmup_s=0.0, duration_s=10.0, max_requests=None)
    metrics = {
        "output_tokens_per_s": mean_ci95([400.0, 400.0]),
        "ttft_s_mean": mean_ci95([0.147, 0.147]),
        "ttft_s_p50": mean_ci95([0.053, 0.053]),
        "ttft_s_p99": mean_ci95([0.251, 0.251]),
    }
    if slo:
        metrics["good_fraction"] = mean_ci95([0.52, 0.52])
    row = AggregateRow(
        server="a", backend="vllm", swept={}, variant="default", point=0, label="8 users", load=load, metrics=metrics
    )
    return Experiment(name="q", spec={}, servers=[], cells={}, aggregates=[row])


def test_experiment_table_shows_ttft_mean_p99_and_good_beside_p50() -> None:
    """A new user's report: a queueing server showed only TTFT p50 53 ms; its mean was 147, p99 251, 52% good."""
    text = _text(experiment_table(_queueing_experiment(slo=True)))
    for label, value in (("TTFT mean (ms)", "147.0"), ("TTFT p50 (ms)", "53.0"), ("TTFT p99 (ms)", "251.0")):
        assert label in text and value in text
    assert "good (%)" in text and "52.0" in text
    without = _text(experiment_table(_queueing_experiment(slo=False)))
    assert "good (%)" not in without and "TTFT p99 (ms)" in without  # good % only where an SLO is set


def _interrupted_run() -> RunResults:
    """A new user's report: Ctrl-C 2.6 s into 4 users; four cancelled streams had 124 tokens each."""
    p = point(0, "users", 4, tokens_per_s=386.0, rps=1.53, outcomes={"ok": 4, "timeout": 1, "cancelled": 4})
    p.update(cancelled_output_tokens=496.0, cancelled_streams=4)
    return RunResults.from_json(results([p]))


def test_cancelled_is_not_a_failure_and_its_tokens_are_shown_apart() -> None:
    text = " ".join(_text(summary_table(_interrupted_run())).split())
    assert "failures │ timeout 1 │" in text  # cancelled is not listed among the failures
    assert "cancelled at the point's end (not failures) │ 4 │" in text
    assert "incl. tokens of cancelled streams │ 496 of 4 streams │" in text
    assert (
        "output tok/s 386.0 at 4 users includes 4 cancelled streams' 496 tokens: request rate counts "
        "completed requests only" in text
    )


def test_no_cancelled_no_extra_rows() -> None:
    text = _text(summary_table(RunResults.from_json(results([point(0, "users", 4)]))))
    assert "cancelled" not in text and "failures" in text


def test_the_summary_names_the_model_url_and_lengths() -> None:
    run = RunResults.from_json(results([point(0, "users", 4)], model="Qwen/Qwen3-0.6B"))
    text = " ".join(_text(summary_table(run, workload_text("synthetic", 512, 128))).split())  # the title wraps
    assert "Qwen/Qwen3-0.6B at http://127.0.0.1:8000 (vllm), synthetic: input 512 / output 128 tokens" in text
    assert "synthetic" in _text(summary_table(run))  # without the lengths: the dataset's name


def test_a_piped_console_is_wide_enough_for_the_table(monkeypatch) -> None:
    """Piped (not a terminal), Rich drew 80 columns and cut the headers ('throu…')."""
    import io

    from tokenbench.console.terminal import console

    monkeypatch.delenv("COLUMNS", raising=False)
    out = console()
    out.file = io.StringIO()
    run = RunResults.from_json(results([point(i, "users", 2**i) for i in range(6)]))
    out.print(summary_table(run))
    text = out.file.getvalue()
    assert "…" not in text and "output throughput (tok/s)" in text
