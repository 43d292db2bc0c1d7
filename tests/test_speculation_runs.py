"""Speculative decoding and the server's own per-request timing, end to end against the scripted
mock (``--spec-tokens``, ``--spec-accept``, ``--spec-metrics``, ``--per-request-metrics``): every
figure in records and results equals its script.

The script: k = 3 drafts a verify step, the steps accept 3, 1, 0, 2 in turn; a 24-token reply is
the prefill's token, then steps of accepted + 1 tokens until 24 (the last one cut):
chunks of 1, 4, 2, 1, 3, 4, 2, 1, 3, 3 tokens, 9 steps that accepted 3,1,0,2,3,1,0,2,3 (15 of 27
drafts), 20 ms apart.
"""

import io
import json
import urllib.request

import pytest
from rich.console import Console
from run_helpers import config, quiet, records_of

from tokenbench.common.procs import free_port
from tokenbench.config import BackendConfig, DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.records import RequestRecord
from tokenbench.report import write_report
from tokenbench.run import run
from tokenbench.spans.phases import SpanIndex, joined_phases

K = 3
STEPS = [3, 1, 0, 2, 3, 1, 0, 2, 3]
CHUNKS = [1, 4, 2, 1, 3, 4, 2, 1, 3, 3]
MOCK = {"ttft_ms": 50, "itl_ms": 20, "spec_tokens": K, "spec_accept": "3,1,0,2", "spec_metrics": "detailed"}
REQUESTS = 6

# the server's timing is checked to the millisecond against the script: alone, never beside others
pytestmark = pytest.mark.serial


@pytest.fixture(scope="module")
def speculated(module_mock_process, tmp_path_factory):
    url = module_mock_process(per_request_metrics=True, **MOCK)
    tmp = tmp_path_factory.mktemp("speculated")
    cfg = config(
        url,
        tmp,
        [UsersLoad(users=2)],
        StopConfig(max_requests=REQUESTS, drain_timeout_s=10),
        output_tokens=24,
        backend=BackendConfig(name="vllm", metrics_interval_s=0.2),  # attached: vLLM's names, usage on every chunk
    )
    result = run(cfg, quiet())
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        deliveries = list(json.load(resp).values())
    return result.results["points"][0], records_of(result.run_dir), result.run_dir, deliveries


def test_each_record_holds_its_requests_script(speculated):
    _, records, _, _ = speculated
    assert len(records) == REQUESTS and all(r["outcome"] == "ok" for r in records)
    for r in records:
        assert r["chunk_tokens"] == CHUNKS and r["output_tokens"] == 24
        assert (r["spec_steps"], r["spec_draft_tokens"], r["spec_accepted_tokens"], r["spec_tokens"]) == (9, 27, 15, K)
        assert r["spec_accepted_histogram"] == [2, 2, 2, 3]
        assert r["spec_step_accepted"] == STEPS and r["spec_step_drafted"] == [K] * 9
        assert r["spec_acceptance_length"] == pytest.approx(1 + 15 / 9)
        assert r["spec_acceptance_rate"] == pytest.approx(15 / 27)
        assert r["spec_from"] == "vllm" and r["reported_timing_from"] == "vllm"


def test_the_points_speculation_equals_the_script_by_both_weights(speculated):
    point, _, _, _ = speculated
    spec = point["speculation"]
    assert spec["requests"] == point["requests_in_window"]["ok"] > 0
    n = spec["requests"]
    assert (spec["steps"], spec["draft_tokens"], spec["accepted_tokens"]) == (9 * n, 27 * n, 15 * n)
    # every request the same script: both weights agree
    assert spec["acceptance_rate_token_weighted"] == pytest.approx(15 / 27)
    assert spec["acceptance_rate_request_weighted"] == pytest.approx(15 / 27)
    assert spec["acceptance_length_step_weighted"] == pytest.approx(1 + 15 / 9)
    assert spec["acceptance_length_request_weighted"] == pytest.approx(1 + 15 / 9)
    # position i accepted by the steps that accepted more than i: 7, 5 and 3 of 9
    assert [(p["position"], p["accepted"], p["drafted"]) for p in spec["by_position"]] == [
        (0, 7 * n, 9 * n),
        (1, 5 * n, 9 * n),
        (2, 3 * n, 9 * n),
    ]
    assert [p["rate"] for p in spec["by_position"]] == pytest.approx([7 / 9, 5 / 9, 3 / 9])


def test_the_servers_counters_say_the_same(speculated):
    """The mock's vllm:spec_decode_* counters, increased over the whole point (every request ended
    in it): the requests' figures summed."""
    point, _, _, _ = speculated
    counted = point["server_whole_point"]["speculation"]
    assert point["server_whole_point"]["bracketed"]
    assert (counted["drafts"], counted["draft_tokens"], counted["accepted_tokens"]) == (
        9 * REQUESTS,
        27 * REQUESTS,
        15 * REQUESTS,
    )
    assert counted["accepted_by_position"] == [7 * REQUESTS, 5 * REQUESTS, 3 * REQUESTS]
    assert counted["acceptance_rate"] == pytest.approx(15 / 27)
    assert counted["acceptance_length"] == pytest.approx(1 + 15 / 9)
    assert counted["acceptance_rate_by_position"] == pytest.approx([7 / 9, 5 / 9, 3 / 9])
    assert point["speculation"]["server"] == point["server"]["speculation"]  # the window's, beside


def test_per_chunk_and_per_token_itl_both_match_the_script(speculated):
    point, _, _, _ = speculated
    sizes = point["tokens_per_chunk"]
    assert sizes["count"] == len(CHUNKS) * point["speculation"]["requests"]
    assert (sizes["min"], sizes["max"]) == (1, 4) and sizes["mean"] == pytest.approx(24 / 10)
    itl, per_token = point["itl_s"], point["itl_per_token_s"]
    assert itl["p50"] == pytest.approx(0.020, abs=0.004)  # a chunk (a verify step) every 20 ms
    # each 20 ms gap over the tokens of the chunk after it: 9 gaps for 23 tokens a request
    assert per_token["count"] == 23 * point["itl_s"]["count"] // 9
    assert per_token["mean"] == pytest.approx(9 * 0.020 / 23, abs=0.002)


def test_the_servers_own_timing_on_each_record(speculated):
    """The mock reports what it did (its delivery log), so each record's ``reported_*`` equals the
    log to float rounding; the nominal script (TTFT 50 ms, 9 gaps of 20 ms) bounds it from below
    only, as a loaded machine's timers overshoot (CI's serial tier saw 68 ms for a 50 ms TTFT)."""
    point, records, _, deliveries = speculated
    logged = sorted(
        (d["chunk_times_s"][0] - d["admitted_s"], d["chunk_times_s"][-1] - d["chunk_times_s"][0], d["wait_s"])
        for d in deliveries
    )
    reported = sorted((r["reported_prefill_s"], r["reported_decode_s"], r["reported_queue_s"]) for r in records)
    assert len(reported) == len(logged) == REQUESTS
    for got, want in zip(reported, logged, strict=True):
        assert got == pytest.approx(want, abs=1e-6)
    for r in records:
        assert r["reported_queue_s"] == pytest.approx(0.0, abs=0.002)  # every request admitted at once
        assert 0.050 - 0.002 <= r["reported_prefill_s"] < 0.050 + 0.100  # the scripted TTFT, overshot
        assert r["reported_ttft_s"] == pytest.approx(r["reported_queue_s"] + r["reported_prefill_s"])
        assert (
            0.0 < r["reported_decode_s"] < 9 * 0.020 + 0.100
        )  # chunks due at absolute times: a late first one shortens it
        assert r["reported_itl_s"] == pytest.approx(r["reported_decode_s"] / 23)
        outside = (r["chunk_times_s"][0] - r["sent_s"]) - r["reported_ttft_s"]
        assert 0.0 <= outside < 0.05, outside  # loopback HTTP and the first chunk's delivery
    timing = point["server_timing"]
    assert timing["source"] == "vllm" and timing["requests"] == point["requests_in_window"]["ok"]
    prefills = sorted(r["reported_prefill_s"] for r in records)
    assert prefills[0] <= timing["prefill_s"]["p50"] <= prefills[-1]
    assert 0.0 <= timing["ttft_outside_server_s"]["p50"] < 0.05


def test_the_report_shows_acceptance_beside_both_itls(speculated, tmp_path):
    md = write_report([speculated[2]], tmp_path / "report").markdown.read_text()
    section = md[md.index("## Speculative decoding") :]
    header, _, row = [line for line in section.splitlines() if line.startswith("|")][:3]
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in row.split("|")], strict=True))
    assert cells["draft acceptance, token-weighted (%)"] == "55.6"  # 15 of 27
    assert cells["acceptance length, step-weighted (tok/step)"] == f"{1 + 15 / 9:.2f}"
    assert cells["tokens per chunk mean (tok)"] == "2.40"


def test_no_speculation_no_part(mock_server, tmp_path):
    url = mock_server(ttft_ms=5, itl_ms=2)
    run(config(url, tmp_path, [UsersLoad(users=1)], StopConfig(max_requests=2), output_tokens=4), quiet())
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    point = results["points"][0]
    assert "speculation" not in point and "server_timing" not in point and "tokens_per_chunk" not in point
    assert all(r["spec_steps"] is None and r["reported_ttft_s"] is None for r in records_of(tmp_path / "run"))


def test_the_response_timing_agrees_with_the_span_join(start_mock, tmp_path):
    """The same requests timed twice by the server: in its response (the metrics object) and in its
    OTLP span, joined by trace id. Queue and prefill agree, one stream at a time so the queue is real."""
    port = free_port()
    url = start_mock(
        otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces",
        ttft_ms=40,
        itl_ms=5,
        max_streams=1,
        per_request_metrics=True,
    )
    cfg = RunConfig(
        target=TargetConfig(url=url),
        loads=[UsersLoad(users=3)],
        stop=StopConfig(max_requests=9, drain_timeout_s=5),
        dataset=DatasetConfig(input_tokens=4, output_tokens=6, num_prompts=4),
        live=False,
        out_dir=tmp_path / "run",
        server_traces=True,
        server_traces_port=port,
    )
    result = run(cfg, Console(file=io.StringIO()))
    lines = (result.run_dir / "records.jsonl").read_text().splitlines()
    records = [RequestRecord.from_json(json.loads(line)) for line in lines]
    origin_unix = result.results["clock"]["origin_unix_s"]
    spans = SpanIndex.read(result.run_dir / "server_spans.jsonl", origin_unix)
    phases, _ = joined_phases(records, spans, origin_unix, float("inf"))
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        assert len(json.load(resp)) == 9
    assert max(r.server_timing.reported_queue_s for r in records if r.server_timing) > 0.03  # the queue was real
    for r in records:
        joined, own = phases[(r.point, r.worker, r.id)], r.server_timing
        assert own is not None and joined.queue_s is not None and joined.prefill_s is not None
        assert own.reported_queue_s == pytest.approx(joined.queue_s, abs=0.002)
        assert own.reported_prefill_s == pytest.approx(joined.prefill_s, abs=0.002)
