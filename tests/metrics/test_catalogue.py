"""The metric catalogue: every getter against a point summarize_point wrote, directions and units,
and the views that draw from it (console, report, compare, aggregates)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tokenbench.compare import compare, compare_markdown
from tokenbench.config.cost import CostConfig
from tokenbench.config.slo import SLOConfig
from tokenbench.console.tables import experiment_table, summary_table
from tokenbench.experiments.aggregate import aggregate
from tokenbench.metrics import PointSpan, Window, catalogue, summarize_point
from tokenbench.metrics.catalogue import METRICS, Metric, error_rate, path, shown_in
from tokenbench.metrics.cost import point_cost
from tokenbench.metrics.programs import program_stats
from tokenbench.metrics.speculation import server_timing_stats, speculation_stats
from tokenbench.records import (
    Grade,
    Outcome,
    OutputCheck,
    ProgramCall,
    Reasoning,
    RequestRecord,
    ServerTiming,
    Speculation,
    TokenSource,
)
from tokenbench.report.read.load import load_inputs
from tokenbench.report.sections.tables import headline_table
from tokenbench.results import (
    CellRow,
    Client,
    ComputedBy,
    Distribution,
    Energy,
    Experiment,
    Gauge,
    Gpu,
    Load,
    PointResult,
    Pooling,
    PrefixCache,
    Requests,
    RunResults,
    Server,
    ServerCpu,
    ServerRow,
    ServerSpeculation,
    Slo,
    Span,
    Target,
    Tool,
)

DECODE = "decode_speed_tokens_per_s_mean"

# experiment.json's aggregate keys: a public interface (added to, never renamed or dropped).
PUBLIC_AGGREGATE_KEYS = (
    "output_tokens_per_s",
    "requests_per_s",
    "offered_per_s",
    "ttft_s_mean",
    "ttft_s_p50",
    "ttft_s_p99",
    "tpot_s_mean",
    DECODE,
    "itl_s_mean",
    "itl_per_token_s_mean",
    "fluidity_index_mean",
    "e2e_s_mean",
    "queue_s_mean",
    "goodput_per_s",
    "good_fraction",
    "error_rate",
    "usd_per_million_output_tokens",  # the capacity answer reads the same name from a point's cost
    "joules_per_output_token",
    "server_preemptions",
    "server_ttft_s_mean",
    "server_kv_usage_max",
    "server_prefix_cache_hit_rate",
    "client_cpu_util_max",
    "client_loop_lag_p99_s",
    "client_limited",
)


def _record(i: int, sent: float, itl: float, reasoning: int = 0, structured: bool = False) -> RequestRecord:
    """TTFT 50 ms, then 10 more chunks `itl` apart, one token each (counted per chunk); 10 prompt tokens. The first
    ``reasoning`` chunks are reasoning content (TTFO = 50 ms + reasoning * itl)."""
    chunks = [sent + 0.05 + k * itl for k in range(11)]
    r = RequestRecord(
        point=0,
        id=i,
        scheduled_s=sent,
        sent_s=sent,
        chunk_times_s=chunks,
        end_s=chunks[-1],
        closed_s=chunks[-1] + 0.001,
        outcome=Outcome.OK,
        output_tokens=11,
        output_tokens_source=TokenSource.SERVER,
        prompt_tokens=10,
        reasoning=Reasoning(chunks[reasoning], reasoning, reasoning or None),
        chunk_tokens=[1] * 11,  # usage on every chunk: per-token ITL is the ITL
        # asked for a JSON schema; every 4th reply (0, 4, 8) invalid: valid_fraction 0.7
        output_check=OutputCheck("json_schema", True, i % 4 != 0) if structured else None,
        # a graded row (with structured): every 5th reply (0, 5) wrong: accuracy 0.8
        grade=Grade("numeric", True, i % 5 != 0, "42") if structured else None,
        # the server's figures: 5 verify steps drafting 2, half accepted; its TTFT 40 ms from its queue
        speculation=Speculation(spec_steps=5, spec_draft_tokens=10, spec_accepted_tokens=5, spec_tokens=2),
        server_timing=ServerTiming(reported_queue_s=0.001, reported_prefill_s=0.039, reported_ttft_s=0.04),
    )
    r.end_marker = True
    return r


def _server(preemptions: float, ttft_s_mean: float, kv_usage: Gauge) -> Server:
    """The server's figures as telemetry.summary writes them, nulls but for the three given and a
    prefix cache that found 30 of 120 prompt tokens."""
    return Server(
        period_s=[0.0, 10.0],
        scrapes=10,
        failed_scrapes=0,
        first_scrape_error=None,
        bracket_s=[0.0, 10.0],
        bracketed=True,
        preemptions=preemptions,
        generated_tokens=None,
        prefix_cache_hits=30.0,
        prefix_cache_queries=120.0,
        prefix_cache_hit_rate=0.25,
        running=None,
        waiting=None,
        kv_usage=kv_usage,
        ttft_s_mean=ttft_s_mean,
        ttft_count=None,
        itl_s_mean=None,
        itl_count=None,
    )


def _programs(records: list[RequestRecord]) -> None:
    """The records as five agent sessions of two calls: call 1 sent 1 s after the session's start,
    when call 0's end plus its recorded wait allowed it (each session 1.151 s long)."""
    for r in records:
        k, second = divmod(r.id, 2)
        parent = records[2 * k]
        r.program = ProgramCall(
            program_session=f"s{k}",
            program_id="p",
            program_call=str(second),
            program_depth=0,
            program_role="after_tool" if second else "root",
            program_start_s=float(2 * k),
            program_ready_s=r.scheduled_s,
            program_after="0" if second else None,
            program_anchor="end" if second else None,
            program_delay_s=r.scheduled_s - (parent.closed_s or 0.0) if second else None,
            program_parents=("0",) if second else (),
        )


def sample_point(
    itl: float = 0.01,
    label: str = "1 req/s",
    reasoning: int = 0,
    pooling: bool = False,
    structured: bool = False,
    programs: bool = False,
) -> PointResult:
    """An open-loop point at 1 req/s for 10 s as summarize_point writes it, with the server's
    figures (telemetry.summary's shape) added; each reply's first ``reasoning`` chunks reasoning.
    ``programs``: the requests are five agent sessions of two calls (metrics.programs' stats)."""
    records = [_record(i, float(i), itl, reasoning, structured) for i in range(10)]
    if programs:
        _programs(records)
    span = PointSpan(Window(0.0, 10.0), open_loop=True, end_s=12.0)
    metrics = summarize_point(records, span, SLOConfig(ttft_s=0.06))
    gpu = Gpu(available=False, reason="no GPU")
    return PointResult(
        index=0,
        label=label,
        load=Load(kind="rate", rate_per_s=1.0, warmup_s=0.0, duration_s=10.0, max_requests=None),
        span=Span(start_s=0.0, ramp_end_s=0.0, load_end_s=10.0, end_s=12.0),
        interrupted=False,
        **{k: v for k, v in metrics if k in metrics.model_fields_set},
        server=_server(3.0, 0.04, Gauge(mean=0.3, max=0.5)),
        server_whole_point=None,
        gpu=gpu,
        gpu_whole_point=gpu,
        timeseries=[],
        prefix_cache=PrefixCache(reset="done", hit_rate=0.25, hit_rate_source="server_counters", expected_reuse=0.3),
        # $3.96/h at its 11 output tok/s: $100 per million; 55 W at 11 tok/s: 5 J a token
        cost=point_cost(CostConfig(usd_per_gpu_hour=1.98, gpus=2), metrics.output_tokens_per_s, None),
        energy=Energy(
            available=True,
            reason=None,
            source="nvml_total_energy",
            gpus=1,
            period_s=[0.0, 10.0],
            joules=550.0,
            mean_power_w=55.0,
            joules_per_output_token=55.0 / 11.0,
        ),
        client=CLIENT,
        # a launched server's processes: 1.5 CPU seconds over the 3 s between two readings
        server_cpu=ServerCpu(period_s=[0.0, 3.0], cpu_s=1.5, cores_mean=0.5, processes=2, bracketed=True),
        # pooling APIs: a pooling point's rates (metrics.pooling), read by their getters
        **({"pooling": POOLING} if pooling else {}),
        **({"programs": program_stats(records, records, (0.0, 10.0), None)} if programs else {}),
        speculation=speculation_stats(records, SERVER_SPECULATION),
        server_timing=server_timing_stats(records),
    )


# the server's speculation counters over the window: 60% of its draft tokens accepted
SERVER_SPECULATION = ServerSpeculation(
    drafts=50,
    draft_tokens=100,
    accepted_tokens=60,
    accepted_by_position=[35, 25],
    acceptance_rate=0.6,
    acceptance_length=2.2,
    acceptance_rate_by_position=[0.7, 0.5],
)


POOLING = Pooling(
    population="ok requests",
    requests=10,
    inputs=40,
    inputs_per_request=4.0,
    inputs_per_s=4.0,
    prompt_tokens_per_s=40.0,
    prompt_tokens_source={"server": 10},
)


# the client's own health over the window: a limited point (loop lag p99 12 ms > 5 ms)
CLIENT = Client(
    workers=1,
    period_s=[0.0, 10.0],
    samples=20,
    ticks=200,
    cpu_util_max=0.6,
    cpu_util_mean=0.4,
    loop_lag_p99_s=0.012,
    loop_lag_max_s=0.05,
    connections_max=2,
    limited=True,
    limited_by=["loop_lag"],
)


_EMPTY = Distribution(
    count=0, mean=None, std=None, min=None, p50=None, p90=None, p95=None, p99=None, p999=None, max=None
)
_NONE_ENDED = Requests(
    total=2, ok=0, by_outcome={"cancelled": 2}, retries=0, retried_requests=0, ok_without_end_marker=0
)


KNOWN = {
    "output_tokens_per_s": 11.0,
    "requests_per_s": 1.0,
    "offered_per_s": 1.0,
    "ttft_s_mean": 0.05,
    "ttft_s_p50": 0.05,
    "ttft_s_p99": 0.05,
    "tpot_s_mean": 0.01,
    DECODE: 100.0,
    "itl_s_mean": 0.01,
    "e2e_s_mean": 0.15,
    "queue_s_mean": 0.0,
    "goodput_per_s": 1.0,
    "good_fraction": 1.0,
    "error_rate": 0.0,
    "server_preemptions": 3.0,
    "server_ttft_s_mean": 0.04,
    "server_kv_usage_max": 0.5,
    "server_prefix_cache_hit_rate": 0.25,
    "ttfo_s_mean": 0.07,  # TTFT 50 ms + 2 reasoning chunks 10 ms apart
    "ttfo_s_p99": 0.07,
    "prefix_cache_hit_rate": 0.25,
    "prefix_cache_expected_reuse": 0.3,
    "usd_per_million_output_tokens": 100.0,
    "joules_per_output_token": 5.0,
    "client_cpu_util_max": 0.6,
    "client_loop_lag_p99_s": 0.012,
    "client_limited": 1.0,
    "inputs_per_s": 4.0,
    "prompt_tokens_per_s": 40.0,
    "valid_fraction": 0.7,
    "accuracy": 0.8,  # 10 graded, 0 and 5 wrong
    "accuracy_correct": 8.0,
    "accuracy_graded": 10.0,
    "accuracy_not_graded": 0.0,
    "session_s_mean": 1.151,  # call 1 sent 1 s after its session's start, its E2E 0.15 s, closed 1 ms later
    "session_s_p90": 1.151,
    "sessions_per_s": 0.5,  # 5 sessions started in the 10 s window
    "acceptance_rate_token_weighted": 0.5,
    "acceptance_rate_request_weighted": 0.5,
    "acceptance_length_step_weighted": 2.0,
    "server_acceptance_rate": 0.6,
    "tokens_per_chunk_mean": 1.0,
    "ttft_outside_server_s_p50": 0.01,  # the client's TTFT 50 ms, the server's 40
    "server_queue_s_p50": 0.001,
}


def test_every_getter_reads_a_point_summarize_point_wrote() -> None:
    point = sample_point(reasoning=2, pooling=True, structured=True, programs=True)
    for m in METRICS.values():
        value = m.get(point)
        assert value is not None and math.isfinite(value), m.key
        if m.key in KNOWN:
            assert value == pytest.approx(KNOWN[m.key], abs=1e-9), m.key


def _emptied(model: Any, field: str) -> Any:
    """The point (or its part) with the distribution at ``field`` (a dotted path: a part's) empty."""
    head, _, rest = field.partition(".")
    if not rest:
        return model.model_copy(update={head: _EMPTY})
    return model.model_copy(update={head: _emptied(getattr(model, head), rest)})


def test_missing_or_null_fields_give_none_never_zero() -> None:
    point = sample_point(programs=True)
    # a point's own distributions (a part's, programs.session_s, goes with its part below)
    distributions = {
        m.distribution.key for m in METRICS.values() if m.distribution is not None and not m.distribution.at
    }
    nulls = point.model_copy(
        update={k: _EMPTY for k in distributions}
        | {k: None for k in ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s", "offered_per_s")}
        | {"goodput_per_s": None, "good_fraction": None, "server": None, "requests_in_window": _NONE_ENDED}
        | {"prefix_cache": None, "cost": None, "energy": None, "fluidity": None, "client": None, "structured": None}
        | {"programs": None, "speculation": None, "server_timing": None, "server_cpu": None}
    )
    for m in METRICS.values():
        assert m.get(nulls) is None, m.key
        if m.distribution is not None:  # nothing measured: count 0 and every statistic null
            assert m.get(_emptied(point, m.distribution.field)) is None, m.key
    assert path("label")(point) is None  # not a number
    assert path("label.x")(point) is None
    assert path("server.kv_usage.max")(point.model_copy(update={"server": None})) is None  # no server figures
    assert error_rate(point.model_copy(update={"requests_in_window": _NONE_ENDED})) is None  # none ended


def test_directions_units_and_scales() -> None:
    expected = {  # key: (unit, scale, higher is better)
        "output_tokens_per_s": ("tok/s", 1.0, True),
        "total_tokens_per_s": ("tok/s", 1.0, True),
        "requests_per_s": ("req/s", 1.0, True),
        "goodput_per_s": ("req/s", 1.0, True),
        "good_fraction": ("%", 100.0, True),
        DECODE: ("tok/s", 1.0, True),
        "ttft_s_mean": ("ms", 1e3, False),
        "ttft_s_p99": ("ms", 1e3, False),
        "tpot_s_mean": ("ms", 1e3, False),
        "e2e_s_mean": ("ms", 1e3, False),
        "queue_s_mean": ("ms", 1e3, False),
        "error_rate": ("%", 100.0, False),
        "server_preemptions": ("", 1.0, False),
        "server_kv_usage_max": ("%", 100.0, False),
        "server_prefix_cache_hit_rate": ("%", 100.0, True),
    }
    for key, (unit, scale, higher) in expected.items():
        m = METRICS[key]
        assert (m.unit, m.scale, m.higher_is_better) == (unit, scale, higher), key
    for m in METRICS.values():
        if m.unit == "ms":  # every latency is stored in seconds and lower is better
            assert m.scale == 1e3 and not m.higher_is_better, m.key
        assert m.population and m.period, m.key  # every number names what it counts and when
    assert METRICS["ttft_s_p99"].label == "TTFT p99 (ms)"
    assert METRICS["server_preemptions"].label == "server preemptions"


def test_views_and_public_keys() -> None:
    aggregated = [m.key for m in shown_in("aggregates")]
    assert [k for k in aggregated if k in PUBLIC_AGGREGATE_KEYS] == list(PUBLIC_AGGREGATE_KEYS)
    for view in ("report", "compare", "experiment"):
        # these read experiment.json's aggregates: a metric shown there must be aggregated
        assert all("aggregates" in m.views for m in shown_in(view)), view
    assert all(isinstance(m, Metric) and m.key == k for k, m in METRICS.items())
    assert len(METRICS) == len(catalogue._METRICS)  # no two entries share a key


def test_decode_speed_in_the_console_table() -> None:
    console = Console(record=True, width=200, color_system=None)
    console.print(summary_table([sample_point(), sample_point(itl=0.02, label="slow")]))
    line = next(ln for ln in console.export_text().splitlines() if "decode speed per user" in ln)
    assert "(tok/s)" in line and "100.0 / 100.0 / 100.0 (10)" in line and "50.0 / 50.0 / 50.0 (10)" in line


def test_experiment_table_columns_come_from_the_catalogue() -> None:
    state = Experiment(name="e", spec={}, cells={}, servers=[], aggregates=[])
    console = Console(record=True, width=300, color_system=None)
    console.print(experiment_table(state))
    text = console.export_text()
    assert all(m.label in text for m in shown_in("experiment"))


def _write_run(path: Path, point: PointResult, backend: str) -> Path:
    path.mkdir(parents=True)
    results = RunResults(
        tool=Tool(name="tokenbench", version=None),
        computed_by=ComputedBy(name="tokenbench", version=None, how="run"),
        target=Target(url=None, model=None, api=None, ignore_eos=False, backend=backend),
        dataset=None,
        slo=Slo(ttft_s=None, tpot_s=None, e2e_s=None),
        clock=None,
        telemetry=None,
        points=[point],
    )
    (path / "results.json").write_text(json.dumps(results.to_json()))
    return path


def test_decode_speed_in_compare_and_the_report(tmp_path: Path) -> None:
    a = _write_run(tmp_path / "a", sample_point(), "vllm")
    b = _write_run(tmp_path / "b", sample_point(itl=0.02), "sglang")
    rows = {r.metric: r for r in compare([a, b])}
    # an optional metric (inputs/s, a session's latency) only where both sides measured it
    # (both sides' replies reported speculation: its figures compared too)
    speculated = {"acceptance_rate_token_weighted", "acceptance_length_step_weighted"}
    assert set(rows) == {m.key for m in shown_in("compare") if not _optional(m)} | speculated and DECODE in rows
    decode = rows[DECODE]
    assert decode.baseline.mean == pytest.approx(100.0) and decode.other.mean == pytest.approx(50.0)
    assert decode.delta_pct == pytest.approx(-0.5) and decode.better is False  # slower decoding is worse
    assert rows["tpot_s_mean"].better is False  # the same change seen as a latency
    assert "decode speed per user mean (tok/s)" in compare_markdown(list(rows.values()))

    table = headline_table(load_inputs([a]))
    assert table is not None
    col = table.headers.index("decode speed per user mean (tok/s)")
    assert table.rows[0][col] == "100.0"


def _optional(m: Metric) -> bool:
    return m.optional or (m.distribution is not None and m.distribution.optional)


def test_session_metrics_in_compare_only_where_both_ran_programs(tmp_path: Path) -> None:
    a = _write_run(tmp_path / "a", sample_point(programs=True), "vllm")
    b = _write_run(tmp_path / "b", sample_point(itl=0.02, programs=True), "sglang")
    plain = _write_run(tmp_path / "plain", sample_point(), "tgi")
    rows = {r.metric: r for r in compare([a, b])}
    assert {"session_s_mean", "session_s_p90", "sessions_per_s"} <= set(rows)
    session = rows["session_s_p90"]
    # call 1's E2E grows by 10 chunk gaps of 10 ms: each session 0.1 s longer, and worse
    assert session.baseline.mean == pytest.approx(1.151) and session.delta == pytest.approx(0.1)
    assert session.better is False and rows["sessions_per_s"].delta == pytest.approx(0.0)
    assert "session latency p90 (s)" in compare_markdown(list(rows.values()))
    assert not {r.metric for r in compare([a, plain])} & {"session_s_mean", "session_s_p90", "sessions_per_s"}


def test_decode_speed_is_aggregated(tmp_path: Path) -> None:
    state = Experiment(
        name="x",
        spec={},
        servers=[ServerRow(label="s", backend="vllm", swept={}, status="ok", error=None)],
        cells={
            f"s__v__t{t}": CellRow(server="s", variant="v", trial=t, status="ok", error=None, run_dir=f"cells/t{t}")
            for t in (1, 2)
        },
        aggregates=[],
    )
    _write_run(tmp_path / "cells/t1", sample_point(), "vllm")
    _write_run(tmp_path / "cells/t2", sample_point(itl=0.02), "vllm")
    [row] = aggregate(tmp_path, state)
    assert list(row.metrics) == [m.key for m in shown_in("aggregates")]
    decode = row.metrics[DECODE]
    assert decode.n == 2 and decode.mean == pytest.approx(75.0) and decode.ci95 is not None


def test_ttfo_only_where_reasoning_streamed(tmp_path: Path) -> None:
    """A point without reasoning has no TTFO (None, not TTFT, not 0) and the report and the
    console leave it out; with reasoning both show it beside TTFT."""
    plain, thinking = sample_point(), sample_point(reasoning=2)
    assert "ttfo_s" not in plain.model_fields_set and "reasoning" not in plain.model_fields_set
    assert all(METRICS[k].get(plain) is None for k in ("ttfo_s_mean", "ttfo_s_p99"))
    assert thinking.reasoning is not None and thinking.reasoning.reasoning_tokens == 20

    console = Console(record=True, width=200, color_system=None)
    console.print(summary_table([plain]))
    assert "TTFO" not in console.export_text()
    console.print(summary_table([thinking]))
    assert "TTFO (ms) mean / p50 / p99 (n)" in console.export_text()

    table = headline_table(load_inputs([_write_run(tmp_path / "a", plain, "vllm")]))
    assert table is not None and not any("TTFO" in h for h in table.headers)
    table = headline_table(load_inputs([_write_run(tmp_path / "b", thinking, "vllm")]))
    assert table is not None
    assert table.rows[0][table.headers.index("TTFO mean (ms)")] == "70.0"
    assert table.headers.index("TTFO mean (ms)") == table.headers.index("TTFT p99 (ms)") + 1


def test_cost_and_energy_are_shown_only_where_a_run_has_them(tmp_path: Path) -> None:
    """A run given a price shows its cost per million output tokens, a GPU's its energy per token,
    in the console and the report; a run without either leaves the columns out (no "-" column)."""
    priced = sample_point()
    plain = priced.model_copy(update={"cost": None, "energy": None})
    cost, energy = "cost per 1M output tokens (USD)", "energy per output token (J)"

    console = Console(record=True, width=200, color_system=None)
    console.print(summary_table([plain]))
    assert "cost per 1M" not in console.export_text() and "energy per" not in console.export_text()
    console.print(summary_table([priced]))
    text = console.export_text()
    assert next(ln for ln in text.splitlines() if cost in ln).split("│")[-2].strip() == "100.000"
    assert next(ln for ln in text.splitlines() if energy in ln).split("│")[-2].strip() == "5.000"

    table = headline_table(load_inputs([_write_run(tmp_path / "a", plain, "vllm")]))
    assert table is not None and cost not in table.headers and energy not in table.headers
    table = headline_table(load_inputs([_write_run(tmp_path / "b", priced, "vllm")]))
    assert table is not None
    assert (table.rows[0][table.headers.index(cost)], table.rows[0][table.headers.index(energy)]) == (
        "100.000",
        "5.000",
    )


def test_per_token_itl_beside_itl_only_where_chunks_had_counts() -> None:
    """With per-chunk token counts the console shows per-token ITL beside ITL (here 1 token a
    chunk: the same 10 ms); without them the row is left out, never a guess; fluidity always."""
    counted = sample_point()
    records = [_record(i, float(i), 0.01) for i in range(10)]
    for r in records:
        r.chunk_tokens = None  # a server that gave no per-chunk usage
    span = PointSpan(Window(0.0, 10.0), open_loop=True, end_s=12.0)
    uncounted = summarize_point(records, span, SLOConfig())
    assert counted.itl_per_token_s is not None and counted.itl_per_token_s.mean == pytest.approx(0.01)
    assert uncounted.itl_per_token_s is None or not uncounted.itl_per_token_s.count

    console = Console(record=True, width=200, color_system=None)
    console.print(summary_table([counted]))
    text = console.export_text()
    assert "ITL per token (ms) mean / p50 / p99 (n)" in text and "fluidity index mean" in text
    console = Console(record=True, width=200, color_system=None)
    console.print(summary_table([sample_point().model_copy(update={"itl_per_token_s": uncounted.itl_per_token_s})]))
    assert "ITL per token" not in console.export_text()
