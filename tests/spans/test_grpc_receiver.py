"""server spans: the OTLP/gRPC side of the receiver. A real grpcio client (trace_service_pb2_grpc's
TraceServiceStub) exports to TraceService/Export: the spans land in server_spans.jsonl beside the
HTTP ones, decoded the same; a bad or too-large export is refused and counted; a taken port is one
line. End to end: the in-process mock exporting over gRPC, every span joined to its record."""

import io
import json
import urllib.request

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from rich.console import Console

from tokenbench.common.procs import free_port
from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.errors import BadInput
from tokenbench.records import RequestRecord
from tokenbench.run import run
from tokenbench.spans import receiver as receiver_module
from tokenbench.spans.otlp import PROTOBUF, encode_protobuf
from tokenbench.spans.receiver import SpanReceiver
from tokenbench.spans.shapes import QUEUE, TTFT

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _span(span_id, attrs):
    return {
        "trace_id": TRACE,
        "span_id": span_id,
        "name": "llm_request",
        "start_unix_ns": 1_700_000_000_000_000_000,
        "end_unix_ns": 1_700_000_001_000_000_000,
        "attributes": attrs,
    }


def _target(endpoint):
    assert endpoint.startswith("http://127.0.0.1:")
    return endpoint.removeprefix("http://")


def test_a_grpc_export_is_written_beside_an_http_one_and_refusals_are_counted(tmp_path):
    rx = SpanReceiver(tmp_path, lambda: 2.5)
    http = rx.start()
    try:
        assert rx.grpc_endpoint is not None and rx.grpc_endpoint != http
        with grpc.insecure_channel(_target(rx.grpc_endpoint)) as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)
            request = trace_service_pb2.ExportTraceServiceRequest.FromString(
                encode_protobuf([_span("00f067aa0ba902b7", {QUEUE: 0.25, TTFT: 0.5})], "sglang")
            )
            reply = stub.Export(request, timeout=10)
            assert reply == trace_service_pb2.ExportTraceServiceResponse()  # no partial_success
            # bytes that are no ExportTraceServiceRequest: INVALID_ARGUMENT, counted
            raw = channel.unary_unary(f"/{receiver_module.GRPC_SERVICE}/{receiver_module.GRPC_METHOD}")
            with pytest.raises(grpc.RpcError) as bad:
                raw(b"\xff\xff\xff", timeout=10)
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # the same receiver still takes OTLP/HTTP
        body = encode_protobuf([_span("00f067aa0ba902b8", {TTFT: 0.75})], "vllm")
        req = urllib.request.Request(http, data=body, headers={"Content-Type": PROTOBUF}, method="POST")
        with urllib.request.urlopen(req) as resp:
            assert resp.status == 200
    finally:
        counts = rx.stop()
    assert (counts.exports, counts.grpc_exports, counts.spans, counts.refused_exports) == (2, 1, 2, 1)
    lines = [json.loads(line) for line in (tmp_path / "server_spans.jsonl").read_text().splitlines()]
    assert lines[0]["attributes"] == {QUEUE: 0.25, TTFT: 0.5} and lines[0]["service"] == "sglang"
    assert lines[0]["trace_id"] == TRACE and lines[0]["received_s"] == 2.5
    assert lines[1]["attributes"] == {TTFT: 0.75} and lines[1]["service"] == "vllm"
    assert lines[2]["receiver"]["grpc_endpoint"] == counts.grpc_endpoint
    assert lines[2]["receiver"]["grpc_exports"] == 1


def test_a_grpc_export_over_the_size_limit_is_refused_and_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(receiver_module, "MAX_BODY_BYTES", 64)
    rx = SpanReceiver(tmp_path, lambda: 0.0)
    rx.start()
    try:
        body = encode_protobuf([_span("00f067aa0ba902b7", {"big": "x" * 100})], "vllm")
        assert 64 < len(body) <= 4 * 64  # past our limit, within what grpcio lets reach the handler
        with grpc.insecure_channel(_target(rx.grpc_endpoint)) as channel:
            raw = channel.unary_unary(f"/{receiver_module.GRPC_SERVICE}/{receiver_module.GRPC_METHOD}")
            with pytest.raises(grpc.RpcError) as big:
                raw(body, timeout=10)
        assert big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        counts = rx.stop()
    assert (counts.exports, counts.spans, counts.refused_exports) == (0, 0, 1)


def test_a_taken_grpc_port_is_one_line_and_http_only_serves_no_grpc(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    first = SpanReceiver(tmp_path / "a", lambda: 0.0)
    first.start()
    port = int(first.grpc_endpoint.rsplit(":", 1)[1])
    try:
        second = SpanReceiver(tmp_path / "b", lambda: 0.0, grpc_port=port)
        with pytest.raises(BadInput, match=f"--server-traces-grpc-port {port}: cannot listen"):
            second.start()
        assert second.stop().spans == 0  # stopped by the failed start
        only_http = SpanReceiver(tmp_path / "c", lambda: 0.0, grpc_port=None)
        only_http.start()
        assert only_http.grpc_endpoint is None
        only_http.stop()
    finally:
        first.stop()


def test_the_grpc_port_flag_reaches_its_field():
    from tokenbench.cli.flags import run_options
    from tokenbench.cli.run_flags import run_config

    params = {o.param: None for o in run_options()}
    params.update(users="2", max_requests=4, server_traces=True, server_traces_grpc_port=4317)
    assert run_config(params).server_traces_grpc_port == 4317
    params.update(server_traces_grpc_port=None)
    assert run_config(params).server_traces_grpc_port == 0


def test_spans_sent_over_grpc_join_to_their_records(mock_server, tmp_path):
    """The mock exports each reply's span over OTLP/gRPC (grpcio's aio client) to the run's gRPC
    port: every record joins, and its server queue is the mock's own logged wait (the span carries
    the mock's script: an exact answer, not a timing)."""
    grpc_port = free_port()
    url = mock_server(
        ttft_ms=20, itl_ms=2, max_streams=1, otlp_endpoint=f"http://127.0.0.1:{grpc_port}", otlp_protocol="grpc"
    )
    cfg = RunConfig(
        target=TargetConfig(url=url),
        loads=[UsersLoad(users=2)],
        stop=StopConfig(max_requests=6, drain_timeout_s=5),
        dataset=DatasetConfig(input_tokens=4, output_tokens=4, num_prompts=2),
        live=False,
        out_dir=tmp_path / "run",
        server_traces=True,
        server_traces_grpc_port=grpc_port,
    )
    out = io.StringIO()
    result = run(cfg, Console(file=out, width=300))
    assert f"OTLP/gRPC exporter at http://127.0.0.1:{grpc_port}" in out.getvalue()  # the console names both
    server = result.results["points"][0]["server_phases"]
    assert server["requests"] == 6 and server["joined"] == 6 and server["joined_share"] == 1.0
    assert server["late_spans"] == 0 and server["unknown_spans"] == 0
    assert server["receiver"]["grpc_exports"] == 6 and server["receiver"]["exports"] == 6
    records = [
        RequestRecord.from_json(json.loads(x)) for x in (result.run_dir / "records.jsonl").read_text().splitlines()
    ]
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        waits = {d["traceparent"]: d["wait_s"] for d in json.load(resp).values()}
    from tokenbench.history.export import run_tables

    rows = run_tables(result.run_dir)["records"]
    assert len(rows) == len(records) == 6
    for row in rows:
        assert row["server_queue_s"] == pytest.approx(waits[row["traceparent"]], abs=1e-9)
    assert max(waits.values()) > 0.01  # two users, one stream: the second waited for the first
