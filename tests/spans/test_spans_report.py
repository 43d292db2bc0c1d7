"""server spans: part 5, the report: a stacked breakdown of the server phases per load point and the
run's slowest requests with their phases, against the mock's own OTLP exporter. The mock's script
makes one request slow on purpose (its first: TTFT x20, all of it prefill) and the second point
queue (4 users, one stream at a time); without --server-traces neither is shown."""

import io
import json
import urllib.request

import pytest
from rich.console import Console

from tokenbench.common.procs import free_port
from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.report import write_report
from tokenbench.report.read.load import load_inputs
from tokenbench.report.read.run_dir import SLOWEST_REQUESTS
from tokenbench.report.render.outline import build_outline
from tokenbench.report.sections.charts import PHASE_SEGMENTS, phases_chart
from tokenbench.report.sections.tables import slowest_table
from tokenbench.report.sections.verdict import decide
from tokenbench.run import run
from tokenbench.rundir import read_records

TTFT_MS, SLOW = 10, 20  # the first request: 200 ms of prefill


def _run(url, out, traced_port=None, loads=None, requests=8):
    cfg = RunConfig(
        target=TargetConfig(url=url),
        loads=loads or [UsersLoad(users=1), UsersLoad(users=4)],
        stop=StopConfig(max_requests=requests, drain_timeout_s=5),
        dataset=DatasetConfig(input_tokens=4, output_tokens=4, num_prompts=4),
        live=False,
        out_dir=out,
        server_traces=traced_port is not None,
        server_traces_port=traced_port or 0,
    )
    return run(cfg, Console(file=io.StringIO()))


@pytest.fixture(scope="module")
def traced(module_mock_server, tmp_path_factory):
    port = free_port()
    url = module_mock_server(
        ttft_ms=TTFT_MS,
        itl_ms=2,
        max_streams=1,
        warmup_slow_s=0.005,  # only the very first request received: no other arrives within 5 ms of it
        warmup_factor=SLOW,
        otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces",
    )
    result = _run(url, tmp_path_factory.mktemp("traced") / "run", traced_port=port)
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        deliveries = {d["traceparent"]: d for d in json.load(resp).values()}
    return result, deliveries


def test_the_stacked_breakdown_is_each_points_phase_means(traced):
    result, _ = traced
    data = load_inputs([result.run_dir])
    (chart,) = phases_chart(data)
    ms, share = chart.panels
    assert ms.stacked and share.stacked and chart.x_categorical and chart.section == "phases"
    assert [s.name for s in ms.series] == [title for _, title, _ in PHASE_SEGMENTS]
    points = result.results["points"]
    assert list(ms.series[0].x) == [f"attached · {p['label']}" for p in points]  # one bar per point
    for key, title, _ in PHASE_SEGMENTS:
        series = next(s for s in ms.series if s.name == title)
        for p, y in zip(points, series.y):
            want = p["queue_s"]["mean"] if key == "client" else p["server_phases"]["phases"][key]["mean"]
            assert y == pytest.approx(want * 1e3, abs=1e-9), (key, p["label"])
    # the queue's share of the bar rises from the lone user to the four that wait for one stream
    queue = next(s for s in share.series if s.name == "queue").y
    assert queue[0] < 5 < 40 < queue[1]
    for i in range(len(points)):
        assert sum(s.y[i] or 0.0 for s in share.series) == pytest.approx(100.0)


def test_the_slowest_requests_are_listed_with_their_phases(traced, tmp_path):
    result, deliveries = traced
    records = [r for r in read_records(result.run_dir) if r.ok]
    data = load_inputs([result.run_dir])
    rows = data.slowest
    # the N largest client TTFTs of the run, slowest first, each the record it names
    assert len(rows) == SLOWEST_REQUESTS
    assert [r.ttft_s for r in rows] == sorted((r.ttft_s for r in records), reverse=True)[:SLOWEST_REQUESTS]
    by_key = {(r.worker, r.id): r for r in records}
    labels = {p["index"]: p["label"] for p in result.results["points"]}
    for row in rows:
        record = by_key[(row.worker, row.id)]
        assert row.ttft_s == record.ttft_s and row.label == labels[record.point]
        # each phase as the mock logged it did (its span: its queue, admission and first chunk)
        d = deliveries[record.join_key.traceparent]
        assert row.phases_s["queue"] == pytest.approx(d["wait_s"], abs=0.002)
        assert row.phases_s["prefill"] == pytest.approx(d["chunk_times_s"][0] - d["admitted_s"], abs=0.002)
    # the scripted slow one leads: the first request, its 200 ms all prefill, no queue
    first = rows[0]
    assert (first.label, first.id) == (labels[0], 0)
    assert first.phases_s["prefill"] > 0.8 * SLOW * TTFT_MS / 1e3 and first.phases_s["queue"] < 0.005
    # then the queued ones of the crowded point: most of their TTFT in the queue
    crowded = [r for r in rows[1:] if r.label == labels[1]]
    assert crowded and max(r.phases_s["queue"] for r in crowded) > 2 * TTFT_MS / 1e3
    # the report: the chart and the table in the server spans' section, the PNG beside
    files = write_report([result.run_dir], tmp_path / "report")
    md = files.markdown.read_text()
    section = md.split("## Where the time went (server spans)")[1]
    assert "### Slowest requests" in section and f"| {first.ttft_s * 1e3:,.1f} |" in section
    assert "server-phases.png" in md and any(p.name == "server-phases.png" for p in files.charts)
    html = files.html.read_text()
    assert html.index('id="phases"') < html.index("Where the time went, per load point") < html.index('id="load"')
    table = slowest_table(data)
    assert table is not None and table.rows[0][2] == "0"


def test_neither_without_server_spans(module_mock_server, tmp_path):
    url = module_mock_server(ttft_ms=5, itl_ms=1)
    result = _run(url, tmp_path / "run", loads=[UsersLoad(users=2)], requests=4)
    data = load_inputs([result.run_dir])
    assert data.phases == () and data.slowest == ()
    assert phases_chart(data) == [] and slowest_table(data) is None
    outline = build_outline(data, decide(data), [])
    assert "phases" not in [s.key for s in outline.sections]
    files = write_report([result.run_dir], tmp_path / "report")
    assert "server-phases" not in files.html.read_text() and "Slowest requests" not in files.markdown.read_text()


def test_a_slow_request_without_its_span_is_listed_with_null_phases(module_mock_server, tmp_path):
    port = free_port()
    url = module_mock_server(ttft_ms=5, itl_ms=1, otlp_skip_every=2, otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces")
    result = _run(url, tmp_path / "run", traced_port=port, loads=[UsersLoad(users=2)], requests=6)
    rows = load_inputs([result.run_dir]).slowest
    assert len(rows) == 6  # every ok request of the run, fewer than the table's N
    missing = [r for r in rows if all(v is None for v in r.phases_s.values())]
    assert len(missing) == 3  # every second span never sent: its phases null, never 0
    assert all(r.phases_s["queue"] is not None for r in rows if r not in missing)
    joined = result.results["points"][0]["server_phases"]["joined"]
    assert joined == len(rows) - len(missing)
