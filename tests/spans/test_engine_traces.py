"""server spans: for SGLang, TGI and TensorRT-LLM: each launch profile's trace flags and environment
(from the engines' own source: see each backend module's ``traces`` docstring), and each engine's
request spans, built exactly as its source emits them, joined to a record with known phases.
None of these engines runs on the test machine: the spans are shaped by hand from their code."""

import pytest

from tokenbench.backends import get_profile
from tokenbench.backends.sglang import traces as sglang_traces
from tokenbench.backends.tgi import traces as tgi_traces
from tokenbench.backends.trtllm import traces as trtllm_traces
from tokenbench.config import BackendConfig
from tokenbench.records import Outcome, RequestRecord
from tokenbench.spans.keys import JoinKeys, run_key
from tokenbench.spans.launch import traced_launch
from tokenbench.spans.phases import SpanIndex, joined_phases, point_server_phases
from tokenbench.spans.shapes import rust_duration

HTTP = "http://127.0.0.1:9/v1/traces"
GRPC = "http://127.0.0.1:8"
ORIGIN = 1_700_000_000.0
KEYS = JoinKeys(run_key(ORIGIN))


def _ns(run_s):
    return int(round((ORIGIN + run_s) * 1e9))


def test_each_profile_renders_its_engines_own_trace_flags():
    args, env = sglang_traces(HTTP)
    assert args == ("--enable-trace", "--otlp-traces-endpoint", HTTP)
    assert env == {
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        "SGLANG_OTLP_EXPORTER_SCHEDULE_DELAY_MILLIS": "200",
    }
    args, env = tgi_traces(GRPC)
    assert args == ("--otlp-endpoint", GRPC) and env == {"OTEL_BSP_SCHEDULE_DELAY": "200"}
    args, env = trtllm_traces(HTTP)
    assert args == ("--otlp_traces_endpoint", HTTP)
    assert env == {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "200"}
    assert get_profile("tgi").traces_protocol == "grpc"
    assert {get_profile(n).traces_protocol for n in ("vllm", "sglang", "trtllm")} == {"http"}


def test_a_launch_is_pointed_at_the_endpoint_its_exporter_speaks():
    said = []
    sglang = traced_launch(BackendConfig(name="sglang"), HTTP, False, said.append, GRPC)
    assert sglang is not None and sglang.knobs.engine_args == ("--enable-trace", "--otlp-traces-endpoint", HTTP)
    assert said[-1] == f"server traces: SGLang sends its spans to {HTTP} (OTLP/HTTP)"
    # TGI's router exports over gRPC only: the gRPC endpoint, and what its spans lack, in one line
    tgi = traced_launch(BackendConfig(name="tgi"), HTTP, False, said.append, GRPC)
    assert tgi is not None and tgi.knobs.engine_args == ("--otlp-endpoint", GRPC)
    assert tgi.knobs.engine_env == {"OTEL_BSP_SCHEDULE_DELAY": "200"}
    assert f"sends its spans to {GRPC} (OTLP/gRPC)" in said[-1] and "no first token" in said[-1]
    assert said[-1].count("\n") == 0
    # the user's own environment wins over the profile's
    mine = BackendConfig(name="trtllm", knobs={"engine_env": {"OTEL_BSP_SCHEDULE_DELAY": "50"}})
    trt = traced_launch(mine, HTTP, False, said.append, GRPC)
    assert trt is not None and trt.knobs.engine_args == ("--otlp_traces_endpoint", HTTP)
    assert trt.knobs.engine_env["OTEL_BSP_SCHEDULE_DELAY"] == "50"
    assert "return_perf_metrics: true" in said[-1]
    # without a gRPC receiver a gRPC-only exporter has nowhere to send: said, not pretended
    alone = traced_launch(BackendConfig(name="tgi"), HTTP, False, said.append)
    assert alone == BackendConfig(name="tgi") and said[-1].endswith("no traces")
    # a layer that drops the traceparent (Triton's relay) leaves its engine's spans unjoinable: said
    triton = BackendConfig(name="triton", upstream="vllm")
    assert traced_launch(triton, HTTP, False, said.append, GRPC) == triton
    assert "does not pass the request's traceparent on to vLLM" in said[-1] and said[-1].endswith("no traces")
    for name in ("llamacpp", "ollama", "lmdeploy-pytorch", "mlc"):
        assert traced_launch(BackendConfig(name=name), HTTP, False, said.append, GRPC) == BackendConfig(name=name)
        assert said[-1].endswith("no traces")


def _record(id, sent, first, last):
    return RequestRecord(point=0, id=id, scheduled_s=sent, sent_s=sent, chunk_times_s=[first, last], outcome=Outcome.OK)


def _join(lines, record):
    spans = SpanIndex.of(lines, ORIGIN)
    phases, clock = joined_phases([record], spans, ORIGIN, float("inf"))
    return spans, phases.get((0, None, record.id)), clock


def _line(id, name, start_s, end_s, attrs, received_s=9.0):
    return {
        "trace_id": KEYS.trace_id(0, id, None),
        "span_id": f"{abs(hash(name)) % (1 << 63):016x}",
        "name": name,
        "start_unix_ns": _ns(start_s),
        "end_unix_ns": _ns(end_s),
        "attributes": attrs,
        "received_s": received_s,
    }


def sglang_request(id, arrival, queue, prefill, ttft, e2e):
    """One SGLang request's spans as its source emits them (python/sglang/srt/observability/
    trace.py, req_time_stats.py): the root " Req <rid[:8]>" from arrival to finish with the finish
    attributes (time_in_model_prefill = first token - the API server's dispatch, so it holds the
    queue), a thread span, and the scheduler's slices in the same trace."""
    dispatch = 0.004  # tokenize + dispatch, before the scheduler receives the request
    recv_to_queue = 0.001  # request_process: the scheduler's receive -> wait-queue entry
    queued = arrival + dispatch + recv_to_queue
    first_token = arrival + ttft
    root = {
        "rid": f"{id:032x}",
        "module": "sglang::request",
        "gen_ai.usage.prompt_tokens": 12,
        "gen_ai.usage.completion_tokens": 5,
        "gen_ai.usage.cached_tokens": 8,
        "gen_ai.request.id": f"{id:032x}",
        "gen_ai.request.max_tokens": 5,
        "gen_ai.response.model": "m",
        "gen_ai.response.finish_reasons": '["length"]',
        "gen_ai.latency.time_to_first_token": ttft,
        "gen_ai.latency.e2e": e2e,
        "gen_ai.latency.time_in_model_decode": e2e - ttft,
        "gen_ai.latency.time_in_model_inference": e2e - dispatch,
        "gen_ai.latency.time_in_model_prefill": ttft - dispatch,
    }
    thread = {"host_id": "abc", "pid": 7, "thread_label": "Scheduler", "tp_rank": 0}
    return [
        _line(id, "Scheduler [TP 0] (host:abc | pid:7)", arrival + dispatch, arrival + e2e, thread),
        _line(id, "tokenize", arrival, arrival + 0.002, {}),
        _line(id, "request_process", arrival + dispatch, queued, {}),
        _line(id, "prefill_waiting", queued, queued + queue, {}),
        _line(id, "prefill_forward", queued + queue, queued + queue + prefill, {}),
        _line(id, "decode_loop", first_token, arrival + e2e, {"decode_ct": 4}),
        _line(id, f" Req {id:08x}"[:13], arrival, arrival + e2e, root),  # the root ends last: exported last
    ]


def test_sglang_spans_give_queue_and_prefill_from_its_scheduler_slices():
    arrival, queue, prefill, ttft, e2e = 1.0005, 0.030, 0.020, 0.056, 0.100
    record = _record(3, 1.0, 1.0 + 0.0005 + ttft + 0.001, 1.0 + 0.0005 + e2e)
    spans, p, _ = _join(sglang_request(3, arrival, queue, prefill, ttft, e2e), record)
    assert p is not None
    assert p.queue_s == pytest.approx(queue, abs=1e-6)  # prefill_waiting, not the root's prefill attribute
    assert p.prefill_s == pytest.approx(prefill, abs=1e-6)  # prefill_forward
    assert p.server_ttft_s == pytest.approx(ttft) and p.decode_s == pytest.approx(e2e - ttft)
    assert p.frontend_s == pytest.approx(ttft - queue - prefill, abs=1e-6)  # tokenize, dispatch, receive: 6 ms
    assert p.network_s == pytest.approx(0.0005, abs=1e-6)
    assert p.delivery_s == pytest.approx(0.001, abs=1e-6)
    assert p.server_finish_s == pytest.approx(arrival + e2e, abs=1e-6)
    # the root's own attributes are all known; the helper spans' are not counted
    out = point_server_phases(0, [record], [record], spans, ORIGIN, 0.0, 10.0)
    assert out.unknown_attributes == {} and out.joined == 1 and out.unknown_spans == 0
    # a trace whose root never came is not joined (its slices alone have no arrival)
    slices_only = [line for line in sglang_request(4, arrival, queue, prefill, ttft, e2e) if "Req" not in line["name"]]
    spans, p, _ = _join(slices_only, _record(4, 1.0, 1.06, 1.1))
    assert p is None and spans.partial == 1


def tgi_request(id, name, arrival, validation, queue, inference):
    """One TGI request's spans as its source emits them: the handler span (router/src/server.rs
    #[instrument], its Duration fields recorded as Debug strings), with tracing-opentelemetry's
    code/thread attributes; OtelAxumLayer's HTTP span and the backend's per-request children in
    the same trace."""
    total = validation + queue + inference
    handler = {
        "total_time": f"{total * 1e3:.6f}ms",
        "validation_time": f"{validation * 1e6:.3f}µs",
        "queue_time": f"{queue * 1e3:.6f}ms",
        "inference_time": f"{inference * 1e3:.6f}ms",
        "time_per_token": f"{inference / 5 * 1e3:.6f}ms",
        "seed": "None",
        "code.filepath": "router/src/server.rs",
        "code.namespace": "text_generation_router::server",
        "code.lineno": 476,
        "thread.id": 3,
        "thread.name": "tokio-runtime-worker",
        "busy_ns": 123456,
        "idle_ns": 654321,
    }
    http = {"http.request.method": "POST", "http.route": "/generate_stream", "otel.kind": "Server"}
    start_infer = arrival + validation + queue
    return [
        _line(id, "HTTP request", arrival - 0.0002, arrival + total, http),
        _line(id, "queued", arrival + validation, start_infer, {}),
        _line(id, "infer", start_infer, arrival + total, {}),
        _line(id, "send_generation", start_infer + 0.02, start_infer + 0.02, {"generation": "Generation { .. }"}),
        _line(id, name, arrival, arrival + total, handler),
    ]


def test_tgi_spans_give_validation_queue_and_e2e_and_leave_what_it_does_not_time_null():
    arrival, validation, queue, inference = 2.001, 0.000850, 0.025, 0.080
    record = _record(5, 2.0, 2.11, 2.12)
    spans, p, _ = _join(tgi_request(5, "generate_stream", arrival, validation, queue, inference), record)
    assert p is not None
    assert p.frontend_s == pytest.approx(validation) and p.queue_s == pytest.approx(queue)
    assert p.server_finish_s == pytest.approx(arrival + validation + queue + inference, abs=1e-6)
    assert p.network_s == pytest.approx(0.001, abs=1e-6)
    # no first token in TGI's spans: null, never 0 or a guess
    assert p.prefill_s is None and p.server_ttft_s is None and p.decode_s is None
    assert p.delivery_s is None and p.client_minus_server_ttft_s is None
    out = point_server_phases(0, [record], [record], spans, ORIGIN, 0.0, 10.0)
    assert out.unknown_attributes == {} and out.phases["queue"].count == 1 and out.phases["prefill"].count == 0
    # the OpenAI routes' handlers are read the same
    for name in ("chat_completions", "completions", "generate"):
        _, p, _ = _join(tgi_request(6, name, arrival, validation, queue, inference), _record(6, 2.0, 2.11, 2.12))
        assert p is not None and p.queue_s == pytest.approx(queue)


def test_rust_duration_debug_text_in_seconds():
    assert rust_duration("1.5s") == 1.5
    assert rust_duration("25.000001ms") == pytest.approx(0.025000001)
    assert rust_duration("850µs") == pytest.approx(850e-6) and rust_duration("850us") == pytest.approx(850e-6)
    assert rust_duration("120ns") == pytest.approx(120e-9)
    assert rust_duration("soon") is None and rust_duration(3) is None


def test_tensorrt_llm_spans_give_queue_ttft_and_e2e_and_derive_prefill_and_decode():
    """tensorrt_llm/llmapi/tracing.py SpanAttributes, as its own test asserts them: usage tokens,
    sampling parameters, TTFT, E2E and time in queue (arrival -> first scheduled), finish reasons
    as an array; no prefill or decode attribute."""
    arrival, queue, ttft, e2e = 3.0008, 0.012, 0.045, 0.090
    attrs = {
        "gen_ai.usage.completion_tokens": 5,
        "gen_ai.usage.prompt_tokens": 12,
        "gen_ai.request.max_tokens": 10,
        "gen_ai.request.top_p": 0.9,
        "gen_ai.request.temperature": 0.9,
        "gen_ai.request.id": "7",
        "gen_ai.latency.time_to_first_token": ttft,
        "gen_ai.latency.e2e": e2e,
        "gen_ai.latency.time_in_queue": queue,
        "gen_ai.response.finish_reasons": '["length"]',
    }
    record = _record(7, 3.0, 3.0 + 0.0008 + ttft + 0.0005, 3.0 + 0.0008 + e2e)
    spans, p, _ = _join([_line(7, "llm_request", arrival, arrival + e2e, attrs)], record)
    assert p is not None
    assert p.queue_s == pytest.approx(queue) and p.server_ttft_s == pytest.approx(ttft)
    assert p.prefill_s == pytest.approx(ttft - queue) and p.decode_s == pytest.approx(e2e - ttft)
    assert p.frontend_s is None  # inside its queue: not separable, not 0
    assert p.delivery_s == pytest.approx(0.0005, abs=1e-6)
    out = point_server_phases(0, [record], [record], spans, ORIGIN, 0.0, 10.0)
    assert out.unknown_attributes == {}


def test_vllms_span_keeps_its_own_prefill_and_frontend():
    attrs = {
        "gen_ai.latency.time_in_queue": 0.010,
        "gen_ai.latency.time_in_model_prefill": 0.030,
        "gen_ai.latency.time_to_first_token": 0.045,
        "gen_ai.latency.time_in_model_decode": 0.050,
        "gen_ai.latency.e2e": 0.096,
    }
    _, p, _ = _join([_line(8, "llm_request", 4.001, 4.097, attrs)], _record(8, 4.0, 4.047, 4.097))
    assert p is not None and p.prefill_s == pytest.approx(0.030) and p.decode_s == pytest.approx(0.050)
    assert p.frontend_s == pytest.approx(0.005)
