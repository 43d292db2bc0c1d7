"""server spans: the OTLP/HTTP receiver (JSON and protobuf, refusals and drops counted), the launch
of a traced engine, and the join's counts of late, unknown and failed spans (pure)."""

import json
import urllib.error
import urllib.request

import pytest

from tokenbench.backends.vllm import traces
from tokenbench.config import BackendConfig
from tokenbench.records import Outcome, RequestRecord
from tokenbench.spans.keys import JoinKeys, run_key
from tokenbench.spans.launch import traced_launch
from tokenbench.spans.otlp import encode_protobuf
from tokenbench.spans.phases import GRACE_S, SpanIndex, clock_offset, point_server_phases, server_span
from tokenbench.spans.receiver import SpanReceiver
from tokenbench.spans.shapes import QUEUE, TTFT


def _post(url, body, kind):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": kind}, method="POST")
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _otlp_json(trace_id, attrs):
    span = {
        "traceId": trace_id,
        "spanId": "00f067aa0ba902b7",
        "name": "llm_request",
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": [{"key": k, "value": v} for k, v in attrs.items()],
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "vllm"}}]}
    return json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}).encode()


def test_receiver_takes_json_and_protobuf_and_counts_what_it_refuses_or_drops(tmp_path):
    rx = SpanReceiver(tmp_path, lambda: 1.5, max_spans=2)
    url = rx.start()
    try:
        trace = "4bf92f3577b34da6a3ce929d0e0e4736"
        body = _otlp_json(trace, {QUEUE: {"doubleValue": 0.25}, "gen_ai.usage.prompt_tokens": {"intValue": "7"}})
        assert _post(url, body, "application/json") == 200
        span = {
            "trace_id": trace,
            "span_id": "00f067aa0ba902b8",
            "name": "llm_request",
            "start_unix_ns": 1,
            "end_unix_ns": 2,
            "attributes": {TTFT: 0.5},
        }
        assert _post(url, encode_protobuf([span, span], "mock"), "application/x-protobuf") == 200  # 1 of 2 kept
        assert _post(url, b"not json", "application/json") == 400
        assert _post(url, b"{}", "text/plain") == 415
    finally:
        counts = rx.stop()
    assert (counts.exports, counts.spans, counts.dropped_spans, counts.refused_exports) == (2, 2, 1, 2)
    lines = [json.loads(line) for line in (tmp_path / "server_spans.jsonl").read_text().splitlines()]
    assert lines[0]["attributes"] == {QUEUE: 0.25, "gen_ai.usage.prompt_tokens": 7}
    assert lines[0]["service"] == "vllm" and lines[0]["received_s"] == 1.5
    assert lines[1]["attributes"] == {TTFT: 0.5} and lines[1]["trace_id"] == trace
    assert lines[2] == {"receiver": {**counts.__dict__}}


def test_a_launched_vllm_is_pointed_at_the_receiver_and_others_say_no_traces():
    said = []
    vllm = traced_launch(BackendConfig(name="vllm"), "http://127.0.0.1:9/v1/traces", False, said.append)
    assert vllm is not None
    assert vllm.knobs.engine_args[-2:] == ("--otlp-traces-endpoint", "http://127.0.0.1:9/v1/traces")
    assert vllm.knobs.engine_env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"
    assert traces("x")[0] == ("--otlp-traces-endpoint", "x")
    llama = traced_launch(BackendConfig(name="llamacpp"), "http://e", False, said.append)
    assert llama == BackendConfig(name="llamacpp")
    traced_launch(None, "http://127.0.0.1:4318/v1/traces", True, said.append)
    assert "no traces" in said[1] and said[1].count("\n") == 0
    assert "http://127.0.0.1:4318/v1/traces" in said[2]


def test_a_serving_layer_points_the_engine_behind_it_and_ray_serve_llm_says_no_traces():
    """Ray Serve relaying to vLLM (--upstream vllm) passes the join key on (ray_serve_app), so the
    upstream vLLM is pointed at the receiver; Ray Serve LLM (vLLM inside Ray, reached through a Ray
    handle, not HTTP) has no join key to pass: no traces, said in one line."""
    said = []
    relayed = traced_launch(
        BackendConfig(name="ray", upstream="vllm"), "http://127.0.0.1:9/v1/traces", False, said.append
    )
    assert relayed is not None and relayed.knobs.engine_args[-2:] == (
        "--otlp-traces-endpoint",
        "http://127.0.0.1:9/v1/traces",
    )
    assert "vLLM sends its spans" in said[0]
    alone = traced_launch(BackendConfig(name="ray"), "http://e", False, said.append)
    assert alone == BackendConfig(name="ray") and "no traces" in said[1]


ORIGIN = 1_700_000_000.0


def _record(id, sent, first, outcome=Outcome.OK):
    return RequestRecord(point=0, id=id, scheduled_s=sent, sent_s=sent, chunk_times_s=[first], outcome=outcome)


def _span(keys, id, arrival_run_s, ttft, received_s):
    return {
        "trace_id": keys.trace_id(0, id, None),
        "start_unix_ns": int((ORIGIN + arrival_run_s) * 1e9),
        "attributes": {TTFT: ttft, QUEUE: 0.01, "other.thing": 1},
        "received_s": received_s,
    }


def test_join_counts_late_unknown_and_failed_spans_and_no_span_is_null():
    keys = JoinKeys(run_key(ORIGIN))
    records = [_record(i, 1.0 + i, 1.2 + i) for i in range(4)] + [_record(4, 5.0, 5.1, Outcome.HTTP_ERROR)]
    end = 10.0
    lines = [
        _span(keys, 0, 1.001, 0.1, 10.5),
        _span(keys, 1, 2.001, 0.1, end + GRACE_S + 1),  # late
        _span(keys, 4, 5.001, 0.05, 10.0),  # a failed request's
        _span(keys, 9, 6.0, 0.1, 10.0),  # names no record of this point
        {"trace_id": "ab" * 16, "start_unix_ns": 0, "attributes": {}, "received_s": 3.0},  # another trace
        {"receiver": {"spans": 5, "dropped_spans": 0}},
    ]
    spans = SpanIndex.of(lines, ORIGIN)
    out = point_server_phases(0, records, records, spans, ORIGIN, 0.0, end)
    assert (out.requests, out.joined, out.spans) == (4, 1, 4)
    assert (out.late_spans, out.unknown_spans, out.failed_with_span) == (1, 2, 1)
    assert out.unknown_attributes == {"other.thing": 4}
    assert out.phases["queue"].count == 1  # requests 2 and 3 have no span: null, never 0
    assert out.phases["client_minus_server_ttft"].mean == pytest.approx(0.1)
    assert out.receiver == {"spans": 5, "dropped_spans": 0}


def test_the_clock_offset_comes_from_the_join_and_is_stated():
    keys = JoinKeys(run_key(ORIGIN))
    r = _record(0, 1.0, 1.5)
    # the server's clock 0.3 s behind: its arrival 0.7 s before the client sent -> moved, and said so
    span = server_span(_span(keys, 0, 0.7 + 0.0005, 0.2, 2.0))
    clock = clock_offset([(r, span)], ORIGIN)
    assert clock.offset_s == pytest.approx(0.2995) and "nearest bound" in clock.method
    assert clock.low_s == pytest.approx(0.2995) and clock.high_s == pytest.approx(0.5995)
    ok = clock_offset([(r, server_span(_span(keys, 0, 1.001, 0.2, 2.0)))], ORIGIN)
    assert ok.offset_s == 0.0 and "0 lies within" in ok.method
    assert clock_offset([], ORIGIN).low_s is None


def test_the_flags_reach_their_fields_and_a_taken_port_is_one_line(tmp_path):
    from tokenbench.cli.flags import run_options
    from tokenbench.cli.run_flags import run_config
    from tokenbench.errors import BadInput

    params = {o.param: None for o in run_options()}
    params.update(users="2", max_requests=4, server_traces=True, server_traces_port=4318)
    cfg = run_config(params)
    assert cfg.server_traces is True and cfg.server_traces_port == 4318
    params.update(server_traces=None, server_traces_port=None)
    assert run_config(params).server_traces is False
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = SpanReceiver(tmp_path / "a", lambda: 0.0)
    port = int(first.start().split(":")[2].split("/")[0])
    try:
        with pytest.raises(BadInput, match=f"--server-traces-port {port}: cannot listen"):
            second = SpanReceiver(tmp_path / "b", lambda: 0.0, port)
            second.start()
        assert second.stop().spans == 0  # stopped by the failed start: a second stop only answers
    finally:
        first.stop()


def test_a_spans_file_torn_by_a_kill_still_reads_what_was_flushed(tmp_path):
    keys = JoinKeys(run_key(ORIGIN))
    whole = [_span(keys, i, 1.001 + i, 0.1, 10.0) for i in range(2)]
    path = tmp_path / "server_spans.jsonl"
    torn = json.dumps(_span(keys, 2, 3.001, 0.1, 10.0))[:40]  # the receiver's thread died mid-write
    path.write_text("".join(json.dumps(line) + "\n" for line in whole) + torn)
    spans = SpanIndex.read(path, ORIGIN)
    assert spans is not None and len(spans.by_request) == 2
