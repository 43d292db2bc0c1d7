"""server spans: parts 3-5 against the mock's own OTLP exporter: every server phase equals what the
mock logged it did (its script as run) within 2 ms; missing spans leave null phases, not 0;
unknown attributes are counted; recompute derives the same from server_spans.jsonl."""

import io
import json
import urllib.request

import pytest
from rich.console import Console

from tokenbench.common.procs import free_port
from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.history.export import run_tables as export_tables
from tokenbench.records import RequestRecord
from tokenbench.report import write_report
from tokenbench.run import run
from tokenbench.rundir.derive import recompute_run
from tokenbench.spans.phases import SpanIndex, joined_phases

TOL_S = 0.002


def _traced_run(start_mock, tmp_path, users=3, requests=9, loads=None, **knobs):
    port = free_port()
    url = start_mock(otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces", **knobs)
    cfg = RunConfig(
        target=TargetConfig(url=url),
        loads=loads or [UsersLoad(users=users)],
        stop=StopConfig(max_requests=requests, drain_timeout_s=5),
        dataset=DatasetConfig(input_tokens=4, output_tokens=6, num_prompts=4),
        live=False,
        out_dir=tmp_path / "run",
        server_traces=True,
        server_traces_port=port,
    )
    result = run(cfg, Console(file=io.StringIO()))
    lines = (result.run_dir / "records.jsonl").read_text().splitlines()
    records = [RequestRecord.from_json(json.loads(line)) for line in lines]
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        deliveries = {d["traceparent"]: d for d in json.load(resp).values()}
    return result, records, deliveries


# alone: its claim is one clock on one host to 2 ms (the spans' offset): beside two other serial
# tests a fresh clone's serial tier read 2.8 ms
@pytest.mark.alone
def test_every_phase_equals_the_mocks_script(start_mock, tmp_path):
    # one stream at a time: 3 users queue inside the server, so queue time is known and not 0
    result, records, deliveries = _traced_run(start_mock, tmp_path, ttft_ms=40, itl_ms=5, max_streams=1)
    point = result.results["points"][0]
    server = point["server_phases"]
    assert server["requests"] == len(records) == 9
    assert server["joined"] == 9 and server["joined_share"] == 1.0
    assert server["late_spans"] == 0 and server["unknown_spans"] == 0 and server["unknown_attributes"] == {}
    # same host: one clock, so the offset is 0 within what a client stamp can lag its socket write
    # (a fresh clone's serial tier once read 0.6 ms: a send stamped after the mock logged its arrival)
    assert abs(server["clock"]["offset_s"]) <= TOL_S
    assert server["clock"]["low_s"] - TOL_S <= 0.0 <= server["clock"]["high_s"] + TOL_S
    assert server["phases"]["queue"]["max"] > 0.04  # the queue was real
    clock = result.results["clock"]
    origin, origin_unix = clock["origin_monotonic_s"], clock["origin_unix_s"]
    spans = SpanIndex.read(result.run_dir / "server_spans.jsonl", origin_unix)
    phases, _ = joined_phases(records, spans, origin_unix, float("inf"))
    errors = []
    for r in records:
        d = deliveries[r.join_key.traceparent]
        p = phases[(r.point, r.worker, r.id)]
        chunks = d["chunk_times_s"]
        truth = {
            "arrival_s": d["received_s"] - origin,
            "queue_s": d["wait_s"],
            "frontend_s": 0.0,  # the mock queues on arrival
            "prefill_s": chunks[0] - d["admitted_s"],
            "server_ttft_s": chunks[0] - d["received_s"],
            "server_first_token_s": chunks[0] - origin,
            "decode_s": chunks[-1] - chunks[0],
            "server_finish_s": d["finished_s"] - origin,
        }
        for name, want in truth.items():
            errors.append(abs(getattr(p, name) - want))
        # the nominal script (TTFT 40 ms from admission; 6 chunks, 5 gaps of 5 ms): a timer never
        # fires early, but it overshoots on a loaded machine (CI's serial tier saw 11 ms), so only
        # the prefill's floor is tight; the chunks are due at absolute times (admitted + TTFT + i x
        # ITL), so a late first chunk shortens the decode (seen: 22.5 ms). The 2 ms check below is
        # against what the mock logged it did.
        assert 0.040 - TOL_S <= p.prefill_s < 0.040 + 0.050
        assert 0.0 < p.decode_s < 5 * 0.005 + 0.050
        # causal within the 2 ms: this join maps the mock's wall-clock span onto the run's clock at
        # offset 0, and the HTTP/1.1 client reads a chunk within ~0.1 ms of its write, under what
        # the two clocks' pairing (time.time() against perf_counter) resolves: seen -0.1 ms
        assert p.delivery_s >= -TOL_S and p.client_minus_server_ttft_s >= -TOL_S
    print(f"largest phase error vs the mock: {max(errors) * 1e3:.3f} ms")
    assert max(errors) < TOL_S, max(errors)
    # recompute derives the same from the run's files
    again = recompute_run(result.run_dir).to_json()["points"][0]["server_phases"]
    for key in ("joined", "requests", "late_spans", "unknown_spans", "clock", "phases"):
        assert again[key] == server[key], key
    assert again["receiver"]["spans"] == 9 and again["receiver"]["dropped_spans"] == 0
    # the Parquet export: each request's server phases as columns (null for none here: all joined)
    rows = export_tables(result.run_dir)["records"]
    assert all(abs(row["server_queue_s"] - deliveries[row["traceparent"]]["wait_s"]) < TOL_S for row in rows)
    assert all(row["client_minus_server_ttft_s"] >= -TOL_S for row in rows)  # causal within the 2 ms, as above
    # the report's breakdown: joined share, then each phase's median / slowest-1% mean
    md = write_report([result.run_dir], tmp_path / "report").markdown.read_text()
    assert "## Where the time went (server spans)" in md
    queue = server["phases"]["queue"]["p50"] * 1e3
    assert "| 9 | 100.0 | " in md and f"| {queue:,.1f} / " in md
    # the client's HTTP phases: the mock answers its headers on admission, its first chunk 40 ms later
    http = point["http_phases"]
    assert http["ttfb"]["count"] == 9 and http["headers_to_first_chunk"]["p50"] >= 0.035


def test_missing_spans_leave_null_phases_and_unknown_attributes_are_counted(start_mock, tmp_path):
    result, records, _ = _traced_run(
        start_mock, tmp_path, ttft_ms=10, itl_ms=2, otlp_skip_every=3, otlp_extra_attribute="mock.unknown"
    )
    server = result.results["points"][0]["server_phases"]
    assert server["requests"] == 9 and server["joined"] == 6
    assert server["joined_share"] == pytest.approx(6 / 9)
    assert server["unknown_attributes"] == {"mock.unknown": 6}
    assert server["phases"]["queue"]["count"] == 6  # the 3 without a span: null, not 0
    rows = export_tables(result.run_dir)["records"]
    assert sum(row["server_queue_s"] is None for row in rows) == 3


def test_under_overload_the_queue_share_rises_while_prefill_stays_flat(start_mock, tmp_path):
    # one stream at a time: 1 user never queues; 4 users wait for ~3 others' service (~30 ms each)
    loads = [UsersLoad(users=1), UsersLoad(users=4)]
    result, _, _ = _traced_run(start_mock, tmp_path, requests=8, loads=loads, ttft_ms=20, itl_ms=2, max_streams=1)
    alone, crowded = (p["server_phases"] for p in result.results["points"])
    assert alone["joined_share"] == crowded["joined_share"] == 1.0
    assert alone["phases"]["queue"]["p50"] < 0.005 < 0.05 < crowded["phases"]["queue"]["p50"]
    for point in (alone, crowded):
        assert abs(point["phases"]["prefill"]["p50"] - 0.020) < 0.005
    # the slowest 1% of the crowded point spent most of its TTFT in the queue
    slow = crowded["slowest"]["mean_s"]
    assert slow["queue"] > slow["prefill"] + slow["network"] + slow["delivery"]
