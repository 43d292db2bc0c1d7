"""End to end against the real llama.cpp server (xllamacpp + SmolLM2-135M GGUF), launched by
tokenbench itself: closed-loop users through the default path (no --url, no --backend) and an
open-loop rate through ``--backend xllamacpp``. Checks the server's own counters and samples.
"""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def _run(out, *args, output_tokens=24):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tokenbench",
            "run",
            *args,
            "--input-tokens",
            "32",
            "--output-tokens",
            str(output_tokens),
            "--out",
            str(out),
            "--no-live",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stderr


@pytest.fixture(scope="module")
def users_run(tmp_path_factory, embedded_gguf):
    return _run(
        tmp_path_factory.mktemp("e2e") / "users",
        "--users",
        "2",
        "--ramp-up",
        "2",
        "--duration",
        "14",
        "--slo",
        "ttft=5s,tpot=1s",
    )


@pytest.fixture(scope="module")
def rate_run(tmp_path_factory, embedded_gguf):
    return _run(
        tmp_path_factory.mktemp("e2e") / "rate",
        "--backend",
        "xllamacpp",
        "--model",
        str(embedded_gguf),
        "--max-num-seqs",
        "2",
        "--rate",
        "1.5",
        "--arrival",
        "constant",
        "--duration",
        "10",
        "--metrics-interval",
        "0.5",
    )


def _records(out):
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


def _scrapes(out):
    lines = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return lines[0], [s for s in lines if s["kind"] == "scrape"]


def test_embedded_run_measures_a_real_server(users_run):
    out, stderr = users_run
    assert "ready at" in stderr and "results.json" in stderr
    results = json.loads((out / "results.json").read_text())
    point = results["points"][0]
    assert results["target"]["backend"] == "xllamacpp"
    assert results["target"]["engine_version"] and results["target"]["cold_start_s"] > 0
    assert "--parallel" in results["target"]["command"]
    assert results["dataset"]["exact_lengths"] is True  # the server's /tokenize was used
    assert point["requests"]["ok"] >= 4
    assert point["requests"]["by_outcome"].get("ok") == point["requests"]["total"]
    assert 0 < point["ttft_s"]["mean"] < 5
    assert point["output_tokens_per_s"] > 0 and point["goodput_per_s"] > 0
    assert point["window_s"] == pytest.approx(12.0, abs=0.5)  # 14 s minus the 2 s ramp
    assert (out / "server.log").stat().st_size > 0


@pytest.mark.parametrize("fixture", ["users_run", "rate_run"])
def test_server_counters_match_what_the_results_report(fixture, request):
    out, _ = request.getfixturevalue(fixture)
    results = json.loads((out / "results.json").read_text())
    point = results["points"][0]
    records = _records(out)
    ok = [r for r in records if r["outcome"] == "ok"]
    assert ok and len(ok) == len(records)
    assert all(r["output_tokens_source"] == "server" for r in ok)
    # llama.cpp's own counter of generated tokens, increased over the whole point, equals the sum
    # of the usage it reported per request: nothing lost, nothing counted twice.
    assert point["server_whole_point"]["generated_tokens"] == sum(r["output_tokens"] for r in ok)
    # over the window (the same period as the client's numbers) it is less, and bracketed
    assert point["server"]["generated_tokens"] <= point["server_whole_point"]["generated_tokens"]
    assert point["server"]["bracketed"] is True
    assert point["server"]["failed_scrapes"] == 0 and point["server"]["scrapes"] >= 5
    assert 0 < point["server"]["running"]["max"] <= 2  # two slots / two users
    assert point["server"]["preemptions"] is None  # llama.cpp has no such counter: None, not 0
    assert point["gpu"] == {"available": False, "reason": point["gpu"]["reason"]} and point["gpu"]["reason"]
    assert any(w["server_running"] is not None for w in point["timeseries"])


@pytest.mark.parametrize("fixture", ["users_run", "rate_run"])
def test_llamacpp_metrics_land_in_the_samples(fixture, request):
    out, _ = request.getfixturevalue(fixture)
    header, scrapes = _scrapes(out)
    assert header["backend"] == "xllamacpp" and header["metrics_url"].endswith("/metrics")
    assert header["gpu"]["available"] is False
    assert scrapes and all(s["ok"] for s in scrapes)
    raw = scrapes[-1]["raw"]
    assert {"llamacpp:tokens_predicted_total", "llamacpp:requests_processing", "llamacpp:prompt_tokens_total"} <= set(
        raw
    )
    assert scrapes[-1]["values"]["generated_tokens"] == raw["llamacpp:tokens_predicted_total"]
    # samples and records share one clock: the scrapes span the requests
    records = _records(out)
    assert scrapes[0]["t_s"] <= min(r["sent_s"] for r in records)
    assert scrapes[-1]["t_s"] >= max(r["closed_s"] for r in records)


def test_rate_run_is_open_loop(rate_run):
    out, _ = rate_run
    point = json.loads((out / "results.json").read_text())["points"][0]
    assert point["load"]["kind"] == "rate" and point["load"]["rate_per_s"] == 1.5
    assert point["requests"]["total"] == 15  # 1.5/s for 10 s, constant arrivals
    assert point["offered_per_s"] == pytest.approx(1.5)
    assert point["requests_per_s"] <= point["offered_per_s"] + 1e-9
    assert point["populations"]["distributions"].startswith("requests scheduled in the window")


def test_the_eos_llamacpp_counts_but_never_streams_is_not_a_mismatch(embedded_gguf, smollm2_tokenizer, tmp_path):
    """llama.cpp's completion_tokens includes the EOS of a reply that ended on it (seen: 72
    counted, 71 streamed and tokenized). By the EOS rule the client tokenizer is compared with
    the streamed count: no mismatch, and TPOT divides by the streamed tokens."""
    out, _ = _run(
        tmp_path / "eos",
        "--users",
        "2",
        "--max-requests",
        "8",
        "--tokenizer",
        str(smollm2_tokenizer),
        output_tokens=200,
    )
    point = json.loads((out / "results.json").read_text())["points"][0]
    records = _records(out)
    eos = [r for r in records if r["finish_reason"] == "stop"]
    assert eos, "no reply ended on EOS within 200 tokens"
    assert all(r["server_output_tokens"] == r["client_output_tokens"] + 1 == len(r["chunk_times_s"]) + 1 for r in eos)
    assert point["tokens"]["eos_counted_not_streamed"] == len(eos)
    assert point["tokens"]["server_vs_client"]["mismatched"] == 0


def test_server_usage_counts_match_what_was_streamed(users_run):
    out, _ = users_run
    ok = [r for r in _records(out) if r["outcome"] == "ok"]
    assert all(1 <= r["output_tokens"] <= 24 for r in ok)
    # llama.cpp streams one token per chunk; an EOS or a split UTF-8 character makes one fewer chunk
    assert all(r["output_tokens"] - 2 <= len(r["chunk_times_s"]) <= r["output_tokens"] for r in ok)
    # the prompt is 32 content tokens plus the chat template
    assert all(r["prompt_tokens"] > 32 for r in ok)
    assert all(r["server_timings"] and "predicted_n" in r["server_timings"] for r in ok)


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_the_messages_and_responses_apis_count_tokens_from_the_servers_usage(tmp_path, embedded_gguf, api):
    """The embedded default on Anthropic's Messages and OpenAI's Responses routes: every reply ok,
    ended by its API's end event, its tokens from the server's usage; and, launched by
    tokenbench, the server's own CPU over the window (its process tree)."""
    out, _ = _run(tmp_path / api, "--api", api, "--users", "2", "--max-requests", "4", output_tokens=16)
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 4
    for r in records:
        assert r["outcome"] == "ok" and r["end_marker"], r.get("error")
        assert r["output_tokens_source"] == "server" and 0 < r["output_tokens"] <= 16
        assert r["prompt_tokens"] > 0
    (point,) = json.loads((out / "results.json").read_text())["points"]
    assert point["server_cpu"]["cores_mean"] > 0.05 and point["server_cpu"]["processes"] >= 1
